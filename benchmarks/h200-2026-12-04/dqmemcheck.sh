#!/bin/bash
# One H200: compute-sanitizer memcheck over the bf16 copy's paths on the bundled model's int8 and int4 g128 builds
# (golden/default, small: every kernel of the copy, the freed stored matrices and the int4 build's stored path
# run in seconds): frigg-bench decode at batch 1, 2, 4, 8, 32 and prefill, with the defaults and with
# --dequant-rows off, each under memcheck (memcheck-*.txt: the ERROR SUMMARY line). Run on the GPU host from the
# project root with .deps carried.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
R=/tmp/r; rm -rf $R /tmp/q8 /tmp/q4; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
N=$PWD/build-gpu
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-quantize \
    > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
$N/bin/frigg-quantize golden/default /tmp/q8 --method int8 > /dev/null 2>&1 && $N/bin/frigg-quantize golden/default /tmp/q4 --method int4 > /dev/null 2>&1 || exit 1
for m in q8 q4; do
  for x in "" "--dequant-rows off"; do
    f=$R/memcheck-$m$([ -n "$x" ] && echo -stored).txt
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/bin/frigg-bench --model /tmp/$m --backend cuda $x \
        --batch 1,2,4,8,32 --ctx 128 --steps 4 --repeats 3 --prefill 64 decode prefill > $f 2>&1
    echo "$m '$x' rc $? (3: errors found): $(grep 'ERROR SUMMARY' $f)" | tee -a $R/log.txt
  done
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/log.txt
