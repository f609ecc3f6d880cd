#!/bin/bash
# One H200: how fast the engine prefills 512-token prompts by group size (kernels/dev/overlap's prefill-alone
# phase, groups of 1, 4 and 8 prompts: overlap.jsonl), and frigg-serve (64 slots of 1,024 tokens) under 64 streams of
# 512-token prompts and 256 output tokens with --max-prefill-tokens 2048 (the default: 4 such prompts a step)
# against 4096 (8 a step), arms alternated twice, DUR seconds each (load.jsonl, each row tagged with its arm).
# Run on the GPU host from the project root with .deps and .devrun carried (.devrun/mimir-tok.json.xz:
# ../shared/data/tokenizers/mimir-equivalent.tokenizer.json). LIMIT (default 590): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu; DUR=${DUR:-55}
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-serve \
    build-gpu/dev/overlap > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for g in 1 4 8; do
  timeout 60 $N/dev/overlap --batch 8 --group $g --prompt 512 --steps 64 --seconds 5 >> $R/overlap.jsonl 2>> $R/log.txt
  el "overlap group $g rc $?"
done
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
[ -f /tmp/mimir/config.json ] || { el "no model: the fixture failed"; tail -20 /tmp/fixture.log >> $R/log.txt; exit 1; }
el fixture
for rep in 1 2; do
  for pt in 2048 4096; do
    [ $(left) -lt $(( DUR + 30 )) ] && { el "no time left for $pt $rep"; break 2; }
    $N/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --ctx 1024 --port 0 \
        --max-prefill-tokens $pt 2> /tmp/serve.log &
    spid=$!
    for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
    el "serving ($pt) on $port"
    timeout $(( DUR + 30 )) $N/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s $DUR --prompt-tokens 512 \
        --max-tokens 256 2>> $R/log.txt | sed "s/^{/{\"tag\":\"max-prefill-$pt-streams-64-${DUR}s\",\"rep\":$rep,/" >> $R/load.jsonl
    echo "load rc $?" >> $R/log.txt
    kill $spid; wait $spid; grep -E "replica|stopped|slots" /tmp/serve.log >> $R/serve.log
    el "load $pt $rep"
  done
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
