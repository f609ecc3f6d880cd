#!/bin/sh
# The make set-up a newcomer meets (GNUmakefile): a build tree keeps the configuration it was made with, so
# `make install` after `make FRIGG_CUDA=0` compiles no CUDA into that tree and installs the CPU-only build (it used
# to add the CUDA objects to the library and install the CPU-only programs beside it); giving FRIGG_CUDA again
# rebuilds the tree; `make demo` builds every program into bin/, which the README's quickstart runs (it built
# frigg-run alone, in build-demo/bin), and `make check` leaves a bin/ where there was none. One CPU-only frigg-run
# is compiled in a scratch tree; the rest is `make -n`.
ROOT=${FRIGG_ROOT:-.}
T=$(mktemp -d "${TMPDIR:-/tmp}/build-config.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
# run-tests is started by make check with FRIGG_CUDA in the environment (and make's own MAKEFLAGS): a newcomer's
# shell has neither, and either would stand in for the tree's record
M="env -u FRIGG_CUDA -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C $ROOT"

$M FRIGG_CUDA=0 BUILD="$T/b" BIN="$T/bin" -j2 "$T/bin/frigg-run" > "$T/log" 2>&1 && [ -x "$T/bin/frigg-run" ] && ok ||
    { no "make FRIGG_CUDA=0 frigg-run: $(tail -n 5 "$T/log")"; }
[ "$(cat "$T/b/frigg-config" 2>/dev/null)" = 0 ] && ok || no "the tree does not record FRIGG_CUDA=0"
# a later make in the tree, FRIGG_CUDA not given (nvcc or not): nothing of CUDA compiled or linked
$M -n BUILD="$T/b" BIN="$T/bin" PREFIX="$T/p" install > "$T/n" 2>&1
if grep -q "nvcc\|common/engine/cuda_engine\.c\|-lcudart\|FRIGG_CUDA=1" "$T/n"; then
    no "make install after make FRIGG_CUDA=0 builds CUDA: $(grep -m 3 'nvcc\|engine/cuda_\|-lcudart\|FRIGG_CUDA=1' "$T/n")"
else ok; fi
# FRIGG_CUDA given again: every object is rebuilt (the record changes)
$M -n FRIGG_CUDA=1 BUILD="$T/b" BIN="$T/bin" "$T/bin/frigg-run" > "$T/n1" 2>&1
grep -q "cmd/frigg-run.c" "$T/n1" && grep -q "FRIGG_CUDA=1" "$T/n1" && ok || no "FRIGG_CUDA=1 in a CPU tree does not rebuild it: $(head -n 3 "$T/n1")"
# make demo: every program into bin/ (BIN); make check: a bin/ where there is none
$M -n BIN="$T/dbin" demo > "$T/d" 2>&1
for p in frigg-run frigg-eval frigg-quantize frigg-parity frigg-bench frigg-serve; do
    grep -q -- "-o $T/dbin/$p " "$T/d" || { no "make demo does not build $p into BIN"; continue; }
    ok
done
grep -q "^$T/dbin/frigg-run -p " "$T/d" && ok || no "make demo does not run BIN/frigg-run"
$M -n BIN="$T/cbin" check > "$T/c" 2>&1
grep -q "ln -s build-check/bin $T/cbin" "$T/c" && ok || no "make check leaves no bin/"
echo "build-config: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
