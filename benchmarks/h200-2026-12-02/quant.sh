#!/bin/bash
# The CUDA engine on int8 and int4 weights, and the prefill share after its cost model learns only from steps of
# prefill alone, on one H200: test_cuda_engine (quantized checkpoints against the CPU engine, sliced prefill,
# wide batches); frigg-quantize of the full-size random model (make_fixtures.py --mimir-size) to int8 and int4
# g128; frigg-bench decode of the bf16, int8 and int4 builds at batch 1, 8, 16, 64, ctx 512 (bytes per step
# counting each build's packed values and scales); frigg-serve --prefill-share 0.5 with 8 streams alone and
# beside 4,095-token arrivals (as prefill-share.sh).
# Run on the GPU host from the project root with .deps and .devrun carried (as serve.sh).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
R=$OUT; S=/tmp/s; mkdir -p $S; trap 'kill $spid 2>/dev/null' EXIT
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cpu --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-serve b/bin/frigg-bench b/bin/frigg-quantize \
    b/tests/test_cuda_engine > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
FRIGG_ROOT=$S timeout 200 b/tests/test_cuda_engine > /tmp/t.log 2>&1; echo "test_cuda_engine rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
grep -E "^FAIL" /tmp/t.log | head -30 >> $R/tests.txt
el tests
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
( /usr/bin/time -v timeout 120 b/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 ) > $R/quantize.txt 2>&1; echo "int8 rc $?" >> $R/quantize.txt
el int8
( /usr/bin/time -v timeout 150 b/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 ) >> $R/quantize.txt 2>&1; echo "int4 rc $?" >> $R/quantize.txt
el int4
for mdl in mimir m8 m4; do
  [ -f /tmp/$mdl/config.json ] || continue
  timeout 90 b/bin/frigg-bench --model /tmp/$mdl --repeats 3 --steps 32 --batch 1,8,16,64 --ctx 512 decode >> $R/decode.jsonl 2>> $R/decode.txt
  echo "$mdl rc $?" >> $R/decode.txt; el "decode $mdl"
done
grep "decode batch\| rc " $R/decode.txt
serve() {
  b/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots $1 --ctx $2 --prefill-share $3 \
      --port 0 2> /tmp/serve.log &
  spid=$!
  for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
}
load() {
  timeout $(( $4 + 60 )) b/bin/frigg-bench load --url http://127.0.0.1:$port --streams $1 --duration-s $4 --prompt-tokens $2 \
      --max-tokens $3 > /tmp/load-$5.jsonl 2>> $R/log.txt
  sed "s/^{/{\"tag\":\"$5\",/" /tmp/load-$5.jsonl >> $R/load.jsonl
}
serve 16 4096 0.5; el "serving"
load 8 512 256 20 "share-0.5-tpot-alone"
load 1 4095 1 24 "share-0.5-arrivals-4095" & apid=$!
sleep 2; load 8 512 256 20 "share-0.5-tpot-with-arrivals"; wait $apid
kill $spid; wait $spid
el load
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
el done
