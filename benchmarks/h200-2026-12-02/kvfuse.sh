#!/bin/bash
# One H200: the int8 KV cache's decode write fused into its attention kernel (this tree) against 3bee610 ("base":
# fk_rope_rows + fk_kv_write_i8 + the attention, three kernels): test_cuda_kv_int8, test_cuda_attn_decode,
# test_cuda_engine; frigg-run greedy with logprobs on the int8 cache, both builds, golden/default (8 requests at
# once) and the full-size random model, which must print the same bytes (the fused kernel computes the same
# values in the same order); frigg-bench decode of both builds, bf16 and int8 KV, batch 1, 16, 32 at ctx 512 and
# 4096 and int8 at batch 64, arms alternated twice; compute-sanitizer memcheck on test_cuda_kv_int8 and
# test_cuda_engine last.
# Run on the GPU host from the project root with .deps and .devrun carried; .devrun/base-src.tar.xz is
# `git archive 3bee610 -- . ':!benchmarks' ':!golden' | xz`. Everything comes back in one tarball, out.tgz.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-serve \
    build-gpu/bin/frigg-run build-gpu/tests/test_cuda_attn_decode build-gpu/tests/test_cuda_kv_int8 build-gpu/tests/test_cuda_engine \
    > /tmp/build-new.log 2>&1; echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-run > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 /tmp/build-*.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for x in test_cuda_kv_int8 test_cuda_attn_decode test_cuda_engine; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 120 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
# same bytes from both builds (timing removed): 8 requests decoding together on golden/default
python3 - > /tmp/req-default.jsonl <<'PY'
import random
random.seed(7)
for i in range(8):
    print('{"input_ids":[%s],"max_tokens":%d,"logprobs":3}' % (",".join(str(random.randrange(3, 8192)) for _ in range(5 + 37 * i)), 40 + 9 * i))
PY
strip() { python3 -c 'import sys,json
for l in sys.stdin:
    d=json.loads(l); d.pop("timing",None); print(json.dumps(d,sort_keys=True))'; }
for arm in base new; do B=$N; [ $arm = base ] && B=$P
  timeout 60 $B/bin/frigg-run --backend cuda --model golden/default --kv-dtype int8 --parallel 8 < /tmp/req-default.jsonl 2>> $R/same.txt | strip > /tmp/same-default-$arm.jsonl
done
cmp /tmp/same-default-base.jsonl /tmp/same-default-new.jsonl && echo "golden/default int8 KV: same bytes ($(wc -l < /tmp/same-default-new.jsonl) responses)" | tee -a $R/log.txt \
  || echo "golden/default int8 KV: DIFFERENT" | tee -a $R/log.txt
cp /tmp/same-default-new.jsonl $R/same-default.jsonl
el same-default
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,16,32 --ctx 512,4096 --kv-dtypes bf16,int8 decode"
A2="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 64 --ctx 512,4096 --kv-dtypes int8 decode"
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    timeout 100 $B/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    timeout 60 $B/bin/frigg-bench $A2 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
  done
  el "ab $rep"
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
el ab
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt
xz -dc .devrun/mimir-tok.json.xz > /tmp/mimir/tokenizer.json
python3 - > /tmp/req-mimir.jsonl <<'PY'
import random
random.seed(11)
for i in range(8):
    print('{"input_ids":[%s],"max_tokens":%d,"logprobs":3}' % (",".join(str(random.randrange(3, 262144)) for _ in range(9 + 61 * i)), 32 + 5 * i))
PY
for arm in base new; do B=$N; [ $arm = base ] && B=$P
  timeout 60 $B/bin/frigg-run --backend cuda --model /tmp/mimir --ctx 1024 --kv-dtype int8 --parallel 8 < /tmp/req-mimir.jsonl 2>> $R/same.txt | strip > /tmp/same-mimir-$arm.jsonl
done
cmp /tmp/same-mimir-base.jsonl /tmp/same-mimir-new.jsonl && echo "mimir-size random int8 KV: same bytes ($(wc -l < /tmp/same-mimir-new.jsonl) responses)" | tee -a $R/log.txt \
  || echo "mimir-size random int8 KV: DIFFERENT" | tee -a $R/log.txt
cp /tmp/same-mimir-new.jsonl $R/same-mimir.jsonl
el same-mimir
( cd $ROOT && FRIGG_ROOT=$ROOT timeout 100 compute-sanitizer --tool memcheck $N/tests/test_cuda_kv_int8 ) > /tmp/memcheck-kv-int8.log 2>&1
echo "memcheck test_cuda_kv_int8 rc $?: $(grep -E 'passed, [0-9]+ failed|ERROR SUMMARY' /tmp/memcheck-kv-int8.log | tr '\n' ' ')" | tee -a $R/log.txt
grep -E "Invalid|ERROR SUMMARY|passed" /tmp/memcheck-kv-int8.log | tail -20 > $R/memcheck-kv-int8.txt
l=$(( 590 - ( $(date +%s) - T0 ) )); [ $l -lt 10 ] && l=10
( cd $ROOT && FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout $l compute-sanitizer --tool memcheck $N/tests/test_cuda_engine ) > /tmp/memcheck-engine.log 2>&1
echo "memcheck test_cuda_engine rc $? (124: stopped at the call's limit): $(grep -E 'passed, [0-9]+ failed|ERROR SUMMARY' /tmp/memcheck-engine.log | tr '\n' ' ')" | tee -a $R/log.txt
grep -E "^(PASS|FAIL|ok|#)|ERROR SUMMARY|Invalid|passed" /tmp/memcheck-engine.log | tail -40 > $R/memcheck-engine.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
