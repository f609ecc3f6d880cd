#!/bin/bash
# device call 38 (1 of 2 H200s): run38.commit (frigg-bench vram with an untimed probe between the copy and the
# timed probe; the kernels are run 27's). frigg-bench vram twice, dev/vram once, then frigg-bench decode
# batch 1 and 8 at ctx 512 (roofline fractions against the new probe) twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r38; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r38-logs.tgz -C /tmp r38; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/dev/vram > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for rep in 1 2; do timeout 60 $N/bin/frigg-bench --repeats 5 vram > $R/bench-vram-$rep.jsonl 2> $R/bench-vram-$rep.txt; cat $R/bench-vram-$rep.txt; done
timeout 60 $N/dev/vram --repeats 5 > $R/vram.txt 2>&1; grep -E "shipped|memcpy" $R/vram.txt
for rep in 1 2; do timeout 60 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode > $R/decode-$rep.jsonl 2> $R/decode-$rep.txt; grep -E "decode|vram" $R/decode-$rep.txt | head -4; done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
