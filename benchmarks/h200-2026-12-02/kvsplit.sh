#!/bin/bash
# On one H200: the int8-KV decode attention split over the keys (attention_decode_i8.cu): test_cuda_kv_int8 and
# test_cuda_engine; frigg-bench decode of the full-size random model (--random-mimir) with --kv-dtypes bf16,int8
# at ctx 4096, batch 1, 16, 32, and int8 alone at batch 64. Run on the GPU host from the project root with .deps
# and .devrun carried (.devrun/snap.tar.xz: `git archive <commit> -- . ':!benchmarks' ':!golden' | xz`).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
R=$OUT; B=b; S=/tmp/s
mkdir -p $S && tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
cd $S
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_kv_int8 b/tests/test_cuda_engine \
    > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for t in test_cuda_kv_int8 test_cuda_engine; do
  FRIGG_ROOT=$S FRIGG_BIN=$S/$B/bin timeout 60 $B/tests/$t > /tmp/t.log 2>&1
  echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|int8 KV" /tmp/t.log | head -20 >> $R/tests.txt
done
el tests
timeout 80 $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,16,32 --ctx 4096 --kv-dtypes bf16,int8 decode > $R/kv.jsonl 2> $R/kv.txt
echo "kv rc $?" >> $R/kv.txt
timeout 40 $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 64 --ctx 4096 --kv-dtypes int8 decode >> $R/kv.jsonl 2>> $R/kv.txt
echo "kv64 rc $?" >> $R/kv.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
