#!/bin/bash
# One H200: frigg-serve with its defaults (bf16, 8 slots of 4,096 tokens) on the full-size random model under
# frigg-bench load at 32, 8 and 1 streams (or the list in $STREAMS), 512-token prompts, 256 output tokens, 180 s
# each (as many as the call's time allows, in that order), the server restarted for each. Run on the GPU host
# from the project root with .deps and .devrun carried (as kvattn.sh); it reuses build-gpu/ and /tmp/mimir when
# the machine is still the one that made them, and builds or makes them otherwise.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
left() { echo $(( 590 - ( $(date +%s) - T0 ) )); }
R=$OUT; ROOT=$PWD; N=$ROOT/build-gpu
if [ ! -f /tmp/mimir/model.safetensors ] && [ ! -f /tmp/mimir/config.json ]; then
  echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
  ( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
      --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
  fpid=$!
fi
if [ -x $N/bin/frigg-serve ] && [ -x $N/bin/frigg-bench ]; then el "build-gpu/ reused (warm machine)"
else
  make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-serve build-gpu/bin/frigg-bench \
      > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
  el built
fi
[ -n "$fpid" ] && { wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; }
xz -dc .devrun/mimir-tok.json.xz > /tmp/mimir/tokenizer.json
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for st in ${STREAMS:-32 8 1}; do
  [ $(left) -gt 200 ] || { el "streams $st: not run (the call's time is spent)"; continue; }
  $N/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --port 0 2> /tmp/serve.log &
  spid=$!
  for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
  timeout 230 $N/bin/frigg-bench load --url http://127.0.0.1:$port --streams $st --duration-s 180 --prompt-tokens 512 \
      --max-tokens 256 > /tmp/load.jsonl 2>> $R/load.txt; echo "load $st rc $?" | tee -a $R/log.txt
  sed "s/^{/{\"tag\":\"defaults-streams-$st-180s\",/" /tmp/load.jsonl >> $R/load.jsonl
  kill $spid; wait $spid; grep -E "replica|stopped|slots" /tmp/serve.log >> $R/serve.log
  nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
  el "streams $st"
done
el done
