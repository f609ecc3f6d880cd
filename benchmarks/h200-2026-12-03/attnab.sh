#!/bin/bash
# One H200: two blocks per (row, head) in the decode attention's batch-size policy where one block per pair is more
# than a wave, against c73728b ("base") — test_cuda_attn_decode; kernels/dev/attn_decode --quick --min-batch 16
# (attn_decode.txt); the decode step's cuBLAS GEMMs at 16, 32, 64 rows (kernels/dev/prefill --decode-gemm,
# gemm.txt); Nsight Compute (its base clock) on the timed steps of a batch-64 ctx-512 decode, every kernel's
# duration (kern.txt, frigg-bench's profiler range); frigg-bench decode of both builds, bf16, batch 16, 32, 48, 64
# at ctx 512 and 48, 64 at ctx 2048, arms alternated twice (ab.jsonl, ab-summary.txt); test_cuda_engine last.
# Run on the GPU host from the project root with .deps and .devrun carried; .devrun/base-src.tar.xz is
# `git archive c73728b -- . ':!benchmarks' ':!golden' | xz`.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
TESTS="test_cuda_attn_decode test_cuda_engine"
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench \
    build-gpu/dev/attn_decode build-gpu/dev/prefill $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1
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
FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 150 $N/tests/test_cuda_attn_decode > /tmp/t1.log 2>&1
echo "test_cuda_attn_decode rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t1.log | tail -1)" | tee -a $R/log.txt
grep -E "^FAIL" /tmp/t1.log | head -12 | tee -a $R/log.txt
el test
timeout 120 $N/dev/attn_decode --quick --min-batch 16 > $R/attn_decode.txt 2>&1; echo "attn_decode rc $?" | tee -a $R/log.txt
el attn_decode
timeout 150 $N/dev/prefill --decode-gemm > $R/gemm.txt 2>&1; echo "prefill --decode-gemm rc $?" | tee -a $R/log.txt
el gemm
timeout 150 ncu --profile-from-start off --metrics gpu__time_duration.sum --launch-count 1400 --print-summary per-kernel \
    $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 2 --batch 64 --ctx 512 --kv-dtypes bf16 decode \
    > $R/kern.txt 2>&1; echo "ncu kern rc $?" | tee -a $R/log.txt
el ncu
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    for cx in "--batch 16,32,48,64 --ctx 512" "--batch 48,64 --ctx 2048"; do
      timeout 150 $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 $cx --kv-dtypes bf16 decode 2>> $R/ab.txt \
        | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    done
  done
  el "ab $rep"
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
el ab
l=$(( 560 - ( $(date +%s) - T0 ) )); [ $l -lt 10 ] && l=10
FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout $l $N/tests/test_cuda_engine > /tmp/t2.log 2>&1
echo "test_cuda_engine rc $? (124: stopped at the call's limit): $(grep -E 'passed, [0-9]+ failed' /tmp/t2.log | tail -1)" | tee -a $R/log.txt
grep -E "^FAIL" /tmp/t2.log | head -12 | tee -a $R/log.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
