#!/bin/bash
# One H200: the prefill attention's epilogue loading its gate values before its stores ("new", this tree) against
# 1c9ede8 ("base", a load beside each store) — test_cuda_prefill and test_cuda_engine (new); kernels/dev/prefill
# --quick in both trees (prefill-ARM.txt: the grouped attention, 8 and 4 prompts of 512 tokens and 2 of 2048, and
# the T = 4096 attention); kernels/dev/overlap --prefill-only, 512-token prompts in groups of 4 and 8, arms
# alternated twice (prefill.jsonl); frigg-run --stats --parallel 64 over 256 prompts of 512 random ids, 256 tokens
# each, on the full-size random model capped at 768 positions, new then base (run-ARM.txt); frigg-serve --ctx 1024
# under 64 streams of 512-token prompts and 256 output tokens, DUR seconds, new then base (load.jsonl). Run on the
# GPU host from the project root with .deps and .devrun carried: .devrun/epibase-src.tar.xz is `git archive
# 1c9ede8 -- . ':!benchmarks' ':!golden' | xz`, .devrun/mimir-tok.json.xz
# ../shared/data/tokenizers/mimir-equivalent.tokenizer.json. LIMIT (default 590).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/mimir768; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b; DUR=${DUR:-45}
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/epibase-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_prefill test_cuda_engine"
( make -j9 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-run build-gpu/bin/frigg-serve \
    build-gpu/bin/frigg-bench build-gpu/dev/overlap build-gpu/dev/prefill $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1
  echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-run b/bin/frigg-serve b/dev/overlap b/dev/prefill \
    > /tmp/build-base.log 2>&1; echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/dev/overlap ] && [ -x $P/dev/overlap ] && [ -x $P/bin/frigg-serve ] || { tail -30 /tmp/build-*.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for x in $TESTS; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 150 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL|first difference" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
for arm in new base; do B=$N; [ $arm = base ] && B=$P
  timeout 100 $B/dev/prefill --quick > $R/prefill-$arm.txt 2>&1; el "dev prefill $arm rc $?"
  grep "attn group\|attn mma" $R/prefill-$arm.txt | grep time | tee -a $R/log.txt
done
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    for g in 4 8; do
      timeout 60 $B/dev/overlap --prefill-only --batch 8 --group $g --prompt 512 --steps 64 --seconds 6 2>> $R/log.txt \
        | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/prefill.jsonl
    done
  done
  el "prefill $rep"
done
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
[ -f /tmp/mimir/config.json ] || { el "no model: the fixture failed"; tail -20 /tmp/fixture.log >> $R/log.txt; exit 1; }
el fixture
python3 - > /tmp/run-prompts.jsonl <<'PY'
import json, random
r = random.Random(1)
for i in range(256):
    print(json.dumps({"input_ids": [r.randrange(3, 262144) for _ in range(512)], "max_tokens": 256}))
PY
mkdir -p /tmp/mimir768; for f in /tmp/mimir/*; do ln -s $f /tmp/mimir768/; done; rm /tmp/mimir768/config.json
python3 -c 'import json; c=json.load(open("/tmp/mimir/config.json")); c["max_position_embeddings"]=768; json.dump(c,open("/tmp/mimir768/config.json","w"))'
for arm in new base; do B=$N; [ $arm = base ] && B=$P
  [ $(left) -lt 40 ] && { el "no time left for frigg-run $arm"; break; }
  t0=$(date +%s.%N)
  timeout 60 $B/bin/frigg-run --backend cuda --model /tmp/mimir768 --parallel 64 --stats < /tmp/run-prompts.jsonl > /tmp/run-out-$arm.jsonl 2> /tmp/run-err.txt
  rc=$?; echo "frigg-run rc $rc wall $(python3 -c "import time; print(round(time.time() - $t0, 2))") s (model loading included)" > $R/run-$arm.txt
  tail -3 /tmp/run-err.txt >> $R/run-$arm.txt
  el "frigg-run $arm: $(tail -1 $R/run-$arm.txt)"
done
cmp /tmp/run-out-new.jsonl /tmp/run-out-base.jsonl && el "frigg-run outputs: new and base the same bytes" \
  || el "frigg-run outputs differ: $(diff <(tr ',' '\n' < /tmp/run-out-new.jsonl) <(tr ',' '\n' < /tmp/run-out-base.jsonl) | wc -l) lines"
for arm in new base; do B=$N; [ $arm = base ] && B=$P
  [ $(left) -lt $(( DUR + 30 )) ] && { el "no time left for serve $arm"; break; }
  $B/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --ctx 1024 --port 0 2> /tmp/serve.log &
  spid=$!
  for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
  timeout $(( DUR + 30 )) $N/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s $DUR --prompt-tokens 512 \
      --max-tokens 256 2>> $R/log.txt | sed "s/^{/{\"tag\":\"$arm-streams-64-${DUR}s\",\"arm\":\"$arm\",/" >> $R/load.jsonl
  echo "load rc $?" >> $R/log.txt
  kill $spid; wait $spid
  el "serve $arm"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
