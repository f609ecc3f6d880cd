#!/bin/bash
# One H200: the 16-row tensor-core GEMV with its second row's x staged by cp.async and rows 8..15 reduced and
# stored by warp 1 beside warp 0 ("new"), against a6273f4 ("v1": the first 16-row version) and a5bf00d ("base",
# where 9..64 rows take the cuBLAS step) — test_cuda_gemv, test_cuda_gemv_q, test_cuda_engine; frigg-bench decode
# of the three builds, bf16, batch 8, 12, 16 at ctx 512 and 16 at ctx 2048, arms alternated twice (ab.jsonl,
# ab-summary.txt: new against base, ab-v1.txt: new against v1); the full-size random model (make_fixtures.py
# --mimir-size) quantized to int8 and int4 g128, frigg-bench matrix --builds over the three at batch 12 and 16, ctx
# 512 (builds-new.jsonl); Nsight Compute kernel durations of one batch-16 decode step (ncu-b16.csv.gz). Run on
# the GPU host from the project root with .deps and .devrun carried: .devrun/base-src.tar.xz is `git archive
# a5bf00d -- . ':!benchmarks' ':!golden' | xz`, .devrun/v1-src.tar.xz the same of a6273f4,
# .devrun/mimir-tok.json.xz ../shared/data/tokenizers/mimir-equivalent.tokenizer.json.
# LIMIT (default 590): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b; V=/tmp/v1/b
rm -rf /tmp/base /tmp/v1; mkdir -p /tmp/base /tmp/v1 && tar xJf .devrun/base-src.tar.xz -C /tmp/base && tar xJf .devrun/v1-src.tar.xz -C /tmp/v1 \
  && ln -sfn $ROOT/.deps /tmp/base/.deps && ln -sfn $ROOT/.deps /tmp/v1/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_gemv test_cuda_gemv_q test_cuda_engine"
( make -j10 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-quantize \
    $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1
  echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j3 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
( cd /tmp/v1 && make -j3 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-v1.log 2>&1
  echo "v1 rc $?" >> /tmp/build-v1.log ) &
vpid=$!
wait $npid $bpid $vpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log /tmp/build-v1.log | tee -a $R/log.txt
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] && [ -x $V/bin/frigg-bench ] || { tail -30 /tmp/build-*.log | tee -a $R/log.txt; exit 1; }
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
  for arm in base v1 new; do B=$N; [ $arm = base ] && B=$P; [ $arm = v1 ] && B=$V
    for cx in "--batch 8,12,16 --ctx 512" "--batch 16 --ctx 2048"; do
      timeout 100 $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 $cx --kv-dtypes bf16 decode 2>> $R/ab.txt \
        | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    done
  done
  el "ab $rep"
done
grep -v '"arm":"v1"' $R/ab.jsonl > /tmp/ab-base.jsonl; grep -v '"arm":"base"' $R/ab.jsonl | sed 's/"arm":"v1"/"arm":"base"/' > /tmp/ab-v1.jsonl
python3 benchmarks/h200-2026-12-02/ab_summary.py /tmp/ab-base.jsonl | tee $R/ab-summary.txt
python3 benchmarks/h200-2026-12-02/ab_summary.py /tmp/ab-v1.jsonl | sed 's/base/v1  /g' | tee $R/ab-v1.txt
el ab
timeout $(( $(left) - 60 )) $N/bin/frigg-bench --builds /tmp/mimir,/tmp/m8,/tmp/m4 --batch 12,16 --ctx 512 --repeats 3 --steps 32 \
    matrix > $R/builds-new.jsonl 2>> $R/builds.txt
el "builds new"
timeout 50 ncu --profile-from-start off --launch-count 660 --csv --metrics gpu__time_duration.sum $N/bin/frigg-bench --random-mimir \
    --seed 1 --repeats 3 --steps 1 --batch 16 --ctx 512 --kv-dtypes bf16 decode 2> $R/ncu.txt | gzip > $R/ncu-b16.csv.gz
el ncu
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
