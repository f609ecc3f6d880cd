#!/bin/bash
# On one H200: the quantized tensor-core GEMV reading its weights through shared memory (gemv_tc.cu: cp.async
# of whole lines into per-warp stages) and whole prompts of one step prefilled as one group (cuda_engine.c:
# run_prefill_group). test_cuda_gemv_q (each quantized GEMV bit for bit the bf16 kernel of the same
# implementation on the dequantized matrix) and test_cuda_gemv (the bf16 one through shared memory bit for bit
# as from registers); kernels/dev/gemv_q --quick --no-prefill; kernels/dev/gemv --quick --only
# simt,tc,tc-smem,auto (bf16: tc-smem is fk_ctx_set_gemv_tc_smem); frigg-bench decode of the
# bf16, int8 and int4 g128 builds of the full-size random model (make_fixtures.py --mimir-size) at batch 1, 8,
# 16, 64, ctx 512; frigg-serve with its defaults (--prefill-share 0.5, --max-prefill-tokens 2048; 64 slots of
# 1,024 tokens) under frigg-bench load, 64 streams, 512-token prompts, 256 output tokens, 180 s, and each
# replica's prefill counts as printed when stopped; test_cuda_engine last. Run on the GPU host from the project
# root with .deps (../shared/gpu-host/pack-deps libcurl4-openssl-dev) and .devrun carried: .devrun/snap.tar.xz is
# `git archive <commit> -- . ':!benchmarks' ':!golden' | xz` of the commit measured (built in /tmp/s, golden/
# linked from the tree), .devrun/mimir-tok.json.xz ../shared/data/tokenizers/mimir-equivalent.tokenizer.json.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
R=$OUT; B=b; S=/tmp/s; trap 'kill $spid 2>/dev/null' EXIT
mkdir -p $S && tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
cd $S
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-quantize b/bin/frigg-serve b/dev/gemv_q b/dev/gemv \
    b/tests/test_cuda_gemv_q b/tests/test_cuda_gemv b/tests/test_cuda_engine > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for t in test_cuda_gemv_q test_cuda_gemv; do
  FRIGG_ROOT=$PWD FRIGG_BIN=$PWD/$B/bin timeout 100 $B/tests/$t > /tmp/t.log 2>&1
  echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|first difference" /tmp/t.log | head -20 >> $R/tests.txt
done
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
( nice timeout 200 $B/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 6 > /tmp/q8.txt 2>&1; echo "int8 rc $?" >> /tmp/q8.txt
  nice timeout 200 $B/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 6 > /tmp/q4.txt 2>&1; echo "int4 rc $?" >> /tmp/q4.txt ) &
qpid=$!
timeout 150 $B/dev/gemv_q --quick --no-prefill > $R/gemv_q.txt 2>&1; echo "gemv_q rc $?" >> $R/log.txt
el gemv_q
timeout 100 $B/dev/gemv --quick --only simt,tc,tc-smem,auto > $R/gemv.txt 2>&1; echo "gemv rc $?" >> $R/log.txt
el gemv
wait $qpid; tail -1 /tmp/q8.txt >> $R/log.txt; tail -1 /tmp/q4.txt >> $R/log.txt
for mdl in mimir m8 m4; do
  [ -f /tmp/$mdl/config.json ] || continue
  timeout 100 $B/bin/frigg-bench --model /tmp/$mdl --repeats 3 --steps 32 --batch 1,8,16,64 --ctx 512 decode >> $R/decode.jsonl 2>> $R/decode.txt
  echo "$mdl rc $?" >> $R/decode.txt; el "decode $mdl"
done
dur=$(( 600 - 75 - ( $(date +%s) - T0 ) )); [ $dur -gt 180 ] && dur=180
$B/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots 64 --ctx 1024 --port 0 2> /tmp/serve.log &
spid=$!
for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
el "serving on $port for $dur s"
timeout $(( dur + 30 )) $B/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s $dur --prompt-tokens 512 --max-tokens 256 \
    > /tmp/load.jsonl 2>> $R/log.txt; echo "load rc $?" >> $R/log.txt
sed "s/^{/{\"tag\":\"defaults-streams-64-${dur}s\",/" /tmp/load.jsonl >> $R/load.jsonl
kill $spid; wait $spid; grep -E "replica|stopped" /tmp/serve.log >> $R/serve.log
el "load"
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
if [ $(( $(date +%s) - T0 )) -lt 545 ]; then
  FRIGG_ROOT=$PWD FRIGG_BIN=$PWD/$B/bin timeout 50 $B/tests/test_cuda_engine > /tmp/t.log 2>&1; echo "test_cuda_engine rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL" /tmp/t.log | head -20 >> $R/tests.txt
else echo "test_cuda_engine: not run (no time left in the call)" | tee -a $R/tests.txt; fi
el done
