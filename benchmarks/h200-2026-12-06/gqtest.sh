#!/bin/bash
# One GPU: test_cuda_gemv_q of this tree alone (build-gpu, sm_90), its output in $OUT/test_cuda_gemv_q.txt.
# Run on the GPU host from the project root with .deps carried.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
mkdir -p $OUT
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/tests/test_cuda_gemv_q > /tmp/build.log 2>&1 \
    || { tail -30 /tmp/build.log; exit 1; }
FRIGG_ROOT=$PWD timeout 120 build-gpu/tests/test_cuda_gemv_q > $OUT/test_cuda_gemv_q.txt 2>&1
echo "test_cuda_gemv_q rc $?: $(tail -1 $OUT/test_cuda_gemv_q.txt)"
grep -E "^FAIL" $OUT/test_cuda_gemv_q.txt | head
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $OUT/test_cuda_gemv_q.txt
