#!/bin/sh
# The structured-output test set (tests/grammar-schemas/: 200 generated schemas, realistic hand-written ones, bad/
# ones that must be refused) against the grammar core and, where it can, frigg-run:
#   - tests/grammar-schemas/generate.py --check: the committed gen-NNN.json files are the generator's output;
#   - $BUILD/tests/tools/grammar_schemas --check: every schema compiles, every bad/ one (and a 1.1 MB one) is refused
#     with its expected message, and 8 random documents of each (walks through the token masker over a byte
#     vocabulary) end and are JSON by an RFC 8259 recogniser of its own;
#   - with scripts/pyenv's check set (Python jsonschema with rfc3339-validator; installed under CI=true, else used
#     when present; otherwise a SKIP line): those documents validate against their schemas (scripts/grammar-check.py
#     --docs), formats date, time, date-time, email, uuid, ipv4 checked;
#   - with the check set and a frigg-run that takes response_format: scripts/grammar-check.py on the bundled model
#     for the first GRAMMAR_CHECK_LIMIT (default 12) schemas, greedy and 2 seeds at temperature 1.0, 40 tokens: every
#     "stop" output validates, every "length" output is a prefix the grammar continues, every bad schema gets its
#     error line (the whole set: scripts/grammar-check.py --bin BIN, by hand).
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
S=$ROOT/tests/grammar-schemas
TOOL=$BUILD/tests/tools/grammar_schemas
T=$(mktemp -d "${TMPDIR:-/tmp}/grammar-schemas.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
good() { pass=$((pass + 1)); }
add_counts() { # NAME LOG: the "...: N passed, N failed" line of LOG into the totals
    line=$(grep -E '^[a-z_-]+: [0-9]+ passed, [0-9]+ failed' "$2" | tail -n 1)
    if [ -z "$line" ]; then bad "$1: no summary line"; tail -n 20 "$2"; return; fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/'); f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    pass=$((pass + p)); fail=$((fail + f))
    [ "$f" -eq 0 ] || { echo "FAIL: $1:"; grep -E '^FAIL' "$2" | head -n 40; }
}

if python3 "$S/generate.py" --check > "$T/gen.log" 2>&1; then good; else bad "generate.py --check: $(cat "$T/gen.log")"; fi

if [ ! -x "$TOOL" ]; then
    bad "$TOOL is not built (make builds tests/tools/*.c)"
    echo "grammar-schemas: $pass passed, $fail failed"; exit 1
fi
"$TOOL" --check "$S" --docs 8 --docs-out "$T/docs.tsv" > "$T/check.log" 2>&1
add_counts "grammar_schemas --check" "$T/check.log"
grep -E '^  [0-9]+ schemas' "$T/check.log"

PY=""
if [ -n "${CI:-}" ] && [ -z "${FRIGG_NO_LIVE:-}" ]; then
    PY=$("$ROOT/scripts/pyenv" 2>"$T/pyenv.log") || { bad "scripts/pyenv (the check set)"; tail -n 5 "$T/pyenv.log"; PY=""; }
elif "$ROOT/scripts/pyenv" --have check 2>/dev/null; then
    PY=$("$ROOT/scripts/pyenv" 2>/dev/null)
fi
if [ -n "$PY" ]; then
    "$PY" "$ROOT/scripts/grammar-check.py" --docs "$T/docs.tsv" > "$T/docs.log" 2>&1
    add_counts "grammar-check.py --docs" "$T/docs.log"
    grep -E '^(grammar-check: [0-9]+ random|NOTE)' "$T/docs.log" | cut -c1-300
    # frigg-run before response_format answers such a line with an error naming it
    probe=$(echo '{"prompt":"<bos>","max_tokens":4,"response_format":{"type":"json_object"}}' |
        "$BIN/frigg-run" --model "$ROOT/golden/default" --backend cpu --threads 2 2>&1)
    case $probe in
        *'"error"'*response_format*)
            echo "SKIP grammar-schemas: frigg-run does not take response_format yet: no decoding on the model" ;;
        *'"finish_reason"'*)
            "$PY" "$ROOT/scripts/grammar-check.py" --bin "$BIN" --model "$ROOT/golden/default" --schemas "$S" \
                --limit "${GRAMMAR_CHECK_LIMIT:-12}" --seeds 2 --max-tokens 40 --parallel 8 --threads 2 --tool "$TOOL" \
                > "$T/run.log" 2>&1
            add_counts "grammar-check.py --bin" "$T/run.log"
            grep -E '^(grammar-check: [0-9]+ schemas|NOTE)' "$T/run.log" | cut -c1-300 ;;
        *) bad "frigg-run on a response_format line: $(echo "$probe" | head -c 400)" ;;
    esac
else
    echo "SKIP grammar-schemas: no Python environment with jsonschema (scripts/pyenv's check set; installed under CI=true): the documents are not validated against their schemas, and frigg-run's are not made"
fi
echo "grammar-schemas: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
