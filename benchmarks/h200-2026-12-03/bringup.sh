#!/bin/bash
# Bring-up on one H200 of the build whose cuBLAS is opened on first use (common/cuda_blas_lazy.c): every CUDA
# test and test_scheduler; frigg-parity of the CUDA engine on the full-size random model (make_fixtures.py
# --mimir-size, HF's reference computed on the GPU), which must pass, and with --force-causal, which must fail;
# frigg-quantize of that model to int8 and int4 g128 and frigg-bench decode of the three builds at batch 1, 8,
# 16, 32, 64, ctx 512 (quantized weights take the dequantizing GEMM beyond 8 rows); frigg-eval kl of each build
# against bf16 on the CUDA engine, teacher-forced on golden/default/heldout.txt (DFM-Mimir's equivalent
# tokenizer). Run on the GPU host from the project root with .deps and .devrun carried (.devrun/snap.tar.xz:
# git archive of the commit measured, without benchmarks/ and golden/).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
R=$OUT; S=/tmp/s; mkdir -p $S
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
cat > /tmp/prompts.jsonl <<'P'
{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}
{"input_ids":[2,818,5279,529,7001,563,236743,236770,236771,236771,236832,236761,107,2094,1451]}
P
( timeout 300 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 8 --tf-len 64 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_start test_cuda_ops test_cuda_gemv test_cuda_gemv_q test_cuda_attn_decode test_cuda_prefill test_cuda_engine test_scheduler"
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-parity b/bin/frigg-bench b/bin/frigg-quantize b/bin/frigg-eval \
    $(for t in $TESTS; do echo b/tests/$t; done) > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for t in $TESTS; do
  FRIGG_ROOT=$S FRIGG_BIN=$S/b/bin timeout 200 b/tests/$t > /tmp/t.log 2>&1; echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed|^SKIP' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL" /tmp/t.log | head -20 >> $R/tests.txt
done
el tests
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
timeout 120 b/bin/frigg-parity --backend cuda --vs-cpu /tmp/mimir > $R/parity.txt 2>&1; echo "parity rc $?" >> $R/parity.txt
timeout 120 b/bin/frigg-parity --backend cuda --force-causal /tmp/mimir > /tmp/pc.txt 2>&1; echo "parity --force-causal rc $? (want 1)" >> $R/parity.txt
tail -4 /tmp/pc.txt >> $R/parity.txt; tail -3 $R/parity.txt
el parity
( /usr/bin/time -v timeout 120 b/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 ) > /tmp/q.txt 2>&1; echo "int8 rc $?" >> $R/log.txt
( /usr/bin/time -v timeout 150 b/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 ) > /tmp/q.txt 2>&1; echo "int4 rc $?" >> $R/log.txt
el quantized
for mdl in mimir m8 m4; do
  [ -f /tmp/$mdl/config.json ] || continue
  timeout 100 b/bin/frigg-bench --model /tmp/$mdl --repeats 3 --steps 32 --batch 1,8,16,32,64 --ctx 512 decode >> $R/decode.jsonl 2>> $R/decode.txt
  echo "$mdl rc $?" >> $R/decode.txt; el "decode $mdl"
done
for mdl in m8 m4; do
  [ -f /tmp/$mdl/config.json ] || continue
  timeout 120 b/bin/frigg-eval kl --model /tmp/$mdl --ref /tmp/mimir --backend cuda --ref-backend cuda --text golden/default/heldout.txt \
      --ctx 512 --limit 16 > /tmp/kl-$mdl.jsonl 2>> $R/log.txt; echo "kl $mdl rc $?" >> $R/log.txt
  tail -1 /tmp/kl-$mdl.jsonl | sed "s/^{/{\"build\":\"$mdl\",/" >> $R/kl.jsonl
done
el kl
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
python3 - $R/decode.jsonl <<'PY' | tee $R/summary.txt
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("bench") == "decode":
        print(f"{r.get('weights')}/{r.get('lm_head')} b{r['batch']:>2} {r['tok_s']:8.1f} tok/s {r['ms_per_step']:.3f} ms {r['gb_s']} GB/s"
              f" roof {r.get('roofline_frac')} {r.get('decode_proj')} {r['sm_clock_mhz']} MHz {r['temp_c']} C")
PY
cat $R/kl.jsonl
el done
