#!/bin/bash
# One H200: the int8-KV decode attention as attention_decode.cu's kernel (c195b6c) against the commit before it
# (856452f, "base"): the CUDA tests of the new tree (test_cuda_attn_decode, test_cuda_kv_int8, test_cuda_gemv_q,
# test_cuda_gemv, test_cuda_engine, test_scheduler), frigg-bench decode of both builds, bf16 and int8 KV, batch 1,
# 16, 64 at ctx 512 and 4096, arms alternated twice; frigg-parity on the full-size random model (and
# --force-causal, which must fail); compute-sanitizer memcheck on test_cuda_kv_int8 and test_cuda_engine last.
# Run on the GPU host from the project root (the new tree, built in place into build-gpu/) with .deps and
# .devrun carried: .devrun/base-src.tar.xz is `git archive 856452f -- . ':!benchmarks' ':!golden' | xz`,
# .devrun/mimir-tok.json.xz ../shared/data/tokenizers/mimir-equivalent.tokenizer.json.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
left() { echo $(( 590 - ( $(date +%s) - T0 ) )); }
R=$OUT; ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench \
    build-gpu/bin/frigg-parity build-gpu/bin/frigg-serve build-gpu/bin/frigg-run build-gpu/bin/frigg-eval \
    build-gpu/bin/frigg-quantize build-gpu/tests/test_cuda_attn_decode build-gpu/tests/test_cuda_kv_int8 \
    build-gpu/tests/test_cuda_gemv_q build-gpu/tests/test_cuda_gemv build-gpu/tests/test_cuda_engine \
    build-gpu/tests/test_scheduler > /tmp/build-new.log 2>&1; echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda \
    > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 /tmp/build-*.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
t() { local name=$1 lim=$2; shift 2
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout $lim "$@" > /tmp/$name.log 2>&1
  echo "$name rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$name.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|ERROR SUMMARY" /tmp/$name.log | head -12 | tee -a $R/tests.txt; }
for x in test_cuda_attn_decode test_cuda_kv_int8 test_cuda_gemv_q test_cuda_gemv test_cuda_engine test_scheduler; do
  t $x 120 $N/tests/$x
done
el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,16,64 --ctx 512,4096 --kv-dtypes bf16,int8 decode"
for rep in 1 2; do
  timeout 100 $P/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"base\",\"rep\":$rep,/" >> $R/ab.jsonl
  timeout 100 $N/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"new\",\"rep\":$rep,/" >> $R/ab.jsonl
  el "ab $rep"
done
python3 - $R/ab.jsonl <<'PY' | tee $R/ab-summary.txt
import json, sys, collections
cells = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("bench") == "decode":
        cells[(r["kv_dtype"], r["batch"], r["ctx"], r["arm"])].append(r)
for (kv, b, c, arm) in sorted(k for k in cells if k[3] == "new"):
    new = [r["tok_s"] for r in cells[(kv, b, c, "new")]]; base = [r["tok_s"] for r in cells[(kv, b, c, "base")]]
    nb = sum(new) / len(new); bb = sum(base) / len(base) if base else float("nan")
    last = cells[(kv, b, c, "new")][-1]
    print(f"kv {kv:4} batch {b:2} ctx {c:4}: new {nb:8.1f} base {bb:8.1f} tok/s  new/base {nb / bb:.3f}  "
          f"roofline {last.get('roofline_frac')}  {last.get('sm_clock_mhz')} MHz {last.get('temp_c')} C")
PY
el ab
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt
timeout 60 $N/bin/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)" >> $R/parity-mimir.txt
timeout 60 $N/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt
tail -qn2 $R/parity-mimir.txt $R/parity-mimir-causal.txt | tee -a $R/log.txt
el parity
( cd $ROOT && FRIGG_ROOT=$ROOT timeout 100 compute-sanitizer --tool memcheck $N/tests/test_cuda_kv_int8 ) > $R/memcheck-kv-int8.log 2>&1
echo "memcheck test_cuda_kv_int8 rc $?: $(grep -E 'passed, [0-9]+ failed|ERROR SUMMARY' $R/memcheck-kv-int8.log | tr '\n' ' ')" | tee -a $R/log.txt
l=$(left); [ $l -gt 20 ] || l=20
( cd $ROOT && FRIGG_ROOT=$ROOT timeout $l compute-sanitizer --tool memcheck $N/tests/test_cuda_engine ) > /tmp/memcheck-engine.log 2>&1
echo "memcheck test_cuda_engine rc $? (124: stopped at the call's limit): $(grep -E 'passed, [0-9]+ failed|ERROR SUMMARY' /tmp/memcheck-engine.log | tr '\n' ' ')" | tee -a $R/log.txt
grep -E "^(PASS|FAIL|ok|#)|ERROR SUMMARY|Invalid|passed" /tmp/memcheck-engine.log | tail -40 > $R/memcheck-engine.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
