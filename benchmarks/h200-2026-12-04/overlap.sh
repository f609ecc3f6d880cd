#!/bin/bash
# One H200: test_cuda_gemv, test_cuda_gemv_q and test_cuda_engine at this tree (the GEMV launchers' host dispatch
# as rearranged in 058c7cf); kernels/dev/overlap (two CUDA engines of the random DFM-Mimir-shaped model, one
# decoding, one prefilling 512-token prompts, alone and at once: what a prefill beside the decode steps could win)
# at batch 64 with groups of 4 prompts and at batch 32 with single prompts (overlap.jsonl); frigg-bench decode at
# batch 16 and 64, ctx 512, with and without --batch-invariant, alternated twice (invariant.jsonl). Run on the GPU
# host from the project root with .deps carried. LIMIT (default 590): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu
TESTS="test_cuda_gemv test_cuda_gemv_q test_cuda_engine"
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/dev/overlap \
    $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for x in $TESTS; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 150 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL|first difference" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
timeout 120 $N/dev/overlap --batch 64 --group 4 --prompt 512 --steps 256 --seconds 15 >> $R/overlap.jsonl 2>> $R/log.txt
el "overlap b64 rc $?"
timeout 90 $N/dev/overlap --batch 32 --group 1 --prompt 512 --steps 256 --seconds 10 >> $R/overlap.jsonl 2>> $R/log.txt
el "overlap b32 rc $?"
for rep in 1 2; do
  for arm in default invariant; do F=; [ $arm = invariant ] && F=--batch-invariant
    [ $(left) -lt 50 ] && { el "no time left for $arm $rep"; break 2; }
    timeout 60 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 $F --batch 16,64 --ctx 512 --kv-dtypes bf16 decode \
      2>> $R/invariant.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/invariant.jsonl
  done
  el "invariant $rep"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
