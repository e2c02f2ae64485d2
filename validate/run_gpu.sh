#!/usr/bin/env bash
# One script for the GPU measurements of validate/: build every microbenchmark in
# validate/kernels/ with nvcc for sm_90a, run each with a time limit, and write
#   $OUT/results.csv      all rows (columns of validate/data/public_measurements.csv)
#   $OUT/provenance.json  device, driver, CUDA, clocks summary, git SHA, date, command, per-program status
#   $OUT/clocks.csv       nvidia-smi samples every 500 ms during the run (SM/mem clock, power, temp)
#   $OUT/sass_counts.txt  SASS opcode counts per kernel (hot loop and whole kernel)
#   $OUT/log.txt          build and run log (stderr of every program)
# Then, on the workstation: python -m validate.collect <fetched dir>  (see validate/collect.py).
#
# Usage:  bash validate/run_gpu.sh              real run (needs a GPU; $OUT or ./validate/build/run-*)
#         bash validate/run_gpu.sh --dry-run    compile everything into validate/build/, run nothing
#         bash validate/run_gpu.sh --sass       dry run + SASS counts into validate/build/sass_counts.txt
# Env:    CUBLASLT_ROOT  directory with include/cublasLt.h and lib*/libcublasLt.so* (else searched:
#                        $CUDA_HOME, nvcc's toolkit, /usr/local/cuda, python3's nvidia/cu13|cublas)
#         PERFMODEL_GIT_SHA  commit to record when the tree travels without .git
#         JOBS           parallel compiles (default: nproc)
# It never changes clocks, power limits or any other GPU setting: it measures the card as found.
#
# Budget on paper (H200, the real run must fit in 8 minutes = 480 s; time limit per step in
# brackets). "runs" = warm-up + timed repetitions per case; expected times from datasheet rates
# (4.8 TB/s HBM, ~790 TFLOP/s bf16 measured here before, 1.98 GHz SM clock):
#   step           cases                                  runs/case  expected per run   est.   [limit]
#   compile        7 programs, JOBS in parallel           -          -                  60 s   [240 s]
#   hbm            4 HBM (4 GiB arrays) + 4 L2-resident   17         1-3 ms (+flush)     5 s   [ 60 s]
#   pipes          22 instruction variants                12         0.5-6 ms            3 s   [ 60 s]
#   philox         8 (2 generators x 2 outputs x 2 xor)   23         0.05-0.3 ms         3 s   [ 60 s]
#   gemm_cublaslt  2 dtypes x (8 square + 144 decode)     ~38 (16 for 4 algos + 22)
#                                                                    0.01-11 ms         25 s   [150 s]
#   rng_gemm       5 RNG grid sizes x {alone, seq, conc}  12         1.5-2 ms            5 s   [ 60 s]
#   rowwise        4 norms + 4 softmax + 2 adds           23         0.1-0.6 ms          3 s   [ 60 s]
#   wgmma          3 modes x 1-2 warpgroups (FP8 k-blocks) 12        1-3 ms              2 s   [ 60 s]
#   torch_bench    SDPA flash/cuDNN fwd+bwd, dropout, decode 13 (3+10) 0.05-25 ms        90 s   [150 s]
#   dropout_bench  3 libs (SDPA flash, SDPA cuDNN, flash_attn) x 8 shapes x p in {0, 0.125}, interleaved
#                                                         10+26      0.2-10 ms          35 s   [ 90 s]
#   sass dump      cuobjdump of each binary                -          -                   5 s   [ 60 s]
#   total (sum of estimates)                                                           ~210 s; sum of limits 1030 s,
#   but the run stops starting programs once 450 s have passed (a late program is recorded as skipped).
set -u -o pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
KDIR="$HERE/kernels"
BUILD="$HERE/build"
MODE=run
case "${1:-}" in
  --dry-run) MODE=dry ;;
  --sass) MODE=sass ;;
  "") ;;
  *) echo "usage: $0 [--dry-run|--sass]" >&2; exit 2 ;;
esac
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
ARCH=(-gencode=arch=compute_90a,code=sm_90a)
NVCC_FLAGS=(-O3 -std=c++17 "${ARCH[@]}" -Xcompiler -Wall,-Wno-unknown-pragmas -Werror all-warnings -lineinfo)
# (-Wno-unknown-pragmas: the host compiler does not know "#pragma unroll" in __host__ __device__ code)
T0=$(date +%s)

