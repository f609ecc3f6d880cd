#!/bin/bash
# One H200, the tree of the commit named in COMMANDS.md: test_cuda_attn_decode, test_cuda_gemv_q; frigg-bench decode
# with the bf16 and the int8 KV cache at batch 1, 2, 4, 16, 32 and ctx 512, 4096, and the int8 cache alone at batch 64
# (decode.jsonl: the source of PERFORMANCE.md's int8-KV table). Run on the GPU host from the project root with .deps
# carried.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; TESTS="test_cuda_attn_decode test_cuda_gemv_q"
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench \
    $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for x in $TESTS; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 150 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
timeout 150 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,2,4,16,32 --ctx 512,4096 \
    --kv-dtypes bf16,int8 decode >> $R/decode.jsonl 2>> $R/decode.txt; echo "decode rc $?" | tee -a $R/log.txt
timeout 90 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 64 --ctx 512,4096 --kv-dtypes int8 \
    decode >> $R/decode.jsonl 2>> $R/decode.txt; echo "decode 64 rc $?" | tee -a $R/log.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
