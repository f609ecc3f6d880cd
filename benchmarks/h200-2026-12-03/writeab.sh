#!/bin/bash
# One H200: the bf16 decode attention with the RoPE and K/V write inside it (fk_attn_decode_write) on the GEMM decode
# step beyond 8 rows, against 4950e18 ("base") — test_cuda_attn_decode, test_cuda_engine; frigg-bench decode of both
# builds, bf16, batch 16, 32, 48, 64 at ctx 512 and 48, 64 at ctx 2048, arms alternated twice (ab.jsonl,
# ab-summary.txt); then on the new build with the full-size random model (make_fixtures.py --mimir-size):
# frigg-serve (defaults, --ctx 1024: 64 slots) under frigg-bench load, 64 streams, 512-token prompts, 256 output
# tokens, 180 s at most (load.jsonl); frigg-bench decode at batch 64, ctx 768 (decode64.jsonl); frigg-run --stats
# --parallel 64 over 256 prompts of 512 random ids, 256 tokens each (run.txt). Run on the GPU host from the project
# root with .deps and .devrun carried: .devrun/base-src.tar.xz is `git archive 4950e18 -- . ':!benchmarks'
# ':!golden' | xz`, .devrun/mimir-tok.json.xz ../shared/data/tokenizers/mimir-equivalent.tokenizer.json.
# LIMIT (default 590): the seconds the call may run; the load's duration is what it leaves, at most 180 s.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/mimir768; mkdir -p $R; trap 'kill $spid 2>/dev/null; tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_attn_decode test_cuda_engine"
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-serve \
    build-gpu/bin/frigg-run $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1
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
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 120 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
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
[ -f /tmp/mimir/config.json ] || { el "no model: the fixture failed"; tail -20 /tmp/fixture.log >> $R/log.txt; exit 1; }
$N/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --ctx 1024 --port 0 2> /tmp/serve.log &
spid=$!
for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
dur=$(( $(left) - 80 )); [ $dur -gt 180 ] && dur=180
el "serving on $port for $dur s"
timeout $(( dur + 30 )) $N/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s $dur --prompt-tokens 512 \
    --max-tokens 256 2>> $R/log.txt | sed "s/^{/{\"tag\":\"defaults-streams-64--ctx-1024-${dur}s\",/" >> $R/load.jsonl
echo "load rc $?" >> $R/log.txt
kill $spid; wait $spid; grep -E "replica|stopped|slots" /tmp/serve.log > $R/serve.log
el load
timeout 60 $N/bin/frigg-bench --model /tmp/mimir --repeats 3 --steps 256 --batch 64 --ctx 768 decode > $R/decode64.jsonl 2>> $R/log.txt
el decode64
python3 - > /tmp/run-prompts.jsonl <<'PY'
import json, random
r = random.Random(1)
for i in range(256):
    print(json.dumps({"input_ids": [r.randrange(3, 262144) for _ in range(512)], "max_tokens": 256}))
PY
mkdir -p /tmp/mimir768; for f in /tmp/mimir/*; do ln -s $f /tmp/mimir768/; done; rm /tmp/mimir768/config.json
python3 -c 'import json; c=json.load(open("/tmp/mimir/config.json")); c["max_position_embeddings"]=768; json.dump(c,open("/tmp/mimir768/config.json","w"))'
t0=$(date +%s.%N)
timeout $(( $(left) > 15 ? $(left) : 15 )) $N/bin/frigg-run --backend cuda --model /tmp/mimir768 --parallel 64 --stats < /tmp/run-prompts.jsonl \
    > /tmp/run-out.jsonl 2> /tmp/run-err.txt
rc=$?; echo "frigg-run rc $rc wall $(python3 -c "import time; print(round(time.time() - $t0, 2))") s (model loading included)" > $R/run.txt
tail -3 /tmp/run-err.txt >> $R/run.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