# program -> needs cuBLASLt (1/0) and per-program run time limit (seconds)
PROGRAMS=(hbm pipes philox gemm_cublaslt rng_gemm rowwise wgmma)
declare -A NEEDS_LT=([hbm]=0 [pipes]=0 [philox]=0 [gemm_cublaslt]=1 [rng_gemm]=1 [rowwise]=0
                     [wgmma]=0)
declare -A LIMIT=([hbm]=60 [pipes]=60 [philox]=60 [gemm_cublaslt]=150 [rng_gemm]=60 [rowwise]=60
                  [wgmma]=60)
declare -A ESTIMATE=([hbm]=5 [pipes]=3 [philox]=3 [gemm_cublaslt]=25 [rng_gemm]=5 [rowwise]=3
                     [wgmma]=2)

mkdir -p "$BUILD"
if [ "$MODE" = run ]; then
  OUT="${OUT:-$BUILD/run-$(date -u +%Y%m%dT%H%M%SZ)}"
  mkdir -p "$OUT"
  LOG="$OUT/log.txt"
else
  LOG="$BUILD/build.log"
fi
: >"$LOG"
log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$LOG" >&2; }

# ---- cuBLASLt discovery ----
find_cublaslt() {
  local cands=() d
  [ -n "${CUBLASLT_ROOT:-}" ] && cands+=("$CUBLASLT_ROOT")
  [ -n "${CUDA_HOME:-}" ] && cands+=("$CUDA_HOME")
  if command -v nvcc >/dev/null; then
    cands+=("$(cd "$(dirname "$(readlink -f "$(command -v nvcc)")")/.." && pwd)")
  fi
  cands+=(/usr/local/cuda)
  local py
  for py in python3 "$ROOT/.venv/bin/python"; do
    command -v "$py" >/dev/null 2>&1 || continue
    while IFS= read -r d; do
      [ -n "$d" ] && cands+=("$d/cu13" "$d/cu12" "$d/cublas")
    done < <("$py" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null)
  done
  for d in "${cands[@]}"; do
    [ -f "$d/include/cublasLt.h" ] || continue
    local lib
    for lib in "$d/lib64" "$d/lib" "$d/targets/x86_64-linux/lib"; do
      if [ -e "$lib/libcublasLt.so" ]; then
        LT_INC="$d/include"; LT_LIB="$lib"; LT_LINK="-lcublasLt"; return 0
      fi
      local f
      f=$(ls "$lib"/libcublasLt.so.* 2>/dev/null | head -n1)
      if [ -n "$f" ]; then
        LT_INC="$d/include"; LT_LIB="$lib"; LT_LINK="-l:$(basename "$f")"; return 0
      fi
    done
  done
  return 1
}

# ---- build ----
declare -A STATUS=() REASON=()
if ! command -v nvcc >/dev/null; then
  log "nvcc not found: nothing can be built"
  for p in "${PROGRAMS[@]}"; do STATUS[$p]=skipped; REASON[$p]="nvcc not found"; done
else
  HAVE_LT=0
  if find_cublaslt; then HAVE_LT=1; log "cuBLASLt: include $LT_INC, lib $LT_LIB ($LT_LINK)"
  else log "cuBLASLt headers/library not found: cuBLASLt programs are not built"; fi
  log "nvcc: $(nvcc --version | tail -n1); compiling with $JOBS parallel jobs"
  running=0
  for p in "${PROGRAMS[@]}"; do
    if [ "${NEEDS_LT[$p]}" = 1 ] && [ "$HAVE_LT" = 0 ]; then
      STATUS[$p]=skipped; REASON[$p]="cuBLASLt not found (set CUBLASLT_ROOT)"; continue
    fi
    extra=()
    if [ "${NEEDS_LT[$p]}" = 1 ]; then
      extra=(-I"$LT_INC" -L"$LT_LIB" "$LT_LINK" -Xlinker -rpath -Xlinker "$LT_LIB")
    fi
    rm -f "$BUILD/$p" "$BUILD/$p.rc"
    ( nvcc "${NVCC_FLAGS[@]}" -I"$KDIR" -o "$BUILD/$p" "$KDIR/$p.cu" "${extra[@]}" \
        >"$BUILD/$p.build.log" 2>&1; echo $? >"$BUILD/$p.rc" ) &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n 2>/dev/null || wait; running=$((running - 1)); fi
  done
  wait
  for p in "${PROGRAMS[@]}"; do
    [ -n "${STATUS[$p]:-}" ] && continue
    rc=$(cat "$BUILD/$p.rc" 2>/dev/null || echo 1)
    cat "$BUILD/$p.build.log" >>"$LOG"
    if [ "$rc" = 0 ] && [ -x "$BUILD/$p" ]; then STATUS[$p]=built
    else STATUS[$p]=build_failed; REASON[$p]="nvcc exit $rc (see $p.build.log)"; fi
  done
