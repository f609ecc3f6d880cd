#!/bin/bash
# One H200, with the bf16 copy's defaults (an int8 build decodes from the copy at every size, int4 from 3 rows):
# scripts/quantize-then-eval golden/default on the CUDA engine (qte.txt, results.jsonl, results.md, quality-*.json);
# the full-size random model (make_fixtures.py --mimir-size) quantized to int8 and int4 g128 and scored on the CUDA
# engine against its bf16 (frigg-eval kl --text golden/default/heldout.txt --limit 40: kl-mimir-size-m8/m4.jsonl);
# prefill of one 4096-token prompt for each build, with the defaults and with --dequant-rows off (prefill.jsonl,
# prefill-stored.jsonl: frigg-bench --prefill 4096 prefill). Run on the GPU host from the project root with .deps
# and .devrun carried (.devrun/mimir-tok.json: ../shared/data/tokenizers/mimir-equivalent.tokenizer.json, the kl
# text's tokenizer; without it the kl lines fail). LIMIT (default 590): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4 /tmp/qte; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-quantize \
    build-gpu/bin/frigg-eval > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
FRIGG_BIN=$N/bin timeout 200 sh scripts/quantize-then-eval golden/default /tmp/qte --backend cuda > $R/qte.txt 2>&1
el "quantize-then-eval rc $?"
cp /tmp/qte/results.jsonl /tmp/qte/results.md $R/ 2>/dev/null; for m in int8 int4; do cp /tmp/qte/$m/quality.json $R/quality-$m.json 2>/dev/null; done
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp .devrun/mimir-tok.json /tmp/mimir/tokenizer.json
nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 14 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
nice timeout 200 $N/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 14 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt
grep rc /tmp/q.txt | tee -a $R/log.txt
el quantized
for m in m8 m4; do
  timeout $(( $(left) - 100 )) $N/bin/frigg-eval kl --ref /tmp/mimir --model /tmp/$m --backend cuda --text golden/default/heldout.txt \
      --limit 40 > $R/kl-mimir-size-$m.jsonl 2> $R/kl-mimir-size-$m.txt
  el "kl $m rc $?"
done
for x in "" "--dequant-rows off"; do
  f=prefill$([ -n "$x" ] && echo -stored).jsonl
  for m in /tmp/mimir /tmp/m8 /tmp/m4; do
    [ "$(left)" -gt 30 ] && timeout $(( $(left) - 10 )) $N/bin/frigg-bench --model $m $x --prefill 4096 --repeats 3 prefill >> $R/$f 2>> $R/prefill.txt
  done
  el "prefill '$x' rc $?"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
