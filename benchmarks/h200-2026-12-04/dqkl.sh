#!/bin/bash
# One H200, with the bf16 copy's defaults: the full-size random model (make_fixtures.py --mimir-size) quantized to
# int8 and int4 g128 and scored on the CUDA engine against its bf16, teacher-forced on golden/default/heldout.txt
# (frigg-eval kl --backend cuda --text ... --limit 40: kl-mimir-size-m8.jsonl, kl-mimir-size-m4.jsonl), as
# h200-2026-12-02/quality/ did with the stored weights. Run on the GPU host from the project root with .deps and
# .devrun carried (.devrun/mimir-tok.json: ../shared/data/tokenizers/mimir-equivalent.tokenizer.json).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-quantize build-gpu/bin/frigg-eval \
    > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp .devrun/mimir-tok.json /tmp/mimir/tokenizer.json
nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 14 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
nice timeout 200 $N/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 14 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt
grep rc /tmp/q.txt | tee -a $R/log.txt
el quantized
for m in m8 m4; do
  timeout 150 $N/bin/frigg-eval kl --ref /tmp/mimir --model /tmp/$m --backend cuda --text golden/default/heldout.txt --limit 40 \
      > $R/kl-mimir-size-$m.jsonl 2> $R/kl-mimir-size-$m.txt
  el "kl $m rc $?"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
