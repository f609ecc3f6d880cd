#!/bin/bash
# frigg-serve on one H200 with decode steps of up to 64 rows: the full-size random model (make_fixtures.py
# --mimir-size) with DFM-Mimir's equivalent tokenizer copied in (so that streamed text arrives and TTFT is
# measured). frigg-bench load at 1, 8, 32 and 64 streams (512-token prompts as token ids, 256 output tokens,
# 40 s each), frigg-bench decode at the same batch sizes and shape (512 prompt tokens + 256 steps), TPOT of 8
# streams with and without 4,095-token prompts (the context is 4,096) arriving back to back beside them, and frigg-run --parallel 64
# over 256 prompts. Run on the GPU host from the project root with .deps and .devrun carried (.devrun/snap.tar.xz:
# git archive of the commit measured, without benchmarks/ and golden/; .devrun/mimir-tok.json.xz:
# ../shared/data/tokenizers/mimir-equivalent.tokenizer.json).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=$OUT; S=/tmp/s; mkdir -p $S; trap 'kill $spid 2>/dev/null' EXIT
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-serve b/bin/frigg-bench b/bin/frigg-run \
    > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 2 --tf-len 128 > $R/fixture.log 2>&1 || { tail -20 $R/fixture.log; exit 1; }
cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
serve() { # serve SLOTS CTX: start, wait until ready, set $port
  b/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots $1 --ctx $2 --port 0 2> /tmp/serve.log &
  spid=$!
  for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log); cat /tmp/serve.log >> $R/serve.log
}
load() { # load STREAMS PROMPT MAXTOK SECONDS TAG
  timeout $(( $4 + 60 )) b/bin/frigg-bench load --url http://127.0.0.1:$port --streams $1 --duration-s $4 --prompt-tokens $2 \
      --max-tokens $3 > /tmp/load-$5.jsonl 2>> $R/load.txt; echo "load $5 rc $?" >> $R/load.txt
  sed "s/^{/{\"tag\":\"$5\",/" /tmp/load-$5.jsonl >> $R/load.jsonl
}
serve 64 1024; el "serving 64 x 1024"
for n in 1 8 32 64; do load $n 512 256 40 "streams-$n"; tail -1 $R/load.txt; done
el load
kill $spid; wait $spid; echo "serve exit $?" >> $R/serve.log
# prefill beside decode: 8 measured streams alone, then with a ninth client sending 4,095-token prompts (max_tokens 1)
serve 16 4096; el "serving 16 x 4096"
load 8 512 256 30 "tpot-alone"
load 1 4095 1 34 "arrivals-4095" & apid=$!
sleep 2; load 8 512 256 30 "tpot-with-arrivals"; wait $apid
el arrivals
kill $spid; wait $spid; echo "serve exit $?" >> $R/serve.log
python3 - > /tmp/run-prompts.jsonl <<'PY'
import json, random
r = random.Random(1)
for i in range(256):
    print(json.dumps({"input_ids": [r.randrange(3, 262144) for _ in range(512)], "max_tokens": 256}))
PY
# frigg-run has no context option: its sequences take the model's max_position_embeddings, and 64 of them at
# 4,096 do not fit; a copy of the model directory says 768 (RoPE does not depend on it)
mkdir -p /tmp/mimir768; for f in /tmp/mimir/*; do ln -s $f /tmp/mimir768/; done; rm /tmp/mimir768/config.json
python3 -c 'import json; c=json.load(open("/tmp/mimir/config.json")); c["max_position_embeddings"]=768; json.dump(c,open("/tmp/mimir768/config.json","w"))'
t0=$(date +%s.%N)
timeout 120 b/bin/frigg-run --backend cuda --model /tmp/mimir768 --parallel 64 < /tmp/run-prompts.jsonl > /tmp/run-out.jsonl 2> /tmp/run-err.txt
rc=$?; echo "frigg-run rc $rc wall $(python3 -c "import time; print(round(time.time() - $t0, 2))") s" > $R/run.txt
python3 -c '
import json,sys
n=0; toks=0; err=0
for l in open("/tmp/run-out.jsonl"):
    o=json.loads(l); n+=1
    if "error" in o: err+=1; continue
    toks+=o["usage"]["completion_tokens"]
print(f"responses {n} errors {err} generated tokens {toks}")
print("fields:", sorted(json.loads(open("/tmp/run-out.jsonl").readline()).keys()))' >> $R/run.txt
tail -3 /tmp/run-err.txt >> $R/run.txt
el run
timeout 200 b/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 256 --batch 1,8,32,64 --ctx 768 decode > $R/decode.jsonl 2> $R/decode.txt
cat $R/decode.txt | grep "decode batch"; cat $R/run.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
