#!/bin/bash
# One H200, at the commit measured (frigg-bench load parsing text that holds a NUL byte): frigg-serve with its
# defaults (64 slots of 1,024 tokens) under frigg-bench load, 64 streams, 512-token prompts, 256 output tokens,
# for what the call's LIMIT seconds leave, then frigg-bench decode at batch 64, ctx 768, 256 steps, in the same
# call. Run on the GPU host from the project root with .deps and .devrun carried (as gemvq.sh).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
LIMIT=${LIMIT:-330}
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
left() { echo $(( LIMIT - 10 - ( $(date +%s) - T0 ) )); }
R=$OUT; S=/tmp/s; mkdir -p $S; trap 'kill $spid 2>/dev/null' EXIT
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cpu --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-serve > /tmp/build.log 2>&1 \
    || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
b/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots 64 --ctx 1024 --port 0 2> /tmp/serve.log &
spid=$!
for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
dur=$(( $(left) - 45 )); [ $dur -gt 180 ] && dur=180
timeout $(( dur + 20 )) b/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s $dur --prompt-tokens 512 --max-tokens 256 \
    > /tmp/load.jsonl 2>> $R/log.txt; echo "load rc $?" >> $R/log.txt
sed "s/^{/{\"tag\":\"defaults-streams-64-${dur}s\",/" /tmp/load.jsonl >> $R/load.jsonl
kill $spid; wait $spid; grep -E "replica|stopped" /tmp/serve.log >> $R/serve.log
el "load 64"
timeout $(( $(left) > 15 ? $(left) : 15 )) b/bin/frigg-bench --model /tmp/mimir --repeats 2 --steps 256 --batch 64 --ctx 768 decode \
    > $R/decode64.jsonl 2> $R/decode64.txt; echo "decode64 rc $?" >> $R/decode64.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
