#!/bin/bash
# One H200, at the commit measured: test_cuda_gemv_q (the quantized GEMV's scale modes, the per-row launches of
# the general layout); kernels/dev/gemv_q --quick --no-prefill; the full-size random model (make_fixtures.py
# --mimir-size) quantized to int8 and int4 g128, and frigg-bench matrix --builds over the three at batch 1 and 8,
# ctx 512 (auto's q. rows as committed), cells alternated after cooling to 65 C, after frigg-serve with its
# defaults (64 slots of 1,024 tokens) under frigg-bench load, 64 streams, 512-token prompts, 256 output tokens,
# 180 s, and frigg-bench decode at batch 64, ctx 512 and 768 (the context a stream's tokens span), 256 steps, in
# the same call so the ratio compares like with like; test_cuda_engine last.
# Run on the GPU host from the project root with .deps and .devrun carried (as gemvq.sh).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
left() { echo $(( 600 - 25 - ( $(date +%s) - T0 ) )); }
R=$OUT; S=/tmp/s; mkdir -p $S; trap 'kill $spid 2>/dev/null' EXIT
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cpu --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-quantize b/bin/frigg-serve b/dev/gemv_q \
    b/tests/test_cuda_gemv_q b/tests/test_cuda_engine > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
FRIGG_ROOT=$S FRIGG_BIN=$S/b/bin timeout 100 b/tests/test_cuda_gemv_q > /tmp/t.log 2>&1
echo "test_cuda_gemv_q rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/log.txt
grep -E "FAIL|first difference" /tmp/t.log | head -20 | tee -a $R/log.txt
timeout 60 b/dev/gemv_q --quick --no-prefill > $R/gemv_q.txt 2>&1; echo "gemv_q rc $?" >> $R/log.txt
el gemv_q
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
b/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots 64 --ctx 1024 --port 0 2> /tmp/serve.log &
spid=$!
for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
dur=$(( $(left) - 150 )); [ $dur -gt 180 ] && dur=180
timeout $(( dur + 30 )) b/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s $dur --prompt-tokens 512 --max-tokens 256 \
    > /tmp/load.jsonl 2>> $R/log.txt; echo "load rc $?" >> $R/log.txt
sed "s/^{/{\"tag\":\"defaults-streams-64-${dur}s\",/" /tmp/load.jsonl >> $R/load.jsonl
kill $spid; wait $spid; grep -E "replica|stopped" /tmp/serve.log >> $R/serve.log
el "load 64"
( nice timeout 100 b/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 8 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
  nice timeout 100 b/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 8 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt ) &
qpid=$!
timeout 100 b/bin/frigg-bench --model /tmp/mimir --repeats 3 --steps 256 --batch 64 --ctx 512,768 decode > $R/decode64.jsonl 2> $R/decode64.txt
echo "decode64 rc $?" >> $R/decode64.txt
el decode64
wait $qpid; grep " rc " /tmp/q.txt >> $R/log.txt
el quantized
timeout 100 b/bin/frigg-bench --builds /tmp/mimir,/tmp/m8,/tmp/m4 --batch 1,8 --ctx 512 --repeats 3 --steps 32 \
    --cooldown-c 65 matrix > $R/builds.jsonl 2> $R/builds.txt; echo "matrix rc $?" >> $R/builds.txt
el matrix
FRIGG_ROOT=$S FRIGG_BIN=$S/b/bin timeout $(( $(left) > 20 ? $(left) : 20 )) b/tests/test_cuda_engine > /tmp/t.log 2>&1
echo "test_cuda_engine rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/log.txt
grep -E "^FAIL" /tmp/t.log | head -20 | tee -a $R/log.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
