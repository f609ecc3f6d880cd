#!/bin/bash
# On one H200, at the commit measured: test_cuda_gemv_q (the tensor-core quantized GEMV with more tiles in
# flight, bit for bit the bf16 kernel on the dequantized matrix); frigg-bench decode of the bf16, int8 and int4
# g128 builds of the full-size random model (make_fixtures.py --mimir-size) at batch 1, 2, 4, 8, 16, 64, ctx 512;
# frigg-serve (64 slots of 1,024 tokens, --max-prefill-tokens 2048) under frigg-bench load, 64 streams,
# 512-token prompts, 256 output tokens: --prefill-share 0 for 180 s, then 0.5 (the default) for what the
# 600 s call leaves (at most 180 s); each server's prefill counts as it prints them when stopped;
# test_cuda_engine last if time is left. Run on the GPU host from the project
# root with .deps and .devrun carried (as tcq.sh).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
R=$OUT; S=/tmp/s; mkdir -p $S; trap 'kill $spid 2>/dev/null' EXIT
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-quantize b/bin/frigg-serve \
    b/tests/test_cuda_gemv_q b/tests/test_cuda_engine > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
( nice timeout 200 b/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 8 > /tmp/q8.txt 2>&1; echo "int8 rc $?" >> /tmp/q8.txt
  nice timeout 200 b/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 8 > /tmp/q4.txt 2>&1; echo "int4 rc $?" >> /tmp/q4.txt ) &
qpid=$!
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
FRIGG_ROOT=$S FRIGG_BIN=$S/b/bin timeout 100 b/tests/test_cuda_gemv_q > /tmp/t.log 2>&1; echo "test_cuda_gemv_q rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
grep -E "^FAIL|first difference" /tmp/t.log | head -20 >> $R/tests.txt
el tests
wait $qpid; tail -1 /tmp/q8.txt >> $R/log.txt; tail -1 /tmp/q4.txt >> $R/log.txt
for mdl in mimir m8 m4; do
  [ -f /tmp/$mdl/config.json ] || continue
  timeout 100 b/bin/frigg-bench --model /tmp/$mdl --repeats 3 --steps 32 --batch 1,2,4,8,16,64 --ctx 512 decode >> $R/decode.jsonl 2>> $R/decode.txt
  echo "$mdl rc $?" >> $R/decode.txt; el "decode $mdl"
done
for share in 0 0.5; do
  dur=$(( 600 - 45 - ( $(date +%s) - T0 ) )); [ $dur -gt 180 ] && dur=180
  b/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots 64 --ctx 1024 --port 0 \
      --prefill-share $share --max-prefill-tokens 2048 2> /tmp/serve.log &
  spid=$!
  for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
  el "serving share $share on $port"
  timeout $(( dur + 30 )) b/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s $dur --prompt-tokens 512 --max-tokens 256 \
      > /tmp/load.jsonl 2>> $R/log.txt; echo "load rc $?" >> $R/log.txt
  sed "s/^{/{\"tag\":\"share-$share-streams-64-${dur}s\",/" /tmp/load.jsonl >> $R/load.jsonl
  kill $spid; wait $spid; grep -E "replica|stopped" /tmp/serve.log | sed "s/^/share $share: /" >> $R/serve.log
  el "load share $share"; tail -2 $R/log.txt
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
python3 - $R/load.jsonl $R/decode.jsonl <<'PY' | tee $R/summary.txt
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['tag']:30} {r['requests']:>4} req {r['failed']} failed {r['tok_s']:7.1f} tok/s  TTFT p50/p95 {r['ttft_ms_p50']}/{r['ttft_ms_p95']}"
          f"  TPOT p50/p99 {r['tpot_ms_p50']}/{r['tpot_ms_p99']}  {r['sm_clock_mhz']} MHz {r['temp_c']} C")
for l in open(sys.argv[2]):
    r = json.loads(l)
    if r.get("bench") == "decode":
        print(f"{r.get('weights')}/{r.get('lm_head')} b{r['batch']:>2} {r['tok_s']:8.1f} tok/s {r['ms_per_step']:.3f} ms {r['gb_s']} GB/s"
              f" roof {r.get('roofline_frac')} {r.get('decode_proj')} {r['sm_clock_mhz']} MHz {r['temp_c']} C")
PY
cat $R/serve.log
if [ $(( $(date +%s) - T0 )) -lt 540 ]; then
  FRIGG_ROOT=$S FRIGG_BIN=$S/b/bin timeout 50 b/tests/test_cuda_engine > /tmp/t.log 2>&1; echo "test_cuda_engine rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL" /tmp/t.log | head -20 >> $R/tests.txt
else echo "test_cuda_engine: not run (no time left in the call)" | tee -a $R/tests.txt; fi
el done
