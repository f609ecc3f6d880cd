#!/bin/bash
# The bf16, int8 and int4 g128 builds side by side on one H200, at the commit measured: test_cuda_gemv_q;
# kernels/dev/gemv_q --no-prefill (each quantized shape at batch 1, 2, 4, 8 under auto, simt and tc, beside
# bf16's); Nsight Compute (--set full) on the first CUDA-core quantized GEMV the bench checks (int8 gqkv, batch
# 1); the full-size random model (make_fixtures.py --mimir-size) quantized to int8 and int4; frigg-bench matrix
# --builds over the three with --kv-dtypes bf16,int8 at batch 1, 8, 32 and ctx 512, 2048, alternated cell by
# cell after cooling to 65 C; frigg-bench prefill at 4,096 tokens for each build.
# Run on the GPU host from the project root with .deps and .devrun carried (as gemvq.sh).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
R=$OUT; S=/tmp/s; mkdir -p $S
tar xJf .devrun/snap.tar.xz -C $S && ln -s $PWD/golden $S/golden && ln -s $PWD/.deps $S/.deps || exit 1
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json
cd $S
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cpu --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-quantize b/dev/gemv_q \
    b/tests/test_cuda_gemv_q > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
FRIGG_ROOT=$S FRIGG_BIN=$S/b/bin timeout 100 b/tests/test_cuda_gemv_q > /tmp/t.log 2>&1
echo "test_cuda_gemv_q rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
grep -E "FAIL|first difference" /tmp/t.log | head -20 >> $R/tests.txt
timeout 100 b/dev/gemv_q --no-prefill > $R/gemv_q.txt 2>&1; echo "gemv_q rc $?" >> $R/log.txt
el gemv_q
timeout 60 ncu --set full --kernel-name gemv_q_kernel --launch-count 1 b/dev/gemv_q --quick --only int8 --no-bf16 --no-prefill \
    > $R/ncu-gemv_q.txt 2>&1; echo "ncu rc $?" >> $R/log.txt
el ncu
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
timeout 100 b/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> $R/log.txt
timeout 100 b/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> $R/log.txt
el quantized
timeout 260 b/bin/frigg-bench --builds /tmp/mimir,/tmp/m8,/tmp/m4 --kv-dtypes bf16,int8 --batch 1,8,32 --ctx 512,2048 \
    --repeats 3 --steps 32 --cooldown-c 65 matrix > $R/builds.jsonl 2> $R/builds.txt; echo "matrix rc $?" >> $R/builds.txt
el matrix
for m in mimir m8 m4; do
  timeout 40 b/bin/frigg-bench --model /tmp/$m --repeats 3 --prefill 4096 prefill >> $R/prefill.jsonl 2>> $R/prefill.txt
  echo "$m rc $?" >> $R/prefill.txt
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
