# Counts SASS opcodes per kernel in `cuobjdump -sass` output, for the instructions the
# microbenchmarks mean to exercise (run_gpu.sh saves this per program in sass_counts.txt).
# Opcode = first token after the "/*addr*/" column, predicate (@P0) stripped; modifiers kept
# up to two levels (IMAD.WIDE.U32, LOP3.LUT, MUFU.EX2, I2F.U32 ...).
/Function :/ { fn = $3; next }
/^ *\/\*[0-9a-f]+\*\// {
  line = $0
  sub(/^ *\/\*[0-9a-f]+\*\/ */, "", line)
  sub(/^@!?U?P[0-9T] +/, "", line)
  split(line, t, /[ ;]/)
  op = t[1]
  if (op == "") next
  n = split(op, parts, ".")
  key = parts[1]
  if (n >= 2) key = key "." parts[2]
  if (n >= 3 && (parts[1] == "IMAD" || parts[1] == "I2F" || parts[1] == "I2FP" || parts[1] == "F2I")) key = key "." parts[3]
  cnt[fn, key]++
  fns[fn] = 1
}
END {
  for (f in fns) {
    printf "%s:", f
    for (k in cnt) {
      split(k, kk, SUBSEP)
      if (kk[1] == f && kk[2] ~ /^(FFMA|FMUL|FADD|IMAD|IADD3|LOP3|MUFU|I2F|I2FP|F2I|F2F|SHF|PRMT|LEA|ISETP|HGMMA|QGMMA|HMMA|STG|LDG|IMNMX|VIMNMX|POPC|FLO|SEL|BMSK)/)
        printf " %s=%d", kk[2], cnt[k]
    }
    printf "\n"
  }
}
