#!/bin/bash
# One H200: compute-sanitizer over the CUDA tests at the commit measured — memcheck of test_cuda_engine (every
# engine path, the 16-row GEMV step among them) beside racecheck of test_cuda_gemv (the tensor-core GEMV's shared
# memory: the partials' parity buffers that warps 0 and 1 read while the next tile's are written), then memcheck
# of test_cuda_gemv as far as the call's time allows. Logs: memcheck-engine.txt, racecheck-gemv.txt,
# memcheck-gemv.txt (the sanitizer's summary line and the test's last line each). LIMIT (default 560): seconds.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-560} - ( $(date +%s) - T0 ) )); }
N=$PWD/build-gpu
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/tests/test_cuda_engine \
    build-gpu/tests/test_cuda_gemv > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
compute-sanitizer --version | tail -1 >> $R/log.txt
run() { # tool test log timeout
  FRIGG_ROOT=$PWD FRIGG_BIN=$N/bin timeout $4 compute-sanitizer --tool $1 --error-exitcode 3 $N/tests/$2 > /tmp/$3 2>&1
  local rc=$?; { echo "$1 $2 rc $rc (124: stopped by the time limit)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, [0-9]+ failed" /tmp/$3 | tail -3
    grep -m5 -E "^=+ (Invalid|Race|Error)" /tmp/$3; } > $R/$3; cat $R/$3 | tee -a $R/log.txt
}
run memcheck test_cuda_engine memcheck-engine.txt $(( $(left) - 20 )) &
e=$!
run racecheck test_cuda_gemv racecheck-gemv.txt $(( $(left) / 2 ))
el racecheck
[ $(left) -gt 60 ] && run memcheck test_cuda_gemv memcheck-gemv.txt $(( $(left) - 30 ))
wait $e
el done
