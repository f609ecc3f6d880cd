#!/bin/bash
# One H200: the int8-KV decode attention with four rounds in flight where the grid has at most 2 blocks per SM
# (2 blocks per SM, batch 1) and the writer's k/v loads issued beside q's, against 99673cf ("base": always 3
# blocks per SM, two rounds in flight): test_cuda_kv_int8 (with splits of three 64-key rounds), test_cuda_attn_decode,
# test_cuda_engine; frigg-bench decode of both builds, bf16 and int8 KV, batch 1 and 2 at ctx 512, 2048, 4096 and
# int8 at batch 16, ctx 4096, arms alternated twice; Nsight Compute on one int8 attention launch of each build at
# batch 1, ctx 4096; compute-sanitizer memcheck on test_cuda_kv_int8 last.
# Run on the GPU host from the project root with .deps and .devrun carried; .devrun/base-src.tar.xz is
# `git archive 99673cf -- . ':!benchmarks' ':!golden' | xz`. Everything comes back in one tarball, out.tgz.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-run \
    build-gpu/tests/test_cuda_attn_decode build-gpu/tests/test_cuda_kv_int8 build-gpu/tests/test_cuda_engine \
    > /tmp/build-new.log 2>&1; echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 /tmp/build-*.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for x in test_cuda_kv_int8 test_cuda_attn_decode test_cuda_engine; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 150 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,2 --ctx 512,2048,4096 --kv-dtypes bf16,int8 decode"
A2="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 16 --ctx 4096 --kv-dtypes int8 decode"
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    timeout 100 $B/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    timeout 60 $B/bin/frigg-bench $A2 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
  done
  el "ab $rep"
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
el ab
for arm in base new; do B=$N; [ $arm = base ] && B=$P
  timeout 60 ncu --kernel-name regex:attn_decode_kernel --launch-skip 300 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      $B/bin/frigg-bench --random-mimir --seed 1 --repeats 1 --steps 4 --batch 1 --ctx 4096 --kv-dtypes int8 decode \
      > $R/ncu-$arm.txt 2>&1; echo "ncu $arm rc $?" | tee -a $R/log.txt
done
el ncu
l=$(( 580 - ( $(date +%s) - T0 ) )); [ $l -lt 10 ] && l=10
( cd $ROOT && FRIGG_ROOT=$ROOT timeout $l compute-sanitizer --tool memcheck $N/tests/test_cuda_kv_int8 ) > /tmp/memcheck-kv-int8.log 2>&1
echo "memcheck test_cuda_kv_int8 rc $? (124: stopped at the call's limit): $(grep -E 'passed, [0-9]+ failed|ERROR SUMMARY' /tmp/memcheck-kv-int8.log | tr '\n' ' ')" | tee -a $R/log.txt
grep -E "Invalid|ERROR SUMMARY|passed" /tmp/memcheck-kv-int8.log | tail -20 > $R/memcheck-kv-int8.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
