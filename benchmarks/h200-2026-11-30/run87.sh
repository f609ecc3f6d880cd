#!/bin/bash
# device call 87 (1 x H200): Nsight Compute on the first three GEMV launches (gqkv, o, gate_up shapes) of
# dev/persist's chain-auto, tc-norm, eng-simt and eng-tc arms (--only: one replay). Working tree (dev/persist --only).
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
R=/tmp/r87; mkdir -p $R; snap() { tar czf $OUT/r87-logs.tgz -C /tmp r87; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=/tmp/b BIN=/tmp/b/bin /tmp/b/dev/persist > $R/build.log 2>&1; echo "rc $?" >> $R/build.log
tail -n1 $R/build.log
for arm in chain-auto tc-norm eng-simt eng-tc; do
  timeout 120 ncu -k regex:gemv --launch-count 3 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats /tmp/b/dev/persist --only $arm > $R/ncu-$arm.txt 2>&1; echo "$arm rc $?"
  grep -E "gemv.*\(|Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Block Limit Reg|Grid Size|Block Size" $R/ncu-$arm.txt | sed -E 's/\(const.*\) \(/ (/' | cut -c1-110
done
snap
