#!/bin/bash
# One H200: the int8 KV cache's gqkv GEMV on the gqkv row of the auto table (CUDA cores at batch 1, not o_proj's
# tensor cores) and the int8 attention's writer loading q and its k or v together, against 99673cf ("base"):
# test_cuda_gemv, test_cuda_gemv_q, test_cuda_kv_int8, test_cuda_engine; frigg-bench decode of both builds, bf16
# and int8 KV, batch 1, 2 and 16 at ctx 512 and 4096, arms alternated twice; Nsight Compute's warp-stall samples
# (SourceCounters) of one batch-1 decode-attention launch at ctx 4096 for each cache (stalls-<kv>.txt, through
# scripts/ncu-stalls).
# Run on the GPU host from the project root with .deps and .devrun carried; .devrun/base-src.tar.xz is
# `git archive 99673cf -- . ':!benchmarks' ':!golden' | xz`. Everything comes back in one tarball, out.tgz.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
TESTS="test_cuda_gemv test_cuda_gemv_q test_cuda_kv_int8 test_cuda_engine"
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-run \
    $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1; echo "new rc $?" >> /tmp/build-new.log ) &
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
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,2,16 --ctx 512,4096 --kv-dtypes bf16,int8 decode"
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    timeout 120 $B/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
  done
  el "ab $rep"
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
el ab
for kv in bf16 int8; do
  timeout 90 ncu --kernel-name regex:attn_decode_kernel --launch-skip 300 --launch-count 1 --section SourceCounters \
      --section WarpStateStats -f -o /tmp/st-$kv $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 4 --batch 1 \
      --ctx 4096 --kv-dtypes $kv decode > /tmp/ncu-$kv.log 2>&1; echo "ncu $kv rc $?" | tee -a $R/log.txt
  ncu --import /tmp/st-$kv.ncu-rep --page source --csv --print-source sass > /tmp/st-$kv.csv 2>> $R/log.txt
  python3 scripts/ncu-stalls /tmp/st-$kv.csv 30 > $R/stalls-$kv.txt 2>&1
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