fi
for p in "${PROGRAMS[@]}"; do
  case "${STATUS[$p]}" in
    built) echo "BUILT $p" ;;
    skipped) echo "SKIPPED $p: ${REASON[$p]}" ;;
    *) echo "FAILED $p: ${REASON[$p]}"; tail -n 20 "$BUILD/$p.build.log" >&2 ;;
  esac
done
log "build finished"

sass_counts() {  # $1 = output file
  local cuobjdump
  cuobjdump=$(command -v cuobjdump || true)
  if [ -z "$cuobjdump" ]; then echo "cuobjdump not found" >"$1"; return; fi
  : >"$1"
  for p in "${PROGRAMS[@]}"; do
    [ "${STATUS[$p]}" = built ] || [ "${STATUS[$p]}" = ok ] || [ "${STATUS[$p]}" = failed ] \
      || [ "${STATUS[$p]}" = timeout ] || continue
    echo "== $p" >>"$1"
    timeout 60 "$cuobjdump" -sass "$BUILD/$p" 2>>"$LOG" | awk -f "$KDIR/sass_counts.awk" \
      | { command -v c++filt >/dev/null && c++filt || cat; } | sort >>"$1"
  done
}

if [ "$MODE" != run ]; then
  if [ "$MODE" = sass ]; then sass_counts "$BUILD/sass_counts.txt"; log "SASS counts: $BUILD/sass_counts.txt"; fi
  for p in "${PROGRAMS[@]}"; do [ "${STATUS[$p]}" = build_failed ] && exit 1; done
  exit 0
fi

# ---- real run ----
log "budget (estimate / limit, s): compile ~60/240; $(for p in "${PROGRAMS[@]}"; do printf '%s %s/%s; ' "$p" "${ESTIMATE[$p]}" "${LIMIT[$p]}"; done)torch_bench 90/150; sass 5/60; total ~200 s of 480 s"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
  --format=csv -lms 500 >"$OUT/clocks.csv" 2>>"$LOG" &
SMI_PID=$!
RESULTS="$OUT/results.csv"
echo "id,source,hardware,library,op,dtype,shape_json,metric,value,unit,notes" >"$RESULTS"
DEADLINE=450
declare -A SECONDS_TAKEN=()
run_step() {  # name limit command...
  local name=$1 limit=$2; shift 2
  local now=$(( $(date +%s) - T0 ))
  if [ $((now + 10)) -gt "$DEADLINE" ]; then
    STATUS[$name]=skipped; REASON[$name]="not started: ${now}s elapsed, deadline ${DEADLINE}s"
    log "$name: ${REASON[$name]}"; return
  fi
  [ $((now + limit)) -gt "$DEADLINE" ] && limit=$((DEADLINE - now))
  log "$name: start (limit ${limit}s)"
  local t=$(date +%s) rc
  timeout --kill-after=5 "$limit" "$@" >"$OUT/.$name.csv" 2>>"$LOG"
  rc=$?
  SECONDS_TAKEN[$name]=$(( $(date +%s) - t ))
  # Keep every row printed, even from a program that later failed a check (its rows before the
  # failure passed their own checks); drop the per-program header.
  grep -v '^id,source,hardware,' "$OUT/.$name.csv" >>"$RESULTS" || true
  local nrows
  nrows=$(grep -vc '^id,source,hardware,' "$OUT/.$name.csv" || true)
  rm -f "$OUT/.$name.csv"
  if [ "$rc" = 0 ]; then STATUS[$name]=ok; REASON[$name]="$nrows rows"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then STATUS[$name]=timeout; REASON[$name]="killed after ${limit}s; $nrows rows kept"
  else STATUS[$name]=failed; REASON[$name]="exit $rc; $nrows rows kept (see log.txt)"; fi
  log "$name: ${STATUS[$name]} (${REASON[$name]}) in ${SECONDS_TAKEN[$name]}s"
}
for p in "${PROGRAMS[@]}"; do
  [ "${STATUS[$p]}" = built ] || { log "$p: not run (${STATUS[$p]}: ${REASON[$p]:-})"; continue; }
  run_step "$p" "${LIMIT[$p]}" "$BUILD/$p"
