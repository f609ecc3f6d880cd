#!/bin/bash
# Registers of kernels/gemv_q.cu's CUDA-core kernels (ptxas -v, sm_90) and the file's compile time, at each
# commit given (default: 61c6073, the base; 61b41ca, QKV's epilogue operands loaded early at batch 1 and 2; HEAD).
# One line per commit and kernel of DFM-Mimir's layer shapes: rows B, epilogue (1 RESID, 2 SWIGLU, 3 QKV), dtype
# (1 int8, 2 int4), rounds U, units per warp P, registers, spill bytes. Run from the project root on the
# development machine (nvcc 13.0): bash benchmarks/cpu-checks-2026-12-06/ptxas-gemv_q.sh > OUT
set -e
for c in ${@:-61c6073 61b41ca HEAD}; do
  d=$(mktemp -d); git archive "$c" kernels common | tar x -C "$d"
  t0=$(date +%s.%N)
  (cd "$d" && nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Icommon -Ikernels -Xptxas -v -cubin \
      -o /dev/null kernels/gemv_q.cu 2> ptxas.txt)
  t1=$(date +%s.%N)
  echo "# $c ($(git rev-parse --short "$c")): gemv_q.cu compiled in $(echo "$t1 - $t0" | bc | cut -c1-5) s (sm_90 cubin)"
  python3 - "$d/ptxas.txt" <<'PY'
import re, sys
cur = None
for line in open(sys.argv[1]):
    m = re.search(r"Compiling entry function '(\S+)'", line)
    if m:
        cur = m.group(1); spill = "0"; continue
    m = re.search(r"(\d+) bytes spill stores", line)
    if m: spill = m.group(1)
    m = re.search(r"Used (\d+) registers", line)
    if not (m and cur and "gemv_q_kernel" in cur): continue
    g = re.search(r"gemv_q_kernelILi(\d)ELi(\d)ELb(\d)ELi(\d)ELi(\d)ELi(\d+)ELi(\d)E(?:Li(\d)E)?", cur).groups()
    B, R, N, E, DT, U, SC, P = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7] or "1"
    mimir = (E == "1" and N == "0") or (E in "23" and N == "1" and U == "6") or (E == "0" and N == "0" and U == "6")
    if mimir and SC != "2":
        print(f"B{B} epi{E} dt{DT} U{U} P{P}: {m.group(1)} registers, {spill} bytes spilled")
PY
  rm -rf "$d"
done
