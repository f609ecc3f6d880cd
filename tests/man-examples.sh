#!/bin/sh
# Every example in every man page runs. The convention the man pages follow:
#   - the examples are the lines of the .EX / .EE blocks of the EXAMPLES section, one shell command a line (a
#     line ending in \\ continues on the next); roff escapes (\-, \\, \e, \(aq, \(dq, \&, fonts) are undone;
#   - a roff comment right before a command says what it needs beyond this repository and a build:
#       .\" example-needs: WHAT     it needs WHAT (a GPU, the network, the DFM-Mimir weights, the oracle's Python
#                                   packages, a running server): not run, a SKIP line names it
#       .\" example-needs-command: CMD (NOTE)   it needs the program CMD: run where CMD is on PATH, else a SKIP
#                                   line says CMD is not installed (NOTE: where to get it)
#       .\" example-exit: N         it must exit with status N (default 0)
#     a comment applies to the one command after it.
# Each command runs with bash -o pipefail in a session of its own (whatever it leaves in the background is
# stopped after it), PATH starting with $FRIGG_BIN, in a scratch folder that links the
# repository's golden/, scripts/, benchmarks/ and tests/ (so relative paths work and written files stay there),
# with /tmp/ in it rewritten to a private folder; stdin is /dev/null. A page without EXAMPLES in .EX blocks
# fails. MAN_PAGES (default man/*.1) picks pages; MAN_EXAMPLE_TIMEOUT (default 600 s) bounds each command.
ROOT=${FRIGG_ROOT:-$(pwd)}
BIN=${FRIGG_BIN:-$ROOT/bin}
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
TIMEOUT=${MAN_EXAMPLE_TIMEOUT:-600}
T=$(mktemp -d "${TMPDIR:-/tmp}/man-examples.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0; skip=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); printf "FAIL: %s\n" "$1"; }
command -v bash >/dev/null || { echo "FAIL: bash is needed to run the examples"; echo "man-examples: 0 passed, 1 failed"; exit 1; }

US=$(printf '\037') # the field separator of extract's records (a tab would merge an empty field away)
# man page -> one record per example: "needs US exit US command" (roff undone, continuations joined)
extract() {
    awk '
    function unroff(s) {
        gsub(/\\f[BIRP]/, "", s); gsub(/\\f\(..?/, "", s); gsub(/\\&/, "", s); gsub(/\\-/, "-", s)
        gsub(/\\\(aq/, "\047", s); gsub(/\\\(dq/, "\"", s); gsub(/\\e/, "\\", s); gsub(/\\\\/, "\\", s)
        return s
    }
    /^\.SH/ { sec = $0; sub(/^\.SH[ \t]*/, "", sec); gsub(/"/, "", sec); inex = 0; next }
    sec != "EXAMPLES" { next }
    /^\.EX/ { inex = 1; blocks++; next }
    /^\.EE/ { inex = 0; next }
    !inex { next }
    /^\.\\" *example-needs:/ { n = $0; sub(/^\.\\" *example-needs: */, "", n); needs = n; next }
    /^\.\\" *example-needs-command:/ { n = $0; sub(/^\.\\" *example-needs-command: */, "", n); needs = "command:" n; next }
    /^\.\\" *example-exit:/ { e = $0; sub(/^\.\\" *example-exit: */, "", e); want = e; next }
    /^\.\\"/ { next }
    {
        line = $0
        cont = line ~ /\\\\$/
        if (cont) sub(/\\\\$/, "", line)
        cmd = cmd (cmd == "" ? "" : " ") unroff(line)
        if (cont) next
        printf "%s\037%s\037%s\n", needs, (want == "" ? 0 : want), cmd
        cmd = ""; needs = ""; want = ""
    }
    END { if (!blocks) print "NOBLOCK" }' "$1"
}

W=$T/work
mkdir -p "$W/tmp"
for d in golden scripts benchmarks tests; do ln -s "$ROOT/$d" "$W/$d"; done
pages=${MAN_PAGES:-$ROOT/man/*.1}
for page in $pages; do
    name=$(basename "$page")
    extract "$page" > "$T/ex"
    if grep -qx NOBLOCK "$T/ex"; then no "$name: no EXAMPLES in .EX/.EE blocks"; continue; fi
    [ -s "$T/ex" ] || { no "$name: its .EX blocks hold no command"; continue; }
    i=0
    while IFS="$US" read -r needs want cmd; do
        i=$((i + 1))
        case $needs in
            command:*) # a program: run where it is installed
                prog=${needs#command:}; prog=${prog%% *}
                if PATH="$BIN:$PATH" command -v "$prog" > /dev/null 2>&1; then needs=""
                else needs="$prog, which is not installed (${needs#command:})"; fi ;;
        esac
        if [ -n "$needs" ]; then
            printf "SKIP man-examples: %s example %s needs %s: %s\n" "$name" "$i" "$needs" "$cmd"
            skip=$((skip + 1))
            continue
        fi
        run=$(printf '%s' "$cmd" | sed "s#/tmp/#$W/tmp/#g")
        t0=$(date +%s)
        # its own session, so that what it leaves running in the background (a server) is stopped after it
        (cd "$W" && PATH="$BIN:$PATH" exec setsid timeout "$TIMEOUT" bash -o pipefail -c "$run" < /dev/null > "$T/out" 2>&1) &
        pid=$!
        wait "$pid"
        rc=$?
        kill -- "-$pid" 2>/dev/null
        if [ "$rc" = "$want" ]; then
            ok
            printf "ok %s example %s (exit %s, %s s): %s\n" "$name" "$i" "$rc" "$(( $(date +%s) - t0 ))" "$cmd"
        else
            no "$name example $i exited $rc, want $want: $cmd"
            tail -n 5 "$T/out" | sed 's/^/    /'
        fi
    done < "$T/ex"
done
echo "man-examples: $pass run, $skip skipped (marked example-needs)"
echo "man-examples: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
