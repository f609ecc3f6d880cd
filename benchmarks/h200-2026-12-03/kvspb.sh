#!/bin/bash
# One H200: the int8-KV attention's splits per block keeping a batch's clusters within what the device runs at
# once, the int8 cache's gqkv GEMV on the auto table's gqkv row, and the attention's writer loading q and its k or v
# together, against 99673cf ("base"): test_cuda_gemv, test_cuda_kv_int8, test_cuda_engine; kernels/dev/attn_decode_i8
# (merge modes, splits per block and split counts, batch 1..64); frigg-bench decode of both builds, bf16 and int8
# KV, batch 1, 2, 4, 16 at ctx 512 and 4096, arms alternated twice; memcheck on test_cuda_kv_int8 last.
# Run on the GPU host from the project root with .deps and .devrun carried; .devrun/base-src.tar.xz is
# `git archive 99673cf -- . ':!benchmarks' ':!golden' | xz`. Everything comes back in one tarball, out.tgz.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
TESTS="test_cuda_gemv test_cuda_kv_int8 test_cuda_engine"
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-run \
    build-gpu/dev/attn_decode_i8 $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1
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
for x in $TESTS; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 150 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
timeout 200 $N/dev/attn_decode_i8 > $R/attn_decode_i8.txt 2>&1; echo "attn_decode_i8 rc $?" | tee -a $R/log.txt
el attn_decode_i8
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,2,4,16 --ctx 512,4096 --kv-dtypes bf16,int8 decode"
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    timeout 120 $B/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
  done
  el "ab $rep"
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
el ab
l=$(( 580 - ( $(date +%s) - T0 ) )); [ $l -lt 10 ] && l=10
( cd $ROOT && FRIGG_ROOT=$ROOT timeout $l compute-sanitizer --tool memcheck $N/tests/test_cuda_kv_int8 ) > /tmp/memcheck-kv-int8.log 2>&1
echo "memcheck test_cuda_kv_int8 rc $? (124: stopped at the call's limit): $(grep -E 'passed, [0-9]+ failed|ERROR SUMMARY' /tmp/memcheck-kv-int8.log | tr '\n' ' ')" | tee -a $R/log.txt
grep -E "Invalid|ERROR SUMMARY|passed" /tmp/memcheck-kv-int8.log | tail -20 > $R/memcheck-kv-int8.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
