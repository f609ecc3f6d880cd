#!/bin/bash
# One H200, after sanitize.sh in the same warm session (build-gpu built): frigg-bench decode of the tree measured
# against a5bf00d ("base"), bf16 and int8 KV caches, batch 12 and 16 at ctx 512 and 4096, arms alternated twice
# (ab.jsonl, ab-summary.txt). .devrun/base-src.tar.xz: `git archive a5bf00d -- . ':!benchmarks' ':!golden' | xz`.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench > /tmp/bn.log 2>&1 &
( cd /tmp/base && make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/bb.log 2>&1 ); wait
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -20 /tmp/bb.log /tmp/bn.log | tee -a $R/log.txt; exit 1; }
el built
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    for cx in 512 4096; do
      timeout 100 $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 12,16 --ctx $cx --kv-dtypes bf16,int8 decode \
        2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    done
  done
  el "ab $rep"
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
