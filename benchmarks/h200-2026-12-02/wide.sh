#!/bin/bash
# Decode steps of more than 8 rows on one H200 (the CUDA engine's cuBLAS path beyond 8 rows, 8-row GEMV passes
# under --batch-invariant): test_cuda_engine (its wide-batch test) and test_scheduler, then frigg-bench decode on
# the full-size random model at batch 1..64 and ctx 512/2048/4096 (64 x 4096 does not fit: 206 GB of KV), and
# the default engine against --batch-invariant at batch 16 and 64, alternated twice.
# Run on the GPU host from the project root with .deps (pack-deps libcurl4-openssl-dev) and .devrun carried;
# .devrun/snap.tar.xz is `git archive HEAD -- . ':!benchmarks' ':!golden'` of the commit measured.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=$OUT; S=/tmp/s; mkdir -p $S
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps && cd $S || exit 1
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_engine \
    b/tests/test_scheduler > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for t in test_cuda_engine test_scheduler; do
  FRIGG_ROOT=$S timeout 240 b/tests/$t > /tmp/$t.log 2>&1; echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|wide B|kernels per token" /tmp/$t.log | head -20 >> $R/tests.txt
done
el tests
B="b/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32"
timeout 200 $B --batch 1,8,16,32,64 --ctx 512,2048 decode >> $R/decode.jsonl 2>> $R/decode.txt; echo "decode 512,2048 rc $?" >> $R/decode.txt
el decode-a
timeout 120 $B --batch 16,32 --ctx 4096 decode >> $R/decode.jsonl 2>> $R/decode.txt; echo "decode 4096 rc $?" >> $R/decode.txt
el decode-b
for rep in 1 2; do
  timeout 60 $B --batch 16,64 --ctx 512 decode >> $R/ab-default.jsonl 2>> $R/decode.txt
  timeout 60 $B --batch-invariant --batch 16,64 --ctx 512 decode >> $R/ab-invariant.jsonl 2>> $R/decode.txt
done
el ab
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
python3 $OLDPWD/benchmarks/h200-2026-12-02/summary.py $R/decode.jsonl $R/ab-*.jsonl | tee $R/summary.txt
el done
