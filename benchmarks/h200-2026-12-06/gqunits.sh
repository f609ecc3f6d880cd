#!/bin/bash
# One GPU: the quantized CUDA-core GEMV at batch 1 with 1, 2 or 4 output units per warp and 1, 2 or 4 warps per
# block (fk_ctx_set_gemv_q_simt). test_cuda_gemv_q (every shape against the default's bits and the CPU ops),
# then kernels/dev/gemv_q --quick --no-prefill: each shape's time beside the default simt, auto, tc and bf16.
# Run on the GPU host from the project root with .deps carried. LIMIT (default 400): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-400} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu
git log -1 --format='tree of %H (the device tool copies the working tree; git status below)' >> $R/log.txt 2>&1
git status --short >> $R/log.txt 2>&1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/tests/test_cuda_gemv_q \
    build-gpu/dev/gemv_q > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
timeout $(( $(left) - 150 )) $N/dev/gemv_q --quick --no-prefill > $R/gemv_q.txt 2>&1
el "dev gemv_q rc $?"
FRIGG_ROOT=$ROOT timeout $(( $(left) - 10 )) $N/tests/test_cuda_gemv_q > $R/test_cuda_gemv_q.txt 2>&1
el "test_cuda_gemv_q rc $?: $(tail -1 $R/test_cuda_gemv_q.txt)"
grep -E "^FAIL" $R/test_cuda_gemv_q.txt | head -20 | tee -a $R/log.txt
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >> $R/smi.txt 2>&1
el done
