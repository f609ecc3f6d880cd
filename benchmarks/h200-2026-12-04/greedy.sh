#!/bin/bash
# One H200: a greedy prompt row's token chosen on the device ("new", this tree: fk_argmax_bf16 over its bf16
# logits row, one id and one value copied back) against 63ef047 ("base": the row widened to fp32, copied back,
# argmax on the host) — test_cuda_ops, test_cuda_prefill, test_cuda_engine, test_nonfinite (new);
# kernels/dev/overlap --prefill-only, 512-token greedy prompts in groups of 4 and 8, arms alternated twice
# (prefill.jsonl); frigg-run --stats --parallel 64 over 256 prompts of 512 random ids, 256 tokens each, on the
# full-size random model capped at 768 positions, new, base, new (run-ARM-K.txt); then, new only, frigg-bench
# decode at batch 64, ctx 768 (decode64.jsonl) and frigg-serve --ctx 1024 under 64 streams of 512-token prompts and
# 256 output tokens for DUR seconds (load.jsonl): the serve aggregate against decode in one call. Run on the GPU
# host from the project root with .deps and .devrun carried: .devrun/gbase-src.tar.xz is `git archive 63ef047 --
# . ':!benchmarks' ':!golden' | xz`, .devrun/mimir-tok.json.xz ../shared/data/tokenizers/mimir-equivalent.tokenizer.json.
# LIMIT (default 590), DUR (default 180).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/mimir768; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b; DUR=${DUR:-180}
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/gbase-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_ops test_cuda_prefill test_cuda_engine test_nonfinite"
( make -j10 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-run build-gpu/bin/frigg-serve \
    build-gpu/bin/frigg-bench build-gpu/dev/overlap $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build-new.log 2>&1
  echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-run b/dev/overlap \
    > /tmp/build-base.log 2>&1; echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/dev/overlap ] && [ -x $P/dev/overlap ] && [ -x $P/bin/frigg-run ] && [ -x $N/bin/frigg-serve ] || { tail -30 /tmp/build-*.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for x in $TESTS; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 150 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL|first difference|SKIP" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    for g in 4 8; do
      timeout 60 $B/dev/overlap --prefill-only --batch 8 --group $g --prompt 512 --steps 64 --seconds 5 2>> $R/log.txt \
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
k=0
for arm in new base new; do B=$N; [ $arm = base ] && B=$P; k=$((k + 1))
  [ $(left) -lt $(( DUR + 110 )) ] && { el "no time left for frigg-run $arm $k"; break; }
  t0=$(date +%s.%N)
  timeout 60 $B/bin/frigg-run --backend cuda --model /tmp/mimir768 --parallel 64 --stats < /tmp/run-prompts.jsonl > /tmp/run-out-$arm-$k.jsonl 2> /tmp/run-err.txt
  rc=$?; echo "frigg-run rc $rc wall $(python3 -c "import time; print(round(time.time() - $t0, 2))") s (model loading included)" > $R/run-$arm-$k.txt
  tail -3 /tmp/run-err.txt >> $R/run-$arm-$k.txt
  el "frigg-run $arm $k: $(tail -1 $R/run-$arm-$k.txt)"
done
for f in /tmp/run-out-base-2.jsonl /tmp/run-out-new-3.jsonl; do
  [ -f $f ] && { cmp -s /tmp/run-out-new-1.jsonl $f && el "frigg-run outputs: new-1 and $(basename $f) the same bytes" \
    || el "frigg-run outputs: new-1 and $(basename $f) differ in $(diff <(tr ',' '\n' < /tmp/run-out-new-1.jsonl) <(tr ',' '\n' < $f) | grep -c '^<') fields"; }
done
timeout 60 $N/bin/frigg-bench --model /tmp/mimir --repeats 3 --steps 256 --batch 64 --ctx 768 decode > $R/decode64.jsonl 2>> $R/log.txt
el decode64
dur=$(( $(left) - 40 )); [ $dur -gt $DUR ] && dur=$DUR
$N/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --ctx 1024 --port 0 2> /tmp/serve.log &
spid=$!
for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
el "serving on $port for $dur s"
timeout $(( dur + 30 )) $N/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s $dur --prompt-tokens 512 \
    --max-tokens 256 2>> $R/log.txt | sed "s/^{/{\"tag\":\"defaults-streams-64--ctx-1024-${dur}s\",/" >> $R/load.jsonl
echo "load rc $?" >> $R/log.txt
kill $spid; wait $spid
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
