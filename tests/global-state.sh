#!/bin/sh
# No process-wide mutable state in the library: every file-scope or function-local static variable in
# kernels/ and common/ that is not const must be one of the few listed here, each with the reason it is
# safe. Kernel choices, tuning tables and device properties live in each engine's kernel context
# (kernels/ctx.cuh), so two engines on two GPUs, or with different choices, work side by side.
# Prints one "N passed, N failed" line (tests/run-tests sums it).
cd "${FRIGG_ROOT:-.}" || exit 1
allowed='
common/tokenizer/tok_pretok.c:g_mctx        pcre2 match context: written once under pthread_once, read-only while matching
common/tokenizer/tok_pretok.c:g_mctx_once   the pthread_once guard of g_mctx
common/base/util.c:g_err               frigg_error(): _Thread_local, one slot per thread
common/engine/cuda_blas_lazy.c:g_once    the pthread_once guard of g: libcublas is loaded once per process (a process-wide library)
common/engine/cuda_blas_lazy.c:g         the loaded libcublas entry points, written once under g_once, read-only after
'
found=$(
    # file scope: a declaration at column 0 that is not a function, typedef, const or extern "C" block
    grep -nE '^(static |extern )?(_Thread_local )?(volatile )?(unsigned |signed )?[A-Za-z_][A-Za-z0-9_]*( [A-Za-z_][A-Za-z0-9_]*)? +\**[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])* *(=[^;(]*)?;' \
        kernels/*.cu kernels/*.cuh kernels/*.h common/*/*.c common/*/*.h |
        grep -vE ':[0-9]+:(typedef|return|using|extern "C")|\bconst\b'
    # function-local statics
    grep -nE '^[[:space:]]+static [^(]*[;=]' kernels/*.cu kernels/*.cuh common/*/*.c | grep -vE '\bconst\b|\bconstexpr\b|static_assert'
)
pass=0 fail=0
printf '%s\n' "$found" | while IFS= read -r line; do
    [ -n "$line" ] || continue
    file=${line%%:*}
    name=$(printf '%s\n' "$line" | sed -E 's/^[^:]+:[0-9]+://; s/=.*//; s/\[.*//; s/;.*//' | awk '{print $NF}' | tr -d '*')
    if printf '%s\n' "$allowed" | grep -q "^$file:$name "; then continue; fi
    echo "FAIL: process-wide mutable state: $line"
done >"${TMPDIR:-/tmp}/global-state.$$"
bad=$(grep -c '^FAIL' "${TMPDIR:-/tmp}/global-state.$$")
cat "${TMPDIR:-/tmp}/global-state.$$"
rm -f "${TMPDIR:-/tmp}/global-state.$$"
# the allowlist still names real variables (a stale entry hides nothing, but says what is no longer true)
stale=0
for entry in $(printf '%s\n' "$allowed" | awk 'NF {print $1}'); do
    f=${entry%%:*} v=${entry#*:}
    if ! grep -qE "\b$v\b" "$f" 2>/dev/null; then echo "FAIL: allowlisted $entry no longer exists"; stale=$((stale + 1)); fi
done
checked=$(printf '%s\n' "$found" | grep -c .)
if [ "$bad" -eq 0 ] && [ "$stale" -eq 0 ]; then pass=1; else fail=$((bad + stale)); fi
echo "$checked mutable statics in kernels/ and common/, $bad of them not on the list above"
echo "global-state.sh: $pass passed, $fail failed"
