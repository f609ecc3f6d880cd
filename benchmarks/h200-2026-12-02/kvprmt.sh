#!/bin/bash
# One H200: the int8-KV attention with int8 -> float by byte permute (this tree) against c195b6c ("base", the
# kernel with the conversion instruction): test_cuda_kv_int8, test_cuda_attn_decode, test_cuda_engine; frigg-bench
# decode of both builds, bf16 and int8 KV, batch 1, 16, 32 at ctx 512 and 4096 and int8 at batch 64, arms
# alternated twice; then frigg-serve with its defaults under 32 streams for 180 s (serve3min.sh's first run).
# Run on the GPU host from the project root with .deps and .devrun carried; .devrun/base-src.tar.xz is
# `git archive c195b6c -- . ':!benchmarks' ':!golden' | xz`. Everything comes back in one tarball, out.tgz.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-serve \
    build-gpu/bin/frigg-run build-gpu/bin/frigg-eval build-gpu/bin/frigg-quantize build-gpu/tests/test_cuda_attn_decode \
    build-gpu/tests/test_cuda_kv_int8 build-gpu/tests/test_cuda_engine > /tmp/build-new.log 2>&1; echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 /tmp/build-*.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for x in test_cuda_kv_int8 test_cuda_attn_decode test_cuda_engine; do
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout 120 $N/tests/$x > /tmp/$x.log 2>&1
  echo "$x rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$x.log | tail -1)" | tee -a $R/log.txt
  grep -E "^FAIL" /tmp/$x.log | head -12 | tee -a $R/log.txt
done
el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,16,32 --ctx 512,4096 --kv-dtypes bf16,int8 decode"
A2="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 64 --ctx 512,4096 --kv-dtypes int8 decode"
for rep in 1 2; do
  for arm in base new; do B=$N; [ $arm = base ] && B=$P
    timeout 100 $B/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
    timeout 60 $B/bin/frigg-bench $A2 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",\"rep\":$rep,/" >> $R/ab.jsonl
  done
  el "ab $rep"
done
python3 benchmarks/h200-2026-12-02/ab_summary.py $R/ab.jsonl | tee $R/ab-summary.txt
el ab
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt
xz -dc .devrun/mimir-tok.json.xz > /tmp/mimir/tokenizer.json
st=32
$N/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --port 0 2> /tmp/serve.log &
spid=$!
for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
dur=$(( 575 - ( $(date +%s) - T0 ) - 15 )); [ $dur -gt 180 ] && dur=180
timeout $(( dur + 20 )) $N/bin/frigg-bench load --url http://127.0.0.1:$port --streams $st --duration-s $dur --prompt-tokens 512 \
    --max-tokens 256 > /tmp/load.jsonl 2>> $R/load.txt; echo "load $st ${dur}s rc $?" | tee -a $R/log.txt
sed "s/^{/{\"tag\":\"defaults-streams-$st-${dur}s\",/" /tmp/load.jsonl >> $R/load.jsonl
kill $spid; wait $spid; grep -E "replica|stopped|slots" /tmp/serve.log >> $R/serve.log
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
