#!/bin/bash
# One H200: each decode GEMV asking the L2 for the next GEMV's matrix (fk_gemv_ahead) against the tree without it
# ("base", .devrun/base-src.tar.xz: `git archive HEAD -- . ':!benchmarks' ':!golden' | xz` of the commit before).
# test_cuda_engine, test_cuda_gemv and test_cuda_gemv_q on the new tree; the full-size random model
# (make_fixtures.py --mimir-size) quantized to int8 and int4 g128; then, arms alternated twice, frigg-bench matrix
# --builds over the three at batch 1, 2, 4, 8, 16, ctx 512 (the defaults), the same with --dequant-rows off at batch
# 1, 2, 4 (the stored weights), and frigg-bench decode --random-mimir at batch 1, 2, ctx 4096 with both KV caches
# (ab.jsonl; ab-summary.txt by ab_builds.py); with MEMCHECK=1, compute-sanitizer memcheck of the new tree's
# test_cuda_engine in the time left (memcheck-test_cuda_engine.txt). Run on the GPU host from the project root
# with .deps and .devrun carried. NAME: the result folder (default l2ahead); LIMIT (default 590): the seconds the
# call may run; CELLS=short: batch 1, 2, 4, 8 (stored: 1, 2) and ctx 4096 at batch 1 only.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
NAME=${NAME:-l2ahead}
T0=$(date +%s); R=/tmp/$NAME; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4; mkdir -p $R; trap 'tar czf $OUT/$NAME.tgz -C /tmp $NAME' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
git status --short >> $R/log.txt 2>&1
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_engine test_cuda_gemv test_cuda_gemv_q"
( make -j10 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-quantize \
    $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1; echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 /tmp/build-*.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
( nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 8 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
  nice timeout 200 $N/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 8 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt ) &
qpid=$!
for x in $TESTS; do
  FRIGG_ROOT=$ROOT timeout 200 $N/tests/$x > $R/$x.txt 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' $R/$x.txt | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL" $R/$x.txt | head -12 | tee -a $R/log.txt
done
el tests
wait $qpid; grep rc /tmp/q.txt | tee -a $R/log.txt
el quantized
BU="--builds /tmp/mimir,/tmp/m8,/tmp/m4 --ctx 512 --repeats 3 --steps 32"
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    [ $(left) -gt 60 ] || { el "no time left"; break 2; }
    tag() { sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl; }
    if [ "$CELLS" = short ]; then BD=1,2,4,8; BS=1,2; BK=1; else BD=1,2,4,8,16; BS=1,2,4; BK=1,2; fi
    timeout 120 $B/bin/frigg-bench $BU --batch $BD matrix 2>> $R/ab.txt | tag
    timeout 60 $B/bin/frigg-bench $BU --batch $BS --dequant-rows off matrix 2>> $R/ab.txt | tag
    timeout 60 $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch $BK --ctx 4096 --kv-dtypes bf16,int8 decode \
        2>> $R/ab.txt | tag
    el "ab $rep $arm"
  done
done
python3 benchmarks/h200-2026-12-04/ab_builds.py $R/ab.jsonl > $R/ab-summary.txt 2>&1; cat $R/ab-summary.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
if [ "$MEMCHECK" = 1 ] && [ $(left) -gt 40 ]; then
  compute-sanitizer --version | tail -1 >> $R/log.txt
  FRIGG_ROOT=$ROOT timeout $(( $(left) - 10 )) compute-sanitizer --tool memcheck $N/tests/test_cuda_engine > $R/memcheck-test_cuda_engine.txt 2>&1
  echo "memcheck test_cuda_engine rc $? (3: errors found, 124: stopped by the time limit)" | tee -a $R/log.txt
  grep -E "passed, [0-9]+ failed|ERROR SUMMARY" $R/memcheck-test_cuda_engine.txt | tail -2 | tee -a $R/log.txt
fi
el done
