#!/bin/bash
# device call 59 (1 x H200): run59.commit (= run 57's kernels): the whole test_cuda_attn_decode (not the quick
# mode), and the opt-in decode rows (FRIGG_ATTN_DECODE=split, FRIGG_GEMV_IMPL=tc) of the shipped kernels.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r59; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r59-logs.tgz -C /tmp r59; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_attn_decode > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b; cd /tmp/new; el built
FRIGG_ATTN_DECODE=split timeout 60 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 decode > $R/opt-attn-split.jsonl 2> $R/opt.txt; echo "opt attn-split rc $?"
FRIGG_GEMV_IMPL=tc timeout 60 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 decode > $R/opt-gemv-tc.jsonl 2>> $R/opt.txt; echo "opt gemv-tc rc $?"; grep decode $R/opt.txt | head -20
snap; el opt
timeout 200 $N/tests/test_cuda_attn_decode > $R/test_cuda_attn_decode.log 2>&1; echo "rc $?" >> $R/test_cuda_attn_decode.log; tail -n2 $R/test_cuda_attn_decode.log
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
snap; el done
