"""Store a fetched GPU run (from validate/run_gpu.sh) under validate/results/<device>/<date>/.

Usage:
    python -m validate.collect RUN_DIR [--dest validate/results] [--force]

RUN_DIR is the directory the run wrote ($OUT): results.csv, provenance.json and clocks.csv, and
optionally sass_counts.txt and log.txt. The rows are copied to
``<dest>/<device>/<date>/results.csv`` where device is the driver's device name normalized
("NVIDIA H200" -> "nvidia-h200") and date the run's UTC date. Each row gains provenance in its
``notes`` (device, median SM and memory clock sampled during the run, driver, CUDA, git SHA, run
time) and a globally unique ``id`` (``<device>-<date>-<original id>``). The nvidia-smi samples are
stored as ``clocks.txt``, not ``.csv``: every ``*.csv`` under validate/results/ is read as
measurements by ``perfmodel validate`` (validate.measurements.default_sources). Rows whose
hardware name the model cannot resolve are reported (they would fail ``perfmodel validate``).
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import statistics
import sys
from pathlib import Path

COLUMNS = ["id", "source", "hardware", "library", "op", "dtype", "shape_json", "metric", "value",
           "unit", "notes"]
DEFAULT_DEST = Path(__file__).resolve().parent / "results"


def device_slug(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200'; anything not alphanumeric becomes one dash."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or "unknown-device"


def _clock_medians(clocks_csv: Path) -> dict[str, float | None]:
    """Median SM / memory clock (MHz) of nvidia-smi's --format=csv samples."""
    sm, mem = [], []
    if clocks_csv.is_file():
        with clocks_csv.open() as f:
            reader = csv.reader(f)
            header = [h.strip().lower() for h in next(reader, [])]
            i_sm = next((i for i, h in enumerate(header) if h.startswith("clocks.current.sm")
                         or h.startswith("clocks.sm")), None)
            i_mem = next((i for i, h in enumerate(header) if h.startswith("clocks.current.memory")
                          or h.startswith("clocks.mem")), None)
            for row in reader:
                for idx, out in ((i_sm, sm), (i_mem, mem)):
                    if idx is None or idx >= len(row):
                        continue
                    try:
                        out.append(float(row[idx].split()[0]))
                    except (ValueError, IndexError):
                        pass  # "[N/A]" or a truncated last line
    return {"sm": statistics.median(sm) if sm else None,
            "mem": statistics.median(mem) if mem else None}


def collect(run_dir: str | Path, dest: str | Path = DEFAULT_DEST, force: bool = False) -> Path:
    """Copy one run into dest/<device>/<date>/ and return that directory."""
    run = Path(run_dir)
    results, prov_path = run / "results.csv", run / "provenance.json"
    for p in (results, prov_path):
        if not p.is_file():
            raise SystemExit(f"{run}: missing {p.name} (is this a validate/run_gpu.sh output?)")
    prov = json.loads(prov_path.read_text())
    device = device_slug(prov.get("device_name", "unknown"))
    date_utc = str(prov.get("date_utc", "unknown"))
    day = date_utc[:10] if re.match(r"\d{4}-\d{2}-\d{2}", date_utc) else "unknown-date"
    target = Path(dest) / device / day
    if target.exists() and any(target.iterdir()) and not force:
        raise SystemExit(f"{target} exists (use --force to replace it)")
    target.mkdir(parents=True, exist_ok=True)

    clocks = _clock_medians(run / "clocks.csv")
    med = prov.get("clocks_during_run") or {}
    sm_clk = clocks["sm"] if clocks["sm"] is not None else (med.get("sm") or {}).get("median_mhz")
    mem_clk = clocks["mem"] if clocks["mem"] is not None else (med.get("mem") or {}).get("median_mhz")
    fmt = lambda v: "n/a" if v is None else f"{v:.0f} MHz"  # noqa: E731
    extra = (f"device={prov.get('device_name', 'unknown')}; sm_clock_median={fmt(sm_clk)}; "
             f"mem_clock_median={fmt(mem_clk)}; driver={prov.get('driver_version')}; "
             f"cuda={prov.get('cuda_driver_api')}; nvcc={prov.get('nvcc')}; "
             f"git={prov.get('git_sha')}{'+dirty' if prov.get('git_dirty') else ''}; "
             f"run={date_utc}")
    with results.open(newline="") as f:
        rows = list(csv.DictReader(f))
    prefix = f"{device}-{day}-"
    out_rows = []
    for r in rows:
        missing = [c for c in COLUMNS if c not in r]
        if missing:
            raise SystemExit(f"{results}: row {r.get('id', '?')} lacks columns {missing}")
        r = {c: r[c] for c in COLUMNS}
        if not r["id"].startswith(prefix):
            r["id"] = prefix + r["id"]
        r["notes"] = f"{r['notes']}; {extra}" if r["notes"] else extra
        out_rows.append(r)
    with (target / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(out_rows)
    shutil.copyfile(prov_path, target / "provenance.json")
    if (run / "clocks.csv").is_file():
        shutil.copyfile(run / "clocks.csv", target / "clocks.txt")
    for name in ("sass_counts.txt", "log.txt"):
        if (run / name).is_file():
            shutil.copyfile(run / name, target / name)

    unresolved = sorted({r["hardware"] for r in out_rows if not _resolves(r["hardware"])})
    if unresolved:
        print(f"warning: hardware names the model does not know: {', '.join(unresolved)} "
              "(add an alias in hwspecs/ before `perfmodel validate`)", file=sys.stderr)
    return target


def _resolves(name: str) -> bool:
    try:
        from perfmodel.hardware import hardware
        hardware(name)
        return True
    except Exception:  # InputError for an unknown name; anything else is not ours to judge here
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="directory written by validate/run_gpu.sh ($OUT)")
    ap.add_argument("--dest", default=str(DEFAULT_DEST), help="results root (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="replace an existing <device>/<date>/")
    args = ap.parse_args(argv)
    target = collect(args.run_dir, args.dest, args.force)
    n = sum(1 for _ in open(target / "results.csv")) - 1
    print(f"{n} rows -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
