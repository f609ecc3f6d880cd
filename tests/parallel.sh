#!/bin/sh
# frigg-run --parallel: the same input file through --parallel 8 and --parallel 1 prints the same lines,
# in input order, request for request (the "timing" object, which is measured, left out); a bad line keeps
# its place; --unordered prints every response once, each with its input line number; --stats' line counts what
# the responses say. The bundled model, CPU engine.
BIN=${FRIGG_BIN:-bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/parallel.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
cat > "$T/in.jsonl" <<'JSONL'
{"id":"a","prompt":"<bos>Der var engang","max_tokens":20}
{"id":"b","prompt":"<bos>Der var engang","max_tokens":12,"temperature":0.9,"seed":4}
{"id":"c","messages":[{"role":"user","content":"Hej"}],"max_tokens":16,"top_k":5,"temperature":1.1,"seed":1}
not json

{"id":"d","prompt":"<bos>The","max_tokens":30,"stop":["."]}
{"id":"e","prompt":"<bos>Han","max_tokens":6,"logprobs":2}
{"id":"f","prompt":"<bos>","max_tokens":5000}
{"id":"g","prompt":"<bos>Det var","max_tokens":3,"repetition_penalty":1.2}
{"id":"h","input_ids":[2,105,2364],"prefix_tokens":1,"max_tokens":9}
JSONL
strip() { sed -E 's/,"timing":\{[^}]*\}//'; }
"$BIN/frigg-run" -b cpu -t 2 --parallel 8 < "$T/in.jsonl" > "$T/p8" 2>"$T/e8"; rc8=$?
"$BIN/frigg-run" -b cpu -t 2 --parallel 1 < "$T/in.jsonl" > "$T/p1" 2>"$T/e1"; rc1=$?
strip < "$T/p8" > "$T/s8"
strip < "$T/p1" > "$T/s1"
[ "$rc8" = 1 ] && [ "$rc1" = 1 ] && ok || no "exit status $rc8 / $rc1, want 1 (bad lines present)"
[ "$(wc -l < "$T/p8")" = 9 ] && ok || no "--parallel 8 printed $(wc -l < "$T/p8") lines, want 9"
cmp -s "$T/s8" "$T/s1" && ok || { no "--parallel 8 and --parallel 1 differ"; diff "$T/s1" "$T/s8" | head -10; }
order=$(sed -nE 's/.*"id":"([a-h])".*/\1/p' "$T/p8" | tr -d '\n')
[ "$order" = "abcdefgh" ] && ok || no "responses out of input order: $order"
sed -n 4p "$T/p8" | grep -q '"line":4' && sed -n 4p "$T/p8" | grep -q 'invalid JSON' && ok || no "the bad line is not answered in its place: $(sed -n 4p "$T/p8")"
grep '"id":"f"' "$T/p8" | grep -q 'context' && ok || no "the over-long request is not a context error"
grep -c '"timing"' "$T/p8" | grep -qx 7 && ok || no "not every good response has its timing"
"$BIN/frigg-run" -b cpu -t 2 --parallel 4 --unordered < "$T/in.jsonl" > "$T/pu" 2>/dev/null
[ "$(wc -l < "$T/pu")" = 9 ] && ok || no "--unordered printed $(wc -l < "$T/pu") lines, want 9"
lines=$(sed -nE 's/.*"line":([0-9]+).*/\1/p' "$T/pu" | sort -n | tr '\n' ' ')
[ "$lines" = "1 2 3 4 6 7 8 9 10 " ] && ok || no "--unordered line numbers: $lines"
strip < "$T/pu" | sed -E 's/,"line":[0-9]+//' | sort > "$T/su"
sed -E 's/,"line":[0-9]+//' "$T/s1" | sed -E 's/"line":[0-9]+,?//' | sort > "$T/s1s"
sed -E 's/"line":[0-9]+,?//' "$T/su" | sort > "$T/sus"
cmp -s "$T/s1s" "$T/sus" && ok || { no "--unordered responses differ from the ordered ones"; diff "$T/s1s" "$T/sus" | head -6; }
"$BIN/frigg-run" --parallel 0 < /dev/null 2>"$T/err"; [ $? = 2 ] && grep -q parallel "$T/err" && ok || no "--parallel 0 accepted"
# --stats: one line on stderr whose counts are the responses' own (their usage summed), none without it
[ -s "$T/e8" ] && no "stderr without --stats: $(head -2 "$T/e8")" || ok
"$BIN/frigg-run" -b cpu -t 2 --parallel 8 --stats < "$T/in.jsonl" > "$T/ps" 2>"$T/es"
sum() { sed -nE "s/.*\"$1\":([0-9]+).*/\1/p" "$T/ps" | awk '{s += $1} END {print s + 0}'; }
want="frigg-run: stats: 9 responses (2 of them errors), $(sum prompt_tokens) prompt and $(sum completion_tokens) generated tokens in "
[ "$(wc -l < "$T/es")" = 1 ] && grep -qF "$want" "$T/es" && grep -qE 'generated tok/s$' "$T/es" && ok ||
    no "--stats line: $(cat "$T/es"), want it to start: $want"
[ "$(sum completion_tokens)" -gt 0 ] && ok || no "no completion_tokens in the responses"
"$BIN/frigg-run" --stats --tokenize < /dev/null 2>"$T/err"; [ $? = 2 ] && grep -q stats "$T/err" && ok || no "--stats with --tokenize accepted"
echo "parallel: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
