#!/bin/bash
# One H200, the full-size random model, bf16: frigg-serve with --slots auto (its default) under frigg-bench load,
# 512-token prompts, 256 output tokens, 180 s each: 32 streams with every other option at its default (--ctx
# 4096: auto's slot count printed in serve.log), then 64 streams with --ctx 1024; frigg-bench decode at batch 32
# and 64, ctx 768 (the context a stream's tokens span), 256 steps, for the serve/decode ratio; frigg-run
# --parallel 64 --ctx 768 over 256 prompts of 512 random ids (max_tokens 256). Run on the GPU host from the
# project root with .deps and .devrun carried; reuses build-gpu/ and /tmp/mimir from a warm machine.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r2; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r2' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu
if [ ! -f /tmp/mimir/config.json ]; then
  echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
  ( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
      --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
  fpid=$!
fi
if [ -x $N/bin/frigg-serve ] && [ -x $N/bin/frigg-bench ] && [ -x $N/bin/frigg-run ]; then el "build-gpu/ reused (warm machine)"
else
  make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-serve build-gpu/bin/frigg-bench \
      build-gpu/bin/frigg-run > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
  el built
fi
[ -n "$fpid" ] && { wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; }
xz -dc .devrun/mimir-tok.json.xz > /tmp/mimir/tokenizer.json
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for run in "32 " "64 --ctx 1024"; do
  set -- $run; st=$1; shift
  $N/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --port 0 "$@" 2> /tmp/serve.log &
  spid=$!
  for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
  timeout 230 $N/bin/frigg-bench load --url http://127.0.0.1:$port --streams $st --duration-s 180 --prompt-tokens 512 \
      --max-tokens 256 > /tmp/load.jsonl 2>> $R/load.txt; echo "load $st $* rc $?" | tee -a $R/log.txt
  sed "s/^{/{\"tag\":\"auto-slots-streams-$st$(echo "$*" | tr ' ' '-')-180s\",/" /tmp/load.jsonl >> $R/load.jsonl
  kill $spid; wait $spid; echo "== streams $st $*" >> $R/serve.log; grep -E "slot|replica|stopped" /tmp/serve.log >> $R/serve.log
  nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
  el "streams $st"
done
timeout 100 $N/bin/frigg-bench --model /tmp/mimir --repeats 3 --steps 256 --batch 32,64 --ctx 768 decode > $R/decode.jsonl 2> $R/decode.txt
echo "decode rc $?" >> $R/log.txt
el decode
python3 - > /tmp/run-prompts.jsonl <<'PY'
import json, random
r = random.Random(1)
for i in range(256):
    print(json.dumps({"input_ids": [r.randrange(3, 262144) for _ in range(512)], "max_tokens": 256}))
PY
t0=$(date +%s.%N)
timeout 120 $N/bin/frigg-run --backend cuda --model /tmp/mimir --ctx 768 --parallel 64 < /tmp/run-prompts.jsonl > /tmp/run-out.jsonl 2> /tmp/run-err.txt
rc=$?; echo "frigg-run rc $rc wall $(python3 -c "import time; print(round(time.time() - $t0, 2))") s" > $R/run.txt
python3 -c '
import json
n=0; toks=0; err=0
for l in open("/tmp/run-out.jsonl"):
    o=json.loads(l); n+=1
    if "error" in o: err+=1; continue
    toks+=o["usage"]["completion_tokens"]
print(f"responses {n} errors {err} generated tokens {toks}")' >> $R/run.txt
tail -3 /tmp/run-err.txt >> $R/run.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
