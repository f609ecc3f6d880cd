#!/bin/sh
# frigg-parity as a CI gate on this machine: the CPU engine against HF's reference files for the three
# golden fixtures must pass, and the same gate with the mask forced causal must fail (exit 1).
BIN=${FRIGG_BIN:-bin}
F=golden/fixtures
pass=0; fail=0
if "$BIN/frigg-parity" --backend cpu --threads 2 $F/tiny-packed $F/tiny-split $F/tiny-sharded >/dev/null 2>"${TMPDIR:-/tmp}/parity.$$"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1)); echo "FAIL: frigg-parity on the fixtures"; cat "${TMPDIR:-/tmp}/parity.$$"
fi
"$BIN/frigg-parity" --backend cpu --threads 2 --force-causal $F/tiny-packed >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --force-causal exited $rc, want 1"; fi
rm -f "${TMPDIR:-/tmp}/parity.$$"
echo "parity: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
