#!/bin/bash
# Prefill beside decode on one H200: frigg-serve with --prefill-share 0.5 (prompts that do not fit half a decode
# step run by layer slices) against --prefill-share 0 (every prompt whole), arms alternated, on the full-size
# random model with DFM-Mimir's equivalent tokenizer: TPOT of 8 streams (512-token prompts, 256 output tokens)
# alone and while a ninth client sends 4,095-token prompts back to back (16 slots of 4,096 tokens); then 64
# streams of 512/256 (64 slots of 1,024). Before that, the CUDA tests of the commit: test_cuda_engine (the
# sliced-prefill and wide-batch tests), test_scheduler (batch invariance with a prefill share on the CUDA
# engine), test_cuda_gemv and test_cuda_gemv_q (the quantized-weight kernels).
# Run on the GPU host from the project root with .deps and .devrun carried (as serve.sh).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=$OUT; S=/tmp/s; mkdir -p $S; trap 'kill $spid 2>/dev/null' EXIT
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-serve b/bin/frigg-bench b/tests/test_cuda_engine \
    b/tests/test_scheduler b/tests/test_cuda_gemv b/tests/test_cuda_gemv_q > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 2 --tf-len 128 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for t in test_cuda_engine test_scheduler test_cuda_gemv test_cuda_gemv_q; do
  FRIGG_ROOT=$S timeout 300 b/tests/$t > /tmp/$t.log 2>&1; echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/$t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|^SKIP|wide B|batch invariance:" /tmp/$t.log | head -30 >> $R/tests.txt
done
el tests
wait $fpid; tail -2 /tmp/fixture.log; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
serve() { # serve SLOTS CTX SHARE: start, wait until ready, set $port
  b/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots $1 --ctx $2 --prefill-share $3 \
      --port 0 2> /tmp/serve.log &
  spid=$!
  for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log); cat /tmp/serve.log >> $R/serve.log
}
stop() { kill $spid; wait $spid; echo "serve exit $?" >> $R/serve.log; }
load() { # load STREAMS PROMPT MAXTOK SECONDS TAG
  timeout $(( $4 + 60 )) b/bin/frigg-bench load --url http://127.0.0.1:$port --streams $1 --duration-s $4 --prompt-tokens $2 \
      --max-tokens $3 > /tmp/load-$5.jsonl 2>> $R/load.txt; echo "load $5 rc $?" >> $R/load.txt
  sed "s/^{/{\"tag\":\"$5\",/" /tmp/load-$5.jsonl >> $R/load.jsonl
}
for share in 0.5 0; do
  serve 16 4096 $share; el "serving 16 x 4096, share $share"
  load 8 512 256 20 "share-$share-tpot-alone"
  load 1 4095 1 24 "share-$share-arrivals-4095" & apid=$!
  sleep 2; load 8 512 256 20 "share-$share-tpot-with-arrivals"; wait $apid
  stop
done
el arrivals
for share in 0.5 0; do
  serve 64 1024 $share; el "serving 64 x 1024, share $share"
  load 64 512 256 30 "share-$share-streams-64"
  stop
done
el load
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
python3 - $R/load.jsonl <<'PY' | tee $R/summary.txt
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['tag']:34} {r['streams']:>2} streams {r['requests']:>4} req {r['failed']} failed {r['tok_s']:7.1f} tok/s"
          f"  TTFT p50/p95 {r['ttft_ms_p50']}/{r['ttft_ms_p95']} ms  TPOT p50/p99 {r['tpot_ms_p50']}/{r['tpot_ms_p99']} ms"
          f"  {r['sm_clock_mhz']} MHz {r['temp_c']} C")
PY
el done
