#!/bin/sh
# frigg-run and frigg-eval nll answer each line as soon as it is done, not when the next line (or the end of the
# input) arrives: a client writes one request into a pipe, waits for its answer (with a timeout), and only then
# writes the next, the way an interactive caller or a program driving frigg-run as a coprocess does. Checked at
# frigg-run's default --parallel (8), with --parallel 1, with --unordered, and for frigg-eval nll (default
# --parallel 4). The reading of stdin must not hold up the scheduler, whatever --parallel is.
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
M=$ROOT/golden/default
T=$(mktemp -d "${TMPDIR:-/tmp}/run-stream.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
WAIT_S=${FRIGG_STREAM_WAIT_S:-30}

lines_of() { if [ -f "$1" ]; then wc -l < "$1" | tr -d ' '; else echo 0; fi; }
# wait_for FILE N: until FILE has N lines, at most WAIT_S seconds; 0 when it got there
wait_for() {
    i=0
    while [ "$(lines_of "$1")" -lt "$2" ]; do
        i=$((i + 1))
        [ "$i" -gt $((WAIT_S * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}

# stream NAME RC LINE1 LINE2 COMMAND...: COMMAND reads a pipe; LINE1 goes in, its answer must come out while
# the pipe is still open, then LINE2, then the end of input; COMMAND must exit with RC
stream() {
    name=$1; want=$2; l1=$3; l2=$4; shift 4
    rm -f "$T/in" "$T/out"
    mkfifo "$T/in"
    "$@" < "$T/in" > "$T/out" 2> "$T/err" &
    pid=$!
    exec 3> "$T/in"
    printf '%s\n' "$l1" >&3
    if wait_for "$T/out" 1; then ok; else no "$name: no answer to the first line within ${WAIT_S} s while the input stays open: $(cat "$T/err")"; fi
    printf '%s\n' "$l2" >&3
    if wait_for "$T/out" 2; then ok; else no "$name: no answer to the second line within ${WAIT_S} s: $(cat "$T/err")"; fi
    exec 3>&-
    wait "$pid"; rc=$?
    pid=""
    [ "$rc" = "$want" ] && ok || no "$name: exit $rc, want $want: $(cat "$T/err")"
}

R1='{"prompt":"Hej","max_tokens":2,"id":"a"}'
R2='{"prompt":"Farvel","max_tokens":2,"id":"b"}'
RUN="$BIN/frigg-run --model $M -b cpu -t 2"
stream "frigg-run" 0 "$R1" "$R2" $RUN
sed -n 1p "$T/out" | grep -q '"id":"a".*"output_ids"' && sed -n 2p "$T/out" | grep -q '"id":"b".*"output_ids"' && ok ||
    no "frigg-run: the answers: $(cat "$T/out")"
stream "frigg-run --parallel 1" 0 "$R1" "$R2" $RUN --parallel 1
stream "frigg-run --unordered" 0 "$R1" "$R2" $RUN --unordered
sed -n 1p "$T/out" | grep -q '"id":"a".*"line":1' && ok || no "frigg-run --unordered: $(cat "$T/out")"
# a bad line is answered at once too (exit status 1, as for any bad line), and the one after it all the same
printf '%s\n' '{"prompt":' > "$T/bad"
stream "frigg-run, a bad line first" 1 "$(cat "$T/bad")" "$R2" $RUN
sed -n 1p "$T/out" | grep -q '"error":{"message":"invalid JSON' && ok || no "frigg-run, a bad line: $(cat "$T/out")"

N1=$(sed -n 1p "$M/heldout.jsonl")
N2=$(sed -n 2p "$M/heldout.jsonl")
stream "frigg-eval nll" 0 "$N1" "$N2" "$BIN/frigg-eval" nll --model "$M" -b cpu -t 2
sed -n 1p "$T/out" | grep -q '"nll_sum"' && sed -n 3p "$T/out" | grep -q '"summary".*"sequences":2' && ok ||
    no "frigg-eval nll: $(cat "$T/out")"

echo "run-stream: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
