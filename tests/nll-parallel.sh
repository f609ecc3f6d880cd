#!/bin/sh
# frigg-eval nll --parallel: the sequences go through the scheduler as score requests, several per engine
# step. The same input through -P 4 and -P 1 prints the same lines, in input order; every good line's
# figures equal those of the line scored alone (its own process); a bad line keeps its place with its line
# number and id; input is read as it comes; the held-out set reproduces golden/default/frigg-nll.txt (the
# one-sequence-at-a-time loop's record; not under FRIGG_QUICK=1). The bundled model, CPU engine.
BIN=${FRIGG_BIN:-bin}
M=golden/default
T=$(mktemp -d "${TMPDIR:-/tmp}/nll-parallel.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
eval_nll() { "$BIN/frigg-eval" nll --model "$M" --backend cpu --threads 2 "$@"; }
# varied lengths and prefixes (held-out lines 1-8, their ids renamed), two short ones, the same ids with
# another prefix, and bad lines between them
{
    sed -n 1,4p "$M/heldout.jsonl" | sed -E 's/^\{"id": ([0-9]+),/{"id": "h\1",/'
    echo 'not json'
    echo '{"id":"s1","input_ids":[2,105],"prefix_tokens":1}'
    echo ''
    echo '{"id":"p0","input_ids":[2,105,2364,107],"prefix_tokens":0}'
    sed -n 5,8p "$M/heldout.jsonl" | sed -E 's/^\{"id": ([0-9]+),/{"id": "h\1",/'
    echo '{"id":"uf","input_ids":[2,105,2364,107],"prefix_tokens":2,"temperature":1}'
    echo '{"id":"s2","input_ids":[2,105,2364,107],"prefix_tokens":2}'
    echo '{"id":"s3","input_ids":[2,105,2364,107],"prefix_tokens":3}'
    echo '{"id":"ov","input_ids":[2,105,8192],"prefix_tokens":1}'
    printf '{"id":"lg","input_ids":[2'; i=0; while [ $i -lt 600 ]; do printf ',107'; i=$((i + 1)); done
    echo '],"prefix_tokens":1}'
    echo '{"input_ids":[2,105,783,616,107],"prefix_tokens":4}'
} > "$T/in.jsonl"
good="h0 h1 h2 h3 s1 h4 h5 h6 h7 s2 s3"
eval_nll -P 4 < "$T/in.jsonl" > "$T/p4" 2>"$T/e4"; rc4=$?
eval_nll -P 1 < "$T/in.jsonl" > "$T/p1" 2>"$T/e1"; rc1=$?
[ "$rc4" = 1 ] && [ "$rc1" = 1 ] && ok || no "exit status $rc4 / $rc1, want 1 (bad lines present)"
[ "$(wc -l < "$T/p4")" = 18 ] && ok || no "-P 4 printed $(wc -l < "$T/p4") lines, want 18 (17 answers + summary)"
cmp -s "$T/p4" "$T/p1" && ok || { no "-P 4 and -P 1 differ"; diff "$T/p1" "$T/p4" | head -10; }
order=$(sed -nE 's/.*"id":"([a-z0-9]+)".*/\1/p' "$T/p4" | tr '\n' ' ')
[ "$order" = "h0 h1 h2 h3 s1 p0 h4 h5 h6 h7 uf s2 s3 ov lg " ] && ok || no "answers out of input order: $order"
sed -n 5p "$T/p4" | grep -q '"error":{"message":"invalid JSON","line":5}' && ok || no "the bad JSON line: $(sed -n 5p "$T/p4")"
sed -n 7p "$T/p4" | grep -q '"line":8}.*"id":"p0"' && sed -n 7p "$T/p4" | grep -q 'prefix_tokens must be' && ok ||
    no "prefix 0 is not answered in its place with its line number and id: $(sed -n 7p "$T/p4")"
grep '"id":"uf"' "$T/p4" | grep -q 'unknown field' && ok || no "an unknown field is not an error"
grep '"id":"ov"' "$T/p4" | grep -q 'vocabulary' && ok || no "an id outside the vocabulary is not an error"
grep '"id":"lg"' "$T/p4" | grep -q 'context' && ok || no "a sequence past the context is not a context error"
sed -n 17p "$T/p4" | grep -qE '^\{"nll_sum":[0-9.e+-]+,"target_tokens":1\}$' && ok || no "a line without id: $(sed -n 17p "$T/p4")"
tail -n 1 "$T/p4" | grep -q '"sequences":12,' && ok || no "summary: $(tail -n 1 "$T/p4")"
# each good line alone, in its own process: the same figures
for id in $good; do
    grep "\"id\": \"$id\"\|\"id\":\"$id\"" "$T/in.jsonl" | eval_nll -P 1 2>/dev/null | head -n 1 > "$T/alone"
    grep "\"id\":\"$id\"" "$T/p4" | cmp -s - "$T/alone" && ok || no "$id beside others differs from alone: $(cat "$T/alone")"
done
s2=$(sed -nE 's/.*"nll_sum":([^,]+),.*"id":"s2".*/\1/p' "$T/p4"); s3=$(sed -nE 's/.*"nll_sum":([^,]+),.*"id":"s3".*/\1/p' "$T/p4")
[ -n "$s2" ] && [ "$s2" != "$s3" ] && ok || no "the same ids with another prefix give the same nll ($s2 / $s3)"
# input is read as it comes: with -P 2, two lines are answered before stdin closes
# (the output file exists before the reader blocks on opening the fifo, so the polling below never reads a
# file that is not there yet)
mkfifo "$T/fifo"
: > "$T/stream"
eval_nll -P 2 > "$T/stream" < "$T/fifo" 2>/dev/null &
pid=$!
exec 3>"$T/fifo"
sed -n 1,2p "$M/heldout.jsonl" >&3
i=0; while [ "$(wc -l < "$T/stream")" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(wc -l < "$T/stream")" = 2 ] && ok || no "with stdin still open, $(wc -l < "$T/stream") of 2 lines were answered"
exec 3>&-
wait $pid
[ "$(wc -l < "$T/stream")" = 3 ] && tail -n 1 "$T/stream" | grep -q '"sequences":2,' && ok || no "after stdin closed: $(tail -n 1 "$T/stream")"
"$BIN/frigg-eval" nll --parallel 0 < /dev/null 2>"$T/err"; [ $? = 2 ] && grep -q parallel "$T/err" && ok || no "--parallel 0 accepted"
if [ "${FRIGG_QUICK:-0}" != 1 ]; then
    # the whole held-out set at the default --parallel: the recorded summary, figure for figure
    eval_nll < "$M/heldout.jsonl" > "$T/ho" 2>&1
    want=$(tail -n 1 "$M/frigg-nll.txt" | sed -E 's/.*"sequences"/"sequences"/')
    got=$(tail -n 1 "$T/ho" | sed -E 's/.*"sequences"/"sequences"/')
    [ "$got" = "$want" ] && ok || no "held-out summary $got, recorded $want"
fi
echo "nll-parallel: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
