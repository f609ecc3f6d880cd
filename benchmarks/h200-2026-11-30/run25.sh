#!/bin/bash
# device call 25 (1 x H200): dev/vram (read-probe versions and grid shapes, cudaMemcpy) and frigg-bench vram
# (the shipped probe and the lm_head GEMV) of run25.commit, alternated twice, on one GPU.
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r25; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r25-logs.tgz -C /tmp r25; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -o /tmp/vram kernels/dev/vram.cu > $R/build-vram.log 2>&1; echo "vram rc $?" >> $R/build-vram.log ) &
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
wait; tail -n1 $R/build-vram.log $R/build-new.log; el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for rep in 1 2; do
  timeout 120 /tmp/vram --repeats 7 > $R/dev-vram-$rep.txt 2>&1; echo "vram rc $?"
  timeout 60 /tmp/new/b/bin/frigg-bench --repeats 5 vram >> $R/bench-vram.jsonl 2>> $R/bench-vram.txt; echo "bench rc $?"
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
paste $R/dev-vram-1.txt $R/dev-vram-2.txt | cut -c1-150; cat $R/bench-vram.txt; snap; el done
