#!/bin/sh
# A fresh clone has no ../shared (the corpus, the GSM8K split, the DFM-Mimir-equivalent tokenizer and the
# template audit): every test that reads it must then pass what it can check without it and say what it skipped
# with a SKIP line naming the missing path, never fail. Runs each such test (the test programs that call
# th_shared(), the shell tests that read $FRIGG_SHARED) with FRIGG_SHARED pointed at a folder that does not exist.
ROOT=${FRIGG_ROOT:-$(pwd)}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/no-shared.XXXXXX")
trap 'rm -rf "$T"' EXIT
MISSING=$T/no-shared-here
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
check() { # name, command...
    name=$1; shift
    FRIGG_SHARED=$MISSING "$@" > "$T/out" 2>&1; rc=$?
    summary=$(grep -E '^([A-Za-z0-9_./-]+: )?[0-9]+ passed, [0-9]+ failed' "$T/out" | tail -n 1)
    if [ "$rc" = 0 ] && echo "$summary" | grep -q ' 0 failed'; then ok; else
        no "$name without the shared data: exit $rc, \"$summary\""; grep -E '^FAIL' "$T/out" | head -5; fi
    grep -q "^SKIP.*$MISSING" "$T/out" && ok || no "$name: no SKIP line names the missing $MISSING"
}
n=0
for src in $(grep -l 'th_shared()' "$ROOT"/tests/test_*.c); do
    t=$BUILD/tests/$(basename "$src" .c)
    [ -x "$t" ] || { no "$t is not built"; continue; }
    n=$((n + 1))
    check "$(basename "$t")" env FRIGG_ROOT="$ROOT" "$t"
done
for s in $(grep -l 'FRIGG_SHARED' "$ROOT"/tests/*.sh); do
    [ "$(basename "$s")" = no-shared.sh ] && continue
    n=$((n + 1))
    check "$(basename "$s")" env FRIGG_ROOT="$ROOT" sh "$s"
done
[ "$n" -ge 3 ] && ok || no "only $n tests read the shared data (test_tokenizer, test_chat, test_gsm8k at least)"
echo "no-shared: $n tests run with FRIGG_SHARED=$MISSING"
echo "no-shared: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