done
PROGRAMS+=(torch_bench)
if python3 -c 'import torch' 2>/dev/null; then
  run_step torch_bench 150 env PYTHONUNBUFFERED=1 python3 "$HERE/torch_bench.py"
else
  STATUS[torch_bench]=skipped; REASON[torch_bench]="python3 has no torch"; log "torch_bench: skipped (no torch)"
fi
PROGRAMS+=(dropout_bench)
if python3 -c 'import torch' 2>/dev/null; then
  run_step dropout_bench 90 env PYTHONUNBUFFERED=1 python3 "$HERE/dropout_bench.py"
else
  STATUS[dropout_bench]=skipped; REASON[dropout_bench]="python3 has no torch"; log "dropout_bench: skipped (no torch)"
fi
sass_counts "$OUT/sass_counts.txt"
kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null

# ---- provenance ----
status_json=$(for p in "${PROGRAMS[@]}"; do
  printf '%s\t%s\t%s\t%s\n' "$p" "${STATUS[$p]}" "${REASON[$p]:-}" "${SECONDS_TAKEN[$p]:-}"; done)
STATUS_TSV="$status_json" CMDLINE="$0 $*" ELAPSED=$(( $(date +%s) - T0 )) ROOT="$ROOT" OUT="$OUT" \
python3 - <<'PY' 2>>"$LOG" || log "provenance.json could not be written"
import csv, datetime, json, os, statistics, subprocess

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:  # a missing tool is recorded, never fatal
        return f"unavailable ({e})"

q = "name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,memory.total,pci.bus_id"
smi = sh(f"nvidia-smi --query-gpu={q} --format=csv,noheader").splitlines()
fields = [s.strip() for s in (smi[0].split(",") if smi else [])]
info = dict(zip(q.split(","), fields))
sha = os.environ.get("PERFMODEL_GIT_SHA") or sh(f"git -C {os.environ['ROOT']} rev-parse HEAD") or "unknown"
dirty = sh(f"git -C {os.environ['ROOT']} status --porcelain 2>/dev/null | head -n 20")
clk = {"sm": [], "mem": []}
try:
    with open(os.path.join(os.environ["OUT"], "clocks.csv")) as f:
        for row in csv.reader(f):
            try:  # skips the header and "[N/A]" samples
                sm, mem = float(row[1].split()[0]), float(row[2].split()[0])
            except (IndexError, ValueError):
                continue
            clk["sm"].append(sm)
            clk["mem"].append(mem)
except OSError:
    pass
def summ(v):
    return {"n": len(v), "median_mhz": statistics.median(v), "min_mhz": min(v), "max_mhz": max(v)} if v else None
programs = {}
for line in os.environ["STATUS_TSV"].splitlines():
    name, status, reason, secs = (line.split("\t") + ["", "", "", ""])[:4]
    programs[name] = {"status": status, "detail": reason, "seconds": int(secs) if secs else None}
nvcc = sh("nvcc --version | tail -n1")
prov = {
    "device_name": info.get("name", "unknown"),
    "driver_version": info.get("driver_version"),
    "cuda_driver_api": sh("nvidia-smi | grep -o 'CUDA Version: [0-9.]*'"),
    "nvcc": nvcc,
    "clocks_max": {"sm": info.get("clocks.max.sm"), "mem": info.get("clocks.max.mem")},
    "power_limit": info.get("power.limit"),
    "memory_total": info.get("memory.total"),
    "clocks_during_run": {"sm": summ(clk["sm"]), "mem": summ(clk["mem"])},
    "git_sha": sha,
    "git_dirty": bool(dirty and not dirty.startswith("unavailable") and "fatal" not in dirty),
    "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "command": os.environ["CMDLINE"],
    "hostname": os.uname().nodename,
    "elapsed_s": int(os.environ["ELAPSED"]),
    "programs": programs,
}
with open(os.path.join(os.environ["OUT"], "provenance.json"), "w") as f:
    json.dump(prov, f, indent=2)
PY
log "done in $(( $(date +%s) - T0 ))s: $(($(wc -l <"$RESULTS") - 1)) rows in $RESULTS"
for p in "${PROGRAMS[@]}"; do printf '%-14s %-12s %s\n' "$p" "${STATUS[$p]}" "${REASON[$p]:-}"; done
