#!/bin/bash
# One GPU, one call (run on an H100: the H200 kind was not to be had): (1) every cuBLASLt configuration of the decode step's four layer GEMMs at 32 and 64 rows (TS)
# against cublasGemmEx (kernels/dev/prefill --decode-gemm-search: search.txt); (2) its "table" lines (winners by 3 %
# or more) written into common/cuda_gemm.c's lt_table (the file as built: cuda_gemm.c here), the engine rebuilt;
# (3) test_cuda_gemm on it; (4) frigg-bench decode at batch 24, 32, 48, 64, ctx 512 then 2048 (as time allows),
# against the tree without the table ("base": .devrun/base-src.tar.xz, `git archive HEAD -- . ':!benchmarks'
# ':!golden' | xz` of the commit before), arms alternated twice per ctx (ab.jsonl, ab-summary.txt); (5) test_cuda_engine
# (FRIGG_QUICK=1) with the time left.
# Run on the GPU host from the project root with .deps and .devrun carried. LIMIT: the seconds the call may run.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-585} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
git log -1 --format='tree of %H (the device tool copies the working tree; git status below)' >> $R/log.txt 2>&1
git status --short >> $R/log.txt 2>&1
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
M="make DEPS_ROOT=.deps/root CUDA_ARCHS=90"
( cd /tmp/base && $M -j4 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/bb.log 2>&1 ) &
bpid=$!
$M -j12 BUILD=build-gpu BIN=build-gpu/bin build-gpu/dev/prefill build-gpu/bin/frigg-bench build-gpu/tests/test_cuda_gemm \
    build-gpu/tests/test_cuda_engine > /tmp/bn.log 2>&1 || { tail -30 /tmp/bn.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout ${SEARCH_S:-240} $N/dev/prefill --decode-gemm-search ${TS:-32,64} > $R/search.txt 2>&1
el "search rc $?"
grep -E "^search|#0 |^table|^check|^PASS|^FAIL" $R/search.txt
python3 - $R/search.txt common/cuda_gemm.c <<'PY'
import sys
rows = [l[len("table "):].rstrip("\n") for l in open(sys.argv[1]) if l.startswith("table {")]
src = open(sys.argv[2]).read()
end = "    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* the end */"
assert end in src
src = src.replace(end, "".join("    " + r + "\n" for r in rows) + end)
open(sys.argv[2], "w").write(src)
print(f"{len(rows)} table entries written")
PY
cp common/cuda_gemm.c $R/cuda_gemm.c
$M -j12 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/tests/test_cuda_gemm build-gpu/tests/test_cuda_engine \
    > /tmp/bn2.log 2>&1 || { tail -30 /tmp/bn2.log | tee -a $R/log.txt; exit 1; }
el rebuilt
FRIGG_ROOT=$ROOT timeout 60 $N/tests/test_cuda_gemm > $R/test_cuda_gemm.txt 2>&1
echo "test_cuda_gemm rc $?: $(tail -2 $R/test_cuda_gemm.txt | tr '\n' ' ')" | tee -a $R/log.txt; grep -E "^FAIL" $R/test_cuda_gemm.txt | head | tee -a $R/log.txt
wait $bpid; [ -x $P/bin/frigg-bench ] || { tail -20 /tmp/bb.log | tee -a $R/log.txt; exit 1; }
el "base built"
for cx in 512 2048; do
  for rep in 1 2; do
    for arm in base new; do B=$N; [ $arm = base ] && B=$P
      [ "$(left)" -gt 60 ] || break 3
      timeout $(( $(left) - 10 )) $B/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 24,32,48,64 --ctx $cx \
        --kv-dtypes bf16 decode 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    done
    el "ab ctx $cx rep $rep"
  done
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
grep -o '"decode_proj":"[^"]*"' $R/ab.jsonl | sort | uniq -c | tee -a $R/log.txt
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
if [ "$(left)" -gt 30 ]; then
  FRIGG_QUICK=1 FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout $(( $(left) - 8 )) $N/tests/test_cuda_engine > $R/test_cuda_engine.txt 2>&1
  echo "test_cuda_engine rc $?: $(grep -E 'passed, [0-9]+ failed' $R/test_cuda_engine.txt | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL" $R/test_cuda_engine.txt | head | tee -a $R/log.txt
fi
el done
