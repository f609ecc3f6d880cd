#!/bin/bash
# device call 77 (1 x H200): dev/persist with persist-stream (no dependency, no multiply), then Nsight Compute
# on the persist-tc kernel (one launch). Working tree.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
R=/tmp/r77; mkdir -p $R; snap() { tar czf $OUT/r77-logs.tgz -C /tmp r77; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=/tmp/b BIN=/tmp/b/bin /tmp/b/dev/persist > $R/build.log 2>&1; echo "rc $?" >> $R/build.log
tail -n1 $R/build.log
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 60 /tmp/b/dev/persist --slots 12 --repeats 20 2>&1 | tee -a $R/persist.txt
timeout 200 ncu -k regex:persist_tc -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats /tmp/b/dev/persist --slots 12 --repeats 1 > $R/ncu.txt 2>&1; echo "ncu rc $?"
grep -E "Duration|Throughput|Stall|Warp Cycles|Issued|Eligible|DRAM|L2|Active" $R/ncu.txt | head -60
snap
