#!/bin/sh
# The performance tables of README.md and benchmarks/PERFORMANCE.md are what scripts/perf-table writes from the
# result files they name: a result file added, or a source changed in README_SOURCES, without the tables
# regenerated (`scripts/perf-table --summary --readme README.md`, `scripts/perf-table --readme
# benchmarks/PERFORMANCE.md`) fails here. And the check can fail: a table cell edited by hand in a copy is put
# back by the script, so the copy then differs from what it was given.
ROOT=${FRIGG_ROOT:-$(pwd)}
PT=$ROOT/scripts/perf-table
T=$(mktemp -d "${TMPDIR:-/tmp}/perf-table.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $*"; }
cd "$ROOT" || exit 1
for pair in "README.md --summary" "benchmarks/PERFORMANCE.md"; do
    set -- $pair
    f=$1; shift
    cp "$f" "$T/doc.md"
    if ! python3 "$PT" "$@" --readme "$T/doc.md" > "$T/out" 2>&1; then
        no "perf-table $* --readme $f: $(cat "$T/out")"; continue
    fi
    if cmp -s "$f" "$T/doc.md"; then ok; else
        no "$f: its tables are not what 'scripts/perf-table $* --readme $f' writes:"; diff "$f" "$T/doc.md" | head -20
    fi
    # a decode row's tok/s changed by hand in a copy: the script writes it back
    sed '/perf-table:begin/,/perf-table:end/ s/| 1 | 512 | [0-9][0-9,.]* (/| 1 | 512 | 1.0 (/' "$f" > "$T/edited.md"
    if cmp -s "$f" "$T/edited.md"; then no "$f: no batch-1 ctx-512 decode row to edit"; continue; fi
    cp "$T/edited.md" "$T/doc.md"
    python3 "$PT" "$@" --readme "$T/doc.md" > "$T/out" 2>&1
    if cmp -s "$f" "$T/doc.md" && ! cmp -s "$T/edited.md" "$T/doc.md"; then ok; else
        no "$f: a hand-edited cell was not written back by perf-table"
    fi
done
echo "perf-table: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
