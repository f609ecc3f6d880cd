#!/bin/bash
# One H200: the tensor-core GEMV with batch rows 8..15 in the mma's upper half (16 rows per pass), the GEMV decode
# step up to 16 rows, against a5bf00d ("base", where 9..64 rows take the cuBLAS step) — test_cuda_gemv,
# test_cuda_gemv_q, test_cuda_engine; frigg-bench decode of both builds, bf16, batch 8, 12, 16 at ctx 512 and 16
# at ctx 2048, arms alternated twice (ab.jsonl, ab-summary.txt); then the full-size random model
# (make_fixtures.py --mimir-size) quantized to int8 and int4 g128, and frigg-bench matrix --builds over the three
# at batch 8, 12, 16, ctx 512, on each arm (builds-new.jsonl, builds-base.jsonl). Run on the GPU host from the
# project root with .deps and .devrun carried: .devrun/base-src.tar.xz is `git archive a5bf00d -- . ':!benchmarks'
# ':!golden' | xz`, .devrun/mimir-tok.json.xz ../shared/data/tokenizers/mimir-equivalent.tokenizer.json.
# LIMIT (default 590): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_gemv test_cuda_gemv_q test_cuda_engine"
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-quantize \
    $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1
  echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 /tmp/build-*.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
( nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 6 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
  nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 6 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt ) &
qpid=$!
for x in $TESTS; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 150 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL|first difference" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
grep -E "^wide B" /tmp/test_cuda_engine.log >> $R/log.txt
el tests
wait $qpid; grep rc /tmp/q.txt | tee -a $R/log.txt
el quantized
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    for cx in "--batch 8,12,16 --ctx 512" "--batch 16 --ctx 2048"; do
      timeout 100 $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 $cx --kv-dtypes bf16 decode 2>> $R/ab.txt \
        | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    done
  done
  el "ab $rep"
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
el ab
for arm in new base; do B=$N; [ $arm = base ] && B=$P
  [ $(left) -gt 40 ] || break
  timeout $(( $(left) - 10 )) $B/bin/frigg-bench --builds /tmp/mimir,/tmp/m8,/tmp/m4 --batch 8,12,16 --ctx 512 --repeats 3 --steps 32 \
      matrix > $R/builds-$arm.jsonl 2>> $R/builds.txt
  el "builds $arm"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
