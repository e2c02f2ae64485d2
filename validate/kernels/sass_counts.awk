# Counts SASS opcodes per kernel in `cuobjdump -sass` output (run_gpu.sh saves this per program in
# sass_counts.txt) so the instruction a microbenchmark means to exercise can be confirmed.
# For each function it prints two lines: "loop" = the opcodes inside the largest backward-branch
# region (the hot loop), and "all" = the whole kernel. Opcode = first token after the address
# column with any predicate stripped, modifiers kept to two levels (three for IMAD/I2F/I2FP/F2I,
# e.g. IMAD.WIDE.U32, I2FP.F32.U32).
function hex(s,   i, v) {  # portable (mawk has no strtonum)
  v = 0
  s = tolower(s)
  sub(/^0x/, "", s)
  for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
  return v
}
function flush_fn(   i, j, best, bs, be, k, n, key, lo, hi) {
  if (fn == "") return
  best = -1
  for (i = 1; i <= nins; i++)
    if (tgt[i] != "" && tgt[i] < addr[i] && (addr[i] - tgt[i]) > best) {
      best = addr[i] - tgt[i]; bs = tgt[i]; be = addr[i]
    }
  delete c_all; delete c_loop
  n = 0
  for (i = 1; i <= nins; i++) {
    c_all[ops[i]]++
    if (best >= 0 && addr[i] >= bs && addr[i] <= be) { c_loop[ops[i]]++; n++ }
  }
  printf "%s loop(%d instr):", fn, n
  for (k in c_loop) if (k ~ INTEREST) printf " %s=%d", k, c_loop[k]
  printf "\n%s all(%d instr):", fn, nins
  for (k in c_all) if (k ~ INTEREST) printf " %s=%d", k, c_all[k]
  printf "\n"
  nins = 0; delete addr; delete ops; delete tgt
}
BEGIN {
  INTEREST = "^(FFMA|FMUL|FADD|IMAD|IADD3|VIADD|LOP3|MUFU|I2F|I2FP|F2I|F2F|SHF|PRMT|LEA|ISETP|HGMMA|QGMMA|HMMA|STG|LDG|IMNMX|VIMNMX|POPC|FLO|SEL|BMSK|SHFL|FMNMX|FSETP|F2FP|HADD2|HFMA2|VABSDIFF4)"
}
/Function :/ { flush_fn(); fn = $3; next }
/^ *\/\*[0-9a-f]+\*\// {
  line = $0
  match(line, /\/\*[0-9a-f]+\*\//)
  a = hex(substr(line, RSTART + 2, RLENGTH - 4))
  sub(/^ *\/\*[0-9a-f]+\*\/ */, "", line)
  sub(/^@!?U?P[0-9T] +/, "", line)
  split(line, t, /[ ;]/)
  op = t[1]
  if (op == "") next
  np = split(op, parts, ".")
  key = parts[1]
  if (np >= 2) key = key "." parts[2]
  if (np >= 3 && (parts[1] == "IMAD" || parts[1] == "I2F" || parts[1] == "I2FP" || parts[1] == "F2I")) key = key "." parts[3]
  nins++
  addr[nins] = a
  ops[nins] = key
  tgt[nins] = ""
  if (parts[1] == "BRA" && match(line, /0x[0-9a-f]+/))
    tgt[nins] = hex(substr(line, RSTART, RLENGTH))
}
END { flush_fn() }
