#!/bin/sh
# No kernel reads another kernel's output through the non-coherent path. Under PDL a kernel starts while the
# kernel in front of it is still writing, and ld.global.nc is only for data no one writes while the kernel
# runs: a GEMV read stale x that way (the test_cuda_engine logs 33f1e67 added to benchmarks/h200-2026-11-30/). Such reads
# go through ld_act (kernels/common.cuh); the only .nc loads left are the weight stream's (ld_stream,
# ld.global.nc.L1::no_allocate). This reads every kernels/*.cu's PTX (the build's, kept by make check's
# KEEP_PTX=1; else compiled here for sm_90) and fails on any other
# ld.global.nc, e.g. one a const __restrict__ pointer lets the compiler pick. kernels/dev/ is left out on
# purpose: its older kernel versions (v1/v2 decode attention, the old tensor-core GEMV, prefill variants) read
# .nc, but each harness times them on inputs written once before its chain of launches, which PTX allows.
if [ "${FRIGG_CUDA:-1}" = 0 ]; then
    echo "SKIP nc-loads: built without CUDA"
    echo "nc-loads: 0 passed, 0 failed"
    exit 0
fi
NVCC=${NVCC:-$(command -v nvcc || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })}
if [ -z "$NVCC" ]; then
    echo "SKIP nc-loads: no nvcc"
    echo "nc-loads: 0 passed, 0 failed"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/nc-loads.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
BUILD=${BUILD:-build}
kept=0
for f in kernels/*.cu; do
    # the PTX the build kept (make check builds with KEEP_PTX=1) with the object it came with (not older than it, and
    # the object not older than the source); else compiled here
    p="$BUILD/kernels/$(basename "$f" .cu).ptx" o="$BUILD/kernels/$(basename "$f" .cu).o"
    if [ -s "$p" ] && [ -e "$o" ] && ! [ "$o" -nt "$p" ] && ! [ "$f" -nt "$o" ]; then
        kept=$((kept + 1))
    elif p="$T/$(basename "$f" .cu).ptx"; ! "$NVCC" -O3 -std=c++17 -arch=sm_90 -Icommon -Ikernels -ptx "$f" -o "$p" 2>"$T/err"; then
        fail=$((fail + 1)); echo "FAIL: $f does not compile to PTX"; cat "$T/err"; continue
    fi
    bad=$(grep 'ld\.global\.nc' "$p" | grep -vc 'L1::no_allocate')
    if [ "$bad" -eq 0 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $f: $bad ld.global.nc loads outside the weight stream, e.g.:"
        grep 'ld\.global\.nc' "$p" | grep -v 'L1::no_allocate' | head -3
    fi
done
echo "nc-loads: PTX of $kept kernels as the build kept it, the others compiled here"
echo "nc-loads: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
