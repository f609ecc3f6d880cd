#!/bin/bash
# One GPU: the quantized CUDA-core GEMV with its epilogue operands loaded right after the PDL wait (QKV's at batch 1
# only: GQAB_SKIP_DEV=1 leaves out step 1 and the base's dev build), one epilogue pass for all the units of a warp,
# and at batch 1 units per warp by shape (gemv_q.cu's gq_shape: two per warp in blocks of two for down_proj's long
# rows, four for the lm_head, one elsewhere), against 61c6073 ("base", one unit per warp, the QKV operands loaded
# after the reduction).
# 1. kernels/dev/gemv_q --quick --no-prefill (gemv_q.txt): every shape of units per warp and warps per block at
#    batch 1 beside the default simt, auto, tc and bf16, checked bit for bit against the bf16 kernel; the same
#    program of the base tree (gemv_q-base.txt).
# 2. test_cuda_gemv_q (every shape against the default's bits, the refusals, the CPU ops).
# 3. The full-size random model (make_fixtures.py --mimir-size) quantized to int8 and int4 g128; frigg-bench matrix
#    --builds over the three with --dequant-rows off (the stored weights at every batch) at batch 1 and 2, ctx 512,
#    arms alternated twice (builds.jsonl, each row tagged with its arm and rep; ab-summary.txt by
#    benchmarks/h200-2026-12-04/ab_builds.py).
# 4. test_cuda_engine (FRIGG_QUICK=1) where time is left.
# Run on the GPU host from the project root with .deps and .devrun carried: .devrun/base-src.tar.xz is
# `git archive 61c6073 -- . ':!benchmarks' ':!golden' | xz`, .devrun/mimir-tok.json.xz
# ../shared/data/tokenizers/mimir-equivalent.tokenizer.json. LIMIT (default 590): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
git log -1 --format='tree of %H (the device tool copies the working tree; git status below)' >> $R/log.txt 2>&1
git status --short >> $R/log.txt 2>&1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/dev/gemv_q build-gpu/bin/frigg-bench \
    build-gpu/bin/frigg-quantize build-gpu/tests/test_cuda_gemv_q build-gpu/tests/test_cuda_engine > /tmp/build-new.log 2>&1
  echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log; [ -n "$GQAB_SKIP_DEV" ] || make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/dev/gemv_q \
  > /tmp/build-base-dev.log 2>&1; echo "base dev rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid; tail -qn1 /tmp/build-new.log | tee -a $R/log.txt
[ -x $N/dev/gemv_q ] || { tail -30 /tmp/build-new.log | tee -a $R/log.txt; exit 1; }
el "built new"
if [ -z "$GQAB_SKIP_DEV" ]; then
  timeout 150 $N/dev/gemv_q --quick --no-prefill > $R/gemv_q.txt 2>&1
  el "dev gemv_q rc $?"
fi
wait $bpid; tail -qn2 /tmp/build-base.log | tee -a $R/log.txt
if [ -z "$GQAB_SKIP_DEV" ]; then
  timeout 100 $P/dev/gemv_q --quick --no-prefill > $R/gemv_q-base.txt 2>&1
  el "base dev gemv_q rc $?"
fi
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
( nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 8 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
  nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 8 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt ) &
qpid=$!
FRIGG_ROOT=$ROOT timeout 150 $N/tests/test_cuda_gemv_q > $R/test_cuda_gemv_q.txt 2>&1
el "test_cuda_gemv_q rc $?: $(grep -E 'passed, [0-9]+ failed' $R/test_cuda_gemv_q.txt | tail -1)"
grep -E "^FAIL" $R/test_cuda_gemv_q.txt | head -20 | tee -a $R/log.txt
wait $qpid; grep rc /tmp/q.txt | tee -a $R/log.txt
el quantized
for rep in 1 2; do
  for arm in new base; do B=$N; [ $arm = base ] && B=$P
    [ $(left) -gt 60 ] || break 2
    timeout $(( $(left) - 30 )) $B/bin/frigg-bench --builds /tmp/mimir,/tmp/m8,/tmp/m4 --batch 1,2 --ctx 512 --repeats 3 --steps 32 \
        --dequant-rows off matrix 2>> $R/builds.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/builds.jsonl
    el "builds $arm $rep"
  done
done
python3 benchmarks/h200-2026-12-04/ab_builds.py $R/builds.jsonl > $R/ab-summary.txt 2>&1
if [ $(left) -gt 60 ]; then
  ( FRIGG_QUICK=1 FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout $(( $(left) - 15 )) $N/tests/test_cuda_engine > /tmp/tce.log 2>&1
    echo "test_cuda_engine rc $?" >> /tmp/tce.log )
  tail -2 /tmp/tce.log | tee -a $R/log.txt; grep -E "^FAIL" /tmp/tce.log | head -12 | tee -a $R/log.txt; gzip -c /tmp/tce.log > $R/test_cuda_engine.txt.gz
fi
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >> $R/smi.txt 2>&1
el done
