#!/bin/sh
# scripts/bench-replicas on the CPU engine (--replicas 2) and the bundled model: two pairs of runs alternated
# (one, many, one, many), each row tagged with its arm, replica count and rep, the many arm at twice the streams,
# no failed request, each pair's ratio and their mean in summary.txt (recomputed here from the rows), every server
# stopped after its run; results never overwritten; a server that cannot start and every bad option an error.
BIN=${FRIGG_BIN:-bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/bench-replicas.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
BR=scripts/bench-replicas
# the model under a path of this test's own, so that its servers can be told from other tests' in ps
ln -s "$(pwd)/golden/default" "$T/m"
export FRIGG_BIN="$BIN"
$BR --replicas 2 --threads 2 --streams 1 --duration-s 2 --reps 2 --prompt-tokens 16 --max-tokens 8 "$T/m" "$T/o" > "$T/out" 2> "$T/err"
rc=$?
[ $rc = 0 ] && ok || no "exit status $rc: $(tail -n 3 "$T/err")"
[ "$(wc -l < "$T/o/load.jsonl")" = 4 ] && ok || no "load.jsonl has $(wc -l < "$T/o/load.jsonl") rows, want 4"
tags=$(sed -E 's/^\{"arm":"([a-z]+)","replicas":([0-9]+),"rep":([0-9]+),"bench":"load",.*"streams":([0-9]+),.*/\1 \2 \3 \4/' "$T/o/load.jsonl" | tr '\n' ';')
[ "$tags" = "one 1 1 1;many 2 1 2;one 1 2 1;many 2 2 2;" ] && ok || no "rows (arm replicas rep streams): $tags"
[ "$(grep -c '"failed":0,' "$T/o/load.jsonl")" = 4 ] && ok || no "a run had failed requests"
# the ratios from the rows, as the summary should have them
want=$(sed -n 's/.*"tok_s":\([0-9.]*\).*/\1/p' "$T/o/load.jsonl" | tr '\n' ' ' |
    awk '{ r1 = sprintf("%.3f", $2 / $1); r2 = sprintf("%.3f", $4 / $3)
           # the mean as the script takes it: the printed ratios summed through "%.6f", then divided (1.519 and
           # 1.400 sum to 2.919 that way, 2.9189999... as doubles: 1.460 against 1.459)
           s = sprintf("%.6f", sprintf("%.6f", 0 + r1) + r2); printf "%.3fx %.3fx %.3fx", r1, r2, s / 2 }')
got=$(sed -n 's/.*ratio \([0-9.]*x\)$/\1/p; s/^mean ratio of 2 replicas to one: \([0-9.]*x\) over 2 pair(s)$/\1/p' "$T/o/summary.txt" | tr '\n' ' ')
[ "$got" = "$want " ] && ok || no "summary ratios '$got', from the rows '$want'"
cmp -s "$T/out" "$T/o/summary.txt" && ok || no "stdout is not summary.txt"
[ "$(grep -c 'frigg-bench load --url http://127.0.0.1:[0-9]* --streams [12] --duration-s 2' "$T/o/COMMANDS.md")" = 4 ] &&
    grep -q -- '--backend cpu --replicas 2 --threads 2' "$T/o/COMMANDS.md" && ok || no "COMMANDS.md: $(cat "$T/o/COMMANDS.md")"
for f in one-1 many-1 one-2 many-2; do
    grep -q 'frigg-serve: ready' "$T/o/serve-$f.log" && ok || no "serve-$f.log: $(tail -n 2 "$T/o/serve-$f.log")"
done
grep -q 'ready: .* 2 replica(s)' "$T/o/serve-many-1.log" && ok || no "the many arm's server does not say 2 replicas"
ps -eo args | grep -v grep | grep -q "frigg-serve --model $T/m" && no "a server is still running" || ok
# never overwritten
$BR --replicas 2 --duration-s 1 --reps 1 "$T/m" "$T/o" > /dev/null 2> "$T/err2"
[ $? = 1 ] && grep -q 'not overwritten' "$T/err2" && ok || no "an existing load.jsonl was not refused: $(cat "$T/err2")"
# a server that cannot start: an error naming it, no hang
$BR --replicas 2 --duration-s 1 --reps 1 --ready-s 60 --serve-args '--slots 0' "$T/m" "$T/bad" > /dev/null 2> "$T/err3"
[ $? = 1 ] && grep -q 'exited before it was ready' "$T/err3" && ok || no "a failing server: $(cat "$T/err3")"
# usage errors
for a in "--devices 0" "--devices 0,,1" "--devices a,b" "--threads 2" "--streams 0" "--reps x" "--frobnicate 1" "--streams"; do
    # shellcheck disable=SC2086
    $BR $a "$T/m" "$T/u" > /dev/null 2> "$T/err4"
    [ $? = 2 ] && [ -s "$T/err4" ] && [ ! -e "$T/u" ] && ok || no "'$a' is not a usage error: $(cat "$T/err4")"
done
$BR --replicas 2 "$T/nomodel" "$T/u" > /dev/null 2>&1; [ $? = 2 ] && ok || no "a missing model is not a usage error"
echo "bench-replicas: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
