#!/bin/bash
# The quantized GEMV on tensor cores (gemv_tc.cu reading int8 / int4 as packed, dequant.cuh) and frigg-serve's
# prefill token limit (--max-prefill-tokens, default 2048) on one H200: test_cuda_start, test_cuda_gemv_q,
# test_cuda_engine, test_scheduler; frigg-parity on the full-size random model (make_fixtures.py --mimir-size
# --fp32-ref, its default prompts), which must pass, and with --force-causal, which must fail; frigg-serve
# (defaults: --prefill-share 0.5, --max-prefill-tokens 2048; 64 slots of 1,024 tokens) under frigg-bench load,
# 64 streams, 512-token prompts, 256 output tokens, 180 s; frigg-bench decode of the bf16, int8 and int4 g128
# builds at batch 1, 2, 4, 8, 16, 64, ctx 512. Run on the GPU host from the project root with .deps and .devrun
# carried (.devrun/snap.tar.xz: git archive of the commit measured, without benchmarks/ and golden/;
# .devrun/mimir-tok.json.xz: ../shared/data/tokenizers/mimir-equivalent.tokenizer.json).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
R=$OUT; S=/tmp/s; mkdir -p $S; trap 'kill $spid 2>/dev/null' EXIT
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda > /tmp/fixture.log 2>&1
  echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_start test_cuda_gemv_q test_cuda_engine test_scheduler"
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-run b/bin/frigg-parity b/bin/frigg-bench b/bin/frigg-quantize \
    b/bin/frigg-serve $(for t in $TESTS; do echo b/tests/$t; done) > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
( nice timeout 200 b/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 6 > /tmp/q8.txt 2>&1; echo "int8 rc $?" >> /tmp/q8.txt
  nice timeout 200 b/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 6 > /tmp/q4.txt 2>&1; echo "int4 rc $?" >> /tmp/q4.txt ) &
qpid=$!
el fixture
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for t in $TESTS; do
  FRIGG_ROOT=$S FRIGG_BIN=$S/b/bin timeout 200 b/tests/$t > /tmp/t.log 2>&1; echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed|^SKIP' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|first difference" /tmp/t.log | head -20 >> $R/tests.txt
done
el tests
timeout 100 b/bin/frigg-parity --backend cuda /tmp/mimir > /tmp/parity.jsonl 2> $R/parity.txt; echo "parity rc $? (0 = pass)" >> $R/parity.txt
timeout 100 b/bin/frigg-parity --backend cuda --force-causal /tmp/mimir > /dev/null 2> /tmp/pc.txt; echo "parity --force-causal rc $? (must be 1)" >> $R/parity.txt
tail -2 /tmp/pc.txt >> $R/parity.txt; tail -5 $R/parity.txt
el parity
b/bin/frigg-serve --backend cuda --model /tmp/mimir --served-model-name mimir-random --slots 64 --ctx 1024 --port 0 2> /tmp/serve.log &
spid=$!
for i in $(seq 1 600); do grep -q ready /tmp/serve.log && break; kill -0 $spid 2>/dev/null || break; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' /tmp/serve.log)
el "serving on $port"
timeout 260 b/bin/frigg-bench load --url http://127.0.0.1:$port --streams 64 --duration-s 180 --prompt-tokens 512 --max-tokens 256 \
    > /tmp/load.jsonl 2>> $R/log.txt; echo "load rc $?" >> $R/log.txt
sed 's/^{/{"tag":"streams-64-180s",/' /tmp/load.jsonl >> $R/load.jsonl
kill $spid; wait $spid; head -5 /tmp/serve.log > $R/serve.log
el load
wait $qpid; cat /tmp/q8.txt /tmp/q4.txt | grep -v "^frigg-quantize: \[" | tail -6 >> $R/log.txt
for mdl in mimir m8 m4; do
  [ -f /tmp/$mdl/config.json ] || continue
  timeout 100 b/bin/frigg-bench --model /tmp/$mdl --repeats 3 --steps 32 --batch 1,2,4,8,16,64 --ctx 512 decode >> $R/decode.jsonl 2>> $R/decode.txt
  echo "$mdl rc $?" >> $R/decode.txt; el "decode $mdl"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
python3 - $R/load.jsonl $R/decode.jsonl <<'PY' | tee $R/summary.txt
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['tag']:22} {r['requests']:>4} req {r['failed']} failed {r['tok_s']:7.1f} tok/s  TTFT p50/p95 {r['ttft_ms_p50']}/{r['ttft_ms_p95']}"
          f"  TPOT p50/p99 {r['tpot_ms_p50']}/{r['tpot_ms_p99']}  {r['sm_clock_mhz']} MHz {r['temp_c']} C")
for l in open(sys.argv[2]):
    r = json.loads(l)
    if r.get("bench") == "decode":
        print(f"{r.get('weights')}/{r.get('lm_head')} b{r['batch']:>2} {r['tok_s']:8.1f} tok/s {r['ms_per_step']:.3f} ms {r['gb_s']} GB/s"
              f" roof {r.get('roofline_frac')} {r.get('decode_proj')} {r['sm_clock_mhz']} MHz {r['temp_c']} C")
PY
el done
