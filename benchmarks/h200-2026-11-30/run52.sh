#!/bin/bash
# device call 52 (2 x H200): Nsight Compute on the decode kernels of run52.commit (= run 51's new), each kernel
# alone (ncu serialises: no PDL overlap). GPU 0: batch 8, GPU 1: batch 1, ctx 512. Sections: speed of light,
# warp states (stall reasons), scheduler, occupancy, launch, memory workload, source counters (per-SASS stalls).
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r52; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r52-logs.tgz -C /tmp r52; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j30 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b; cd /tmp/new
ncu --version > $R/ncu-version.txt 2>&1
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters"
prof() { # gpu batch
  local g=$1 b=$2 C="taskset -c $(( $1 * 16 ))-$(( $1 * 16 + 15 ))"
  CUDA_VISIBLE_DEVICES=$g $C timeout 400 ncu --clock-control none --kernel-name regex:"gemv|attn_decode" --launch-skip 700 --launch-count 10 $S -o $R/b$b -f \
    $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 1 --batch $b --ctx 512 decode > $R/ncu-b$b.out 2> $R/ncu-b$b.err
  echo "ncu b$b rc $?" >> $R/ncu-b$b.err
  ncu --import $R/b$b.ncu-rep --page details --csv > $R/details-b$b.csv 2>&1
  ncu --import $R/b$b.ncu-rep --page details > $R/details-b$b.txt 2>&1
  for i in 0 1 2 3 4; do ncu --import $R/b$b.ncu-rep --page source --csv --print-source sass --launch-skip $i --launch-count 1 > $R/source-b$b-$i.csv 2>&1; done
}
prof 0 8 & prof 1 1 & wait
el profiled; tail -n2 $R/ncu-b*.err; ls -la $R | head -40
snap; el done
