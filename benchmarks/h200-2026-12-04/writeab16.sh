#!/bin/bash
# One H200: the GEMV decode step past 8 rows with the gqkv rows stored as projected and fk_attn_decode_write
# (RoPE, K/V write, attention in one kernel) for the bf16 cache ("new"), against 41eb67d ("v2": the QKV epilogue
# then fk_attn_decode up to 16 rows) and a5bf00d ("base": the cuBLAS step past 8) — test_cuda_engine (its
# batch_invariant 20-row step equals single-row steps bit for bit: the two RoPE paths' bits); frigg-bench decode,
# bf16 cache, batch 12 and 16 at ctx 512 and 4096, the three arms alternated twice (ab.jsonl; ab-summary.txt new
# against base, ab-v2.txt new against v2). .devrun: base-src.tar.xz and v2-src.tar.xz, `git archive COMMIT -- .
# ':!benchmarks' ':!golden' | xz` of a5bf00d and 41eb67d.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b; V=/tmp/v2/b
for a in base v2; do rm -rf /tmp/$a; mkdir -p /tmp/$a && tar xJf .devrun/$a-src.tar.xz -C /tmp/$a && ln -sfn $ROOT/.deps /tmp/$a/.deps || exit 1; done
make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/tests/test_cuda_engine > /tmp/bn.log 2>&1 &
for a in base v2; do ( cd /tmp/$a && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/b$a.log 2>&1 ) & done; wait
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] && [ -x $V/bin/frigg-bench ] || { tail -20 /tmp/b*.log | tee -a $R/log.txt; exit 1; }
el built
FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 120 $N/tests/test_cuda_engine > /tmp/e.log 2>&1
echo "test_cuda_engine rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/e.log | tail -1)" | tee -a $R/log.txt; grep -E "^FAIL" /tmp/e.log | head | tee -a $R/log.txt
el tests
for rep in 1 2; do
  for arm in base v2 new; do B=$N; [ $arm = base ] && B=$P; [ $arm = v2 ] && B=$V
    for cx in 512 4096; do
      timeout 100 $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 12,16 --ctx $cx --kv-dtypes bf16 decode \
        2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    done
  done
  el "ab $rep"
done
grep -v '"arm":"v2"' $R/ab.jsonl > /tmp/ab-base.jsonl; grep -v '"arm":"base"' $R/ab.jsonl | sed 's/"arm":"v2"/"arm":"base"/' > /tmp/ab-v2.jsonl
python3 benchmarks/h200-2026-12-02/ab_summary.py /tmp/ab-base.jsonl | tee $R/ab-summary.txt
python3 benchmarks/h200-2026-12-02/ab_summary.py /tmp/ab-v2.jsonl | sed 's/base/v2  /g' | tee $R/ab-v2.txt
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
