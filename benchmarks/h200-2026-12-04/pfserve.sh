#!/bin/bash
# One H200, this tree (grouped prefill attention in one launch): frigg-bench decode at batch 64, ctx 768
# (decode64.jsonl); frigg-run --stats --parallel 64 over 256 prompts of 512 random ids, 256 tokens each, on the
# full-size random model capped at 768 positions (run.txt); frigg-serve --ctx 1024 under 64 streams of 512-token
# prompts and 256 output tokens for DUR seconds (load.jsonl): the serve and frigg-run aggregates against decode in
# one call. Run on the GPU host from the project root with .deps and .devrun carried (pfgroup.sh's). LIMIT (590).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; DUR=${DUR:-150}
fpid=
if [ ! -f /tmp/mimir/tokenizer.json ] || [ ! -f /tmp/mimir768/config.json ]; then
  rm -rf /tmp/mimir /tmp/mimir768
  xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
  echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
  ( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
      --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
  fpid=$!
fi
python3 - > /tmp/run-prompts.jsonl <<'PY'
import json, random
r = random.Random(1)
for i in range(256):
    print(json.dumps({"input_ids": [r.randrange(3, 262144) for _ in range(512)], "max_tokens": 256}))
PY
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-run build-gpu/bin/frigg-serve \
    build-gpu/bin/frigg-bench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
if [ -n "$fpid" ]; then
  wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
  mkdir -p /tmp/mimir768; for f in /tmp/mimir/*; do ln -s $f /tmp/mimir768/; done; rm /tmp/mimir768/config.json
  python3 -c 'import json; c=json.load(open("/tmp/mimir/config.json")); c["max_position_embeddings"]=768; json.dump(c,open("/tmp/mimir768/config.json","w"))'
  el "fixture made"
fi
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 60 $N/bin/frigg-bench --model /tmp/mimir --repeats 3 --steps 256 --batch 64 --ctx 768 decode > $R/decode64.jsonl 2>> $R/log.txt
el decode64
t0=$(date +%s.%N)
timeout 60 $N/bin/frigg-run --backend cuda --model /tmp/mimir768 --parallel 64 --stats < /tmp/run-prompts.jsonl > /tmp/run-out.jsonl 2> /tmp/run-err.txt
rc=$?; echo "frigg-run rc $rc wall $(python3 -c "import time; print(round(time.time() - $t0, 2))") s (model loading included)" > $R/run.txt
tail -3 /tmp/run-err.txt >> $R/run.txt
el "frigg-run: $(tail -1 $R/run.txt)"
dur=$(( $(left) - 50 )); [ $dur -gt $DUR ] && dur=$DUR
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
