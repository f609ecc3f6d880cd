#!/bin/bash
# frigg-serve on one H200 under load, against the engine's own decode speed: frigg-serve --backend cuda on the
# full-size random model (make_fixtures.py --mimir-size, weights only matter here), frigg-bench load with 1 and
# 8 streams (512-token prompts as token ids, 128 output tokens), then frigg-bench decode at batch 1 and 8 on the
# same shapes. Run from the project root on the GPU host with .deps carried (pack-deps libcurl4-openssl-dev).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=$OUT; trap 'kill $spid 2>/dev/null' EXIT
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-serve b/bin/frigg-bench > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 2 --tf-len 128 > $R/fixture.log 2>&1 || { tail -20 $R/fixture.log; exit 1; }
el fixture
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
b/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots 8 --ctx 1024 --port 0 2> $R/serve.log &
spid=$!
for i in $(seq 1 300); do port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $R/serve.log); grep -q ready $R/serve.log && break; sleep 0.2; done
cat $R/serve.log
el serving
for n in 1 8; do
  timeout 120 b/bin/frigg-bench load --url http://127.0.0.1:$port --streams $n --duration-s 25 --prompt-tokens 512 \
      --max-tokens 128 >> $R/load.jsonl 2>> $R/load.txt; echo "load $n rc $?"; tail -1 $R/load.txt
done
kill $spid; wait $spid; echo "serve exit $?"
el load
timeout 120 b/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 576 decode > $R/decode.jsonl 2> $R/decode.txt
cat $R/decode.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
