#!/bin/bash
# On one H200, at the commit measured: test_cuda_kv_int8 and test_cuda_engine (the int8 KV cache on the CUDA
# engine against the CPU engine's, the grouped prefill); frigg-bench decode with --kv-dtypes bf16,int8 at ctx
# 4096 (batch 1, 16, 32) and int8 alone at batch 64 (64 sequences of 4,096 tokens: the bf16 cache would need
# 206 GB); frigg-run --parallel 64 over 256 prompts of 512 random ids (max_tokens 256) beside frigg-bench decode
# at batch 64, ctx 768, 256 steps; Nsight Compute (ncu --set full) on the int8 build's batch-1 tensor-core GEMVs
# of lm_head and gqkv; frigg-serve with its defaults under 1, 8 and 32 streams (512-token prompts, 256 output
# tokens) for what the 600 s call leaves, at most 60 s each. Run on the GPU host from the project root with .deps
# and .devrun carried: .devrun/snap.tar.xz is `git archive <commit> -- . ':!benchmarks' ':!golden' | xz`,
# .devrun/mimir-tok.json.xz ../shared/data/tokenizers/mimir-equivalent.tokenizer.json.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
left() { echo $(( 600 - 25 - ( $(date +%s) - T0 ) )); }
R=$OUT; B=b; S=/tmp/s; trap 'kill $spid 2>/dev/null' EXIT
mkdir -p $S && tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
cd $S
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-quantize b/bin/frigg-serve b/bin/frigg-run \
    b/tests/test_cuda_kv_int8 b/tests/test_cuda_engine > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for t in test_cuda_kv_int8 test_cuda_engine; do
  FRIGG_ROOT=$S FRIGG_BIN=$S/$B/bin timeout 90 $B/tests/$t > /tmp/t.log 2>&1
  echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|int8 KV|kv int8|grouped prefill" /tmp/t.log | head -20 >> $R/tests.txt
done
el tests
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
( nice timeout 150 $B/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 8 > /tmp/q8.txt 2>&1; echo "int8 rc $?" >> /tmp/q8.txt ) &
qpid=$!
timeout 120 $B/bin/frigg-bench --model /tmp/mimir --repeats 3 --steps 32 --batch 1,16,32 --ctx 4096 --kv-dtypes bf16,int8 decode > $R/kv.jsonl 2> $R/kv.txt
echo "kv rc $?" >> $R/kv.txt
timeout 60 $B/bin/frigg-bench --model /tmp/mimir --repeats 3 --steps 32 --batch 64 --ctx 4096 --kv-dtypes int8 decode >> $R/kv.jsonl 2>> $R/kv.txt
echo "kv64 rc $?" >> $R/kv.txt
el kv
python3 - > /tmp/run-prompts.jsonl <<'PY'
import json, random
r = random.Random(1)
for i in range(256):
    print(json.dumps({"input_ids": [r.randrange(3, 262144) for _ in range(512)], "max_tokens": 256}))
PY
# frigg-run has no context option: its sequences take the model's max_position_embeddings; a copy of the model
# directory says 768 (RoPE does not depend on it)
mkdir -p /tmp/mimir768; for f in /tmp/mimir/*; do ln -s $f /tmp/mimir768/; done; rm /tmp/mimir768/config.json
python3 -c 'import json; c=json.load(open("/tmp/mimir/config.json")); c["max_position_embeddings"]=768; json.dump(c,open("/tmp/mimir768/config.json","w"))'
t0=$(date +%s.%N)
timeout 120 $B/bin/frigg-run --backend cuda --model /tmp/mimir768 --parallel 64 < /tmp/run-prompts.jsonl > /tmp/run-out.jsonl 2> /tmp/run-err.txt
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
timeout 100 $B/bin/frigg-bench --model /tmp/mimir --repeats 3 --steps 256 --batch 64 --ctx 768 decode > $R/decode64.jsonl 2>> $R/run.txt
el run
wait $qpid; tail -1 /tmp/q8.txt >> $R/log.txt
if [ -f /tmp/m8/config.json ] && [ $(left) -gt 250 ]; then
  for k in "gemv_tc_kernelILb0ELi0ELb1ELi1E" "gemv_tc_kernelILb1ELi3ELb1ELi1E"; do
    timeout 90 ncu --set full --kernel-name regex:$k --launch-skip 20 --launch-count 1 \
        $B/bin/frigg-bench --model /tmp/m8 --repeats 3 --steps 4 --batch 1 --ctx 512 decode > $R/ncu-$k.txt 2>&1
    echo "ncu $k rc $?" >> $R/log.txt
  done
  el ncu
fi
$B/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots 64 --ctx 1024 --port 0 2> /tmp/serve.log &
spid=$!
for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
for n in 32 8 1; do
  dur=$(( $(left) - 20 )); [ $dur -gt 60 ] && dur=60; [ $dur -lt 15 ] && break
  timeout $(( dur + 30 )) $B/bin/frigg-bench load --url http://127.0.0.1:$port --streams $n --duration-s $dur --prompt-tokens 512 --max-tokens 256 \
      > /tmp/load.jsonl 2>> $R/log.txt; echo "load $n rc $?" >> $R/log.txt
  sed "s/^{/{\"tag\":\"defaults-streams-$n-${dur}s\",/" /tmp/load.jsonl >> $R/load.jsonl
  el "load $n"
done
kill $spid; wait $spid; grep -E "replica|stopped" /tmp/serve.log >> $R/serve.log
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
