#!/bin/sh
# Every command of README.md's ```sh (bash, shell, console) code blocks runs, on the CPU engine and the bundled
# model, and says what the README says it says. How a block is read:
#   - one shell command a line; a line ending in \ or leaving a quote open (bash -n says so) goes on; lines that
#     are only a comment are notes on the command before them; in a ```console block, "$ " starts a command;
#   - a block is one bash script, its commands one after another (so `cmd &`, `%1` and files written by an
#     earlier block work), in a scratch folder that links the repository's golden/, scripts/, benchmarks/,
#     tests/, man/ and bin/ (-> $FRIGG_BIN), with /tmp/ rewritten to a private folder; a block whose server
#     is started in the background (`frigg-serve --port N &`) gets a free port for N; stdin is /dev/null;
#     CUDA_VISIBLE_DEVICES is empty, so "cuda when a GPU is present" defaults pick the CPU engine;
#   - a command passes when it exits 0 (1 to 125 when its comment says it must fail: "must fail", "fail(s),
#     as they must"), a foreground command that runs a program of bin/ or curl prints something, every stdout
#     line starting with { is JSON (where python3 is found) and none is {"error"...} (unless it must fail), and
#     every piece of a comment that elides with "..." (as `# {"summary":{..."nll_mean":5.3031...}}` does) is
#     found in its output, stdout and stderr;
#   - not run, a SKIP line says why: `make` (make check runs this test; make demo installs packages and builds
#     in the clone), a GPU (a comment "on a GPU", --backend cuda, --random-mimir ...), "needs PATH" where PATH
#     is missing or empty (../shared/ is $FRIGG_SHARED), other "needs WHAT" comments, the network (a URL not on
#     localhost, apt-get, pip, git clone, wget), a server in the foreground, a localhost URL with no server
#     started before it in its block, curl when it is not installed.
# Each block is stopped after README_TIMEOUT (default 60) seconds, and whatever it left running is stopped after
# it (it runs in a session of its own). README (default $FRIGG_ROOT/README.md) picks the file.
ROOT=${FRIGG_ROOT:-$(pwd)}
BIN=${FRIGG_BIN:-$ROOT/bin}
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
SHARED=${FRIGG_SHARED:-$(cd "$ROOT/.." && pwd)/shared}
export FRIGG_SHARED="$SHARED"
README=${README:-$ROOT/README.md}
TIMEOUT=${README_TIMEOUT:-60}
NAME=$(basename "$README")
T=$(mktemp -d "${TMPDIR:-/tmp}/readme.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0; skip=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); printf "FAIL: %s\n" "$1"; }
summary() {
    echo "readme: $pass run, $skip skipped"
    echo "readme: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
}
command -v bash >/dev/null || { no "bash is needed to run the README's commands"; summary; }
[ -f "$README" ] || { no "no $README"; summary; }
[ -x "$BIN/frigg-run" ] || { no "no $BIN/frigg-run: build first (FRIGG_BIN)"; summary; }
have_py=""
python3 -c 'import json' 2>/dev/null && have_py=1

US=$(printf '\037') # the field separator of the block files
# README -> $T/blk.N, one per code block of a shell language: "LINE US text" a line ($ prompts undone, a
# console block's other lines made comments); "UNCLOSED LINE" when a fence is never closed
awk -v dir="$T" '
    /^[ \t]*```/ {
        if (inb) { inb = 0; close(f); next }
        lang = $0; sub(/^[ \t]*```[ \t]*/, "", lang); sub(/[ \t].*$/, "", lang)
        if (lang ~ /^(sh|bash|shell|console)$/) { inb = 1; con = (lang == "console"); n++; f = dir "/blk." n; start = NR; printf "" > f }
        else { inb = 2; f = "/dev/null" }
        next
    }
    inb == 1 {
        line = $0
        if (con) { if (line ~ /^[ \t]*\$ /) sub(/^[ \t]*\$ /, "", line); else line = "# " line }
        printf "%d\037%s\n", NR, line > f
    }
    END { if (inb == 1) print "UNCLOSED " start; print "BLOCKS " n }' "$README" > "$T/blocks"
nblocks=$(sed -n 's/^BLOCKS //p' "$T/blocks"); nblocks=${nblocks:-0}
u=$(sed -n 's/^UNCLOSED //p' "$T/blocks")
[ -n "$u" ] && no "$NAME:$u: a code block that is never closed"
[ "$nblocks" -gt 0 ] || { no "$NAME holds no \`\`\`sh code block"; summary; }

# a command's text -> "C code" and "H comment" lines (a # that starts a word outside quotes starts a comment)
split_comments() {
    awk '{
        s = $0; code = ""; hint = ""; prev = " "
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (q == "\047") { if (c == "\047") q = ""; prev = c; continue }
            if (c == "\\") { i++; prev = "x"; continue }
            if (q == "\"") { if (c == "\"") q = ""; prev = c; continue }
            if (c == "\047" || c == "\"") { q = c; prev = c; continue }
            if (c == "#" && prev ~ /[ \t;&|()]/) { hint = substr(s, i + 1); s = substr(s, 1, i - 1); break }
            prev = c
        }
        print "C" s
        if (hint != "") { sub(/^[ \t]+/, "", hint); sub(/[ \t]+$/, "", hint); print "H" hint }
    }' "$1"
}

W=$T/work
mkdir -p "$W/tmp"
for d in golden scripts benchmarks tests man; do ln -s "$ROOT/$d" "$W/$d"; done
ln -s "$BIN" "$W/bin"
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + $$ % 20000))
}
one_line() { printf '%s' "$(head -n 1 "$1" | sed 's/[[:space:]]*$//')"; [ "$(wc -l < "$1")" -gt 1 ] && printf ' ...'; }

k=0   # commands, over all blocks: $T/c.K its text, $T/h.K its notes, $T/l.K its line
b=0
while [ "$b" -lt "$nblocks" ]; do
    b=$((b + 1))
    first=$((k + 1))
    # ---- the block's commands
    acc=""; start=""
    while IFS="$US" read -r ln text; do
        if [ -z "$acc" ]; then
            stripped=$(printf '%s' "$text" | sed 's/^[[:space:]]*//')
            case $stripped in
                '') continue ;;
                '#'*) [ "$k" -ge "$first" ] && printf '%s\n' "$stripped" | sed 's/^#[[:space:]]*//' >> "$T/h.$k"; continue ;;
            esac
            start=$ln; acc=$text
        else
            acc="$acc
$text"
        fi
        case $text in *\\) continue ;; esac
        bash -n -c "$acc" 2>/dev/null || continue
        k=$((k + 1))
        printf '%s\n' "$acc" > "$T/c.$k"; echo "$start" > "$T/l.$k"; : > "$T/h.$k"
        acc=""
    done < "$T/blk.$b"
    [ -n "$acc" ] && no "$NAME:$start: a command that never ends (an open quote or block): $(printf '%s' "$acc" | head -n 1)"
    last=$k

    # ---- what each needs: $T/s.K (the SKIP reason) or a line of the block's script
    server=""; port=""; newport=""
    : > "$T/script"
    echo 'set -o pipefail' >> "$T/script"
    i=$first
    while [ "$i" -le "$last" ]; do
        split_comments "$T/c.$i" > "$T/split"
        sed -n 's/^C//p' "$T/split" > "$T/code.$i"
        sed -n 's/^H//p' "$T/split" >> "$T/h.$i"
        code=$(cat "$T/code.$i"); hints=$(cat "$T/h.$i")
        trimmed=$(printf '%s' "$code" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | tr '\n' ' ')
        bg=""; case $trimmed in *'&') case $trimmed in *'&&') ;; *) bg=1 ;; esac ;; esac
        need=$(printf '%s\n' "$hints" | sed -n 's/.*needs \([^ ,;)]*\).*/\1/p' | head -n 1)
        needpath=""
        case $need in */*) needpath=$(printf '%s' "$need" | sed "s#^\.\./shared/#$SHARED/#; s#^\.\./shared\$#$SHARED#") ;; esac
        why=""
        case $trimmed in
            'make check'*) why="make check runs every test, this one among them" ;;
            make | make\ *) why="it builds in the clone and installs missing packages (scripts/install-deps: root, the network)" ;;
        esac
        if [ -z "$why" ]; then
            if printf '%s\n' "$hints" | grep -qiE 'on a gpu|needs a gpu|a gpu host' ||
               printf '%s\n' "$code" | grep -qE -- '--backend[ =]cuda|--device[ =]cuda|--devices[ =]|--random-mimir|nvidia-smi|nvcc'; then
                why="needs a GPU"
            elif [ -n "$needpath" ]; then
                if [ ! -e "$needpath" ] || { [ -d "$needpath" ] && [ -z "$(ls -A "$needpath" 2>/dev/null)" ]; }; then
                    why="needs $needpath (missing or empty)"
                fi
            elif printf '%s\n' "$hints" | grep -q 'needs '; then
                why=$(printf '%s\n' "$hints" | sed -n 's/.*\(needs .*\)/\1/p' | head -n 1)
            fi
        fi
        if [ -z "$why" ]; then
            if printf '%s\n' "$code" | grep -E 'https?://' | grep -vqE 'https?://(localhost|127\.0\.0\.1)([:/]|$)' ||
               printf '%s\n' "$code" | grep -qE '(^|[ ;&|(])(apt-get|apt|pip|pip3|wget)[ ]|git clone'; then
                why="needs the network"
            elif printf '%s\n' "$code" | grep -q 'frigg-serve' && [ -z "$bg" ]; then
                why="a server in the foreground runs until it is stopped"
            elif printf '%s\n' "$code" | grep -qE '(localhost|127\.0\.0\.1):[0-9]' && [ -z "$server" ]; then
                why="needs a running server (none is started before it in its block)"
            elif printf '%s\n' "$code" | grep -qE '(^|[ ;&|(])curl[ ]' && ! command -v curl > /dev/null; then
                why="needs curl (not installed)"
            fi
        fi
        if [ -n "$why" ]; then
            printf '%s\n' "$why" > "$T/s.$i"
        else
            if printf '%s\n' "$code" | grep -q 'frigg-serve' && [ -n "$bg" ]; then
                server=1
                port=$(printf '%s\n' "$code" | sed -n 's/.*--port[ =]\([0-9][0-9]*\).*/\1/p' | head -n 1)
                [ -n "$port" ] && [ "$port" != 0 ] && newport=$(free_port)
            fi
            [ -n "$bg" ] && : > "$T/bg.$i"
        fi
        i=$((i + 1))
    done
    i=$first
    while [ "$i" -le "$last" ]; do
        if [ ! -f "$T/s.$i" ]; then
            echo 't0=$(date +%s)'
            echo '{'
            if [ -n "$newport" ]; then
                sed -E "s#/tmp/#$W/tmp/#g; s/(--port[ =]|:)$port([^0-9]|\$)/\1$newport\2/g" "$T/c.$i"
            else
                sed "s#/tmp/#$W/tmp/#g" "$T/c.$i"
            fi
            printf "} > '%s' 2> '%s' < /dev/null; echo \"\$? \$t0 \$(date +%%s)\" > '%s'\n" \
                "$T/o.$i" "$T/e.$i" "$T/rc.$i"
        fi
        i=$((i + 1))
    done >> "$T/script"

    brc=0
    # ---- run it: its own session, so that what it leaves running in the background (a server) is stopped
    if [ "$(wc -l < "$T/script")" -gt 1 ]; then
        (cd "$W" && CUDA_VISIBLE_DEVICES='' FRIGG_MODEL='' no_proxy=localhost,127.0.0.1 NO_PROXY=localhost,127.0.0.1 \
            PATH="$BIN:$PATH" exec setsid timeout "$TIMEOUT" bash "$T/script" < /dev/null > "$T/block.out" 2>&1) &
        pid=$!
        wait "$pid"
        brc=$?
        kill -- "-$pid" 2>/dev/null
    fi

    # ---- the checks
    bg_shown=""
    bg_said() {  # at a block's first failure: what its background commands (a server) printed
        [ -n "$bg_shown" ] && return; bg_shown=1
        j=$first
        while [ "$j" -le "$last" ]; do
            if [ -f "$T/bg.$j" ] && { [ -s "$T/e.$j" ] || [ -s "$T/o.$j" ]; }; then
                echo "    what $NAME:$(cat "$T/l.$j") ($(one_line "$T/c.$j")) printed:"
                cat "$T/o.$j" "$T/e.$j" | tail -n 5 | sed 's/^/        /'
            fi
            j=$((j + 1))
        done
    }
    i=$first
    while [ "$i" -le "$last" ]; do
        where="$NAME:$(cat "$T/l.$i")"; shown=$(one_line "$T/c.$i")
        if [ -f "$T/s.$i" ]; then
            printf "SKIP readme: %s: %s: %s\n" "$where" "$(cat "$T/s.$i")" "$shown"
            skip=$((skip + 1)); i=$((i + 1)); continue
        fi
        if [ ! -f "$T/rc.$i" ]; then
            if [ "$brc" = 124 ]; then why="its block was stopped after $TIMEOUT s (README_TIMEOUT)"
            else why="its block exited $brc before it"; fi
            no "$where did not finish: $why: $shown"
            cat "$T/block.out" "$T/o.$i" "$T/e.$i" 2>/dev/null | tail -n 5 | sed 's/^/    /'
            bg_said
            i=$((i + 1)); continue
        fi
        read -r rc t0 t1 < "$T/rc.$i"
        cat "$T/o.$i" "$T/e.$i" > "$T/all" 2>/dev/null
        must_fail=""
        grep -qiE 'must fail|fails?,? as (it|they) must' "$T/h.$i" && must_fail=1
        bad=""
        if [ -n "$must_fail" ]; then
            [ "$rc" -ge 1 ] && [ "$rc" -le 125 ] || bad="exited $rc, want 1 to 125 (it must fail)"
        else
            [ "$rc" = 0 ] || bad="exited $rc, want 0"
        fi
        if [ -z "$bad" ] && [ ! -f "$T/bg.$i" ]; then
            if grep -qE '(^|[ ;&|(/])(bin/frigg-[a-z]+|curl)([ ]|$)' "$T/code.$i" && [ ! -s "$T/all" ]; then
                bad="printed nothing"
            elif [ -z "$must_fail" ] && grep -q '^{"error"' "$T/o.$i"; then
                bad="answered an error: $(grep -m 1 '^{"error"' "$T/o.$i" | cut -c1-200)"
            elif [ -n "$have_py" ] && ! python3 -c '
import json, sys
for n, line in enumerate(open(sys.argv[1], encoding="utf-8", errors="replace"), 1):
    if line.startswith("{"):
        try: json.loads(line)
        except ValueError as e: sys.exit("stdout line %d is not JSON: %s" % (n, e))' "$T/o.$i" 2> "$T/json"; then
                bad=$(tail -n 1 "$T/json")
            fi
        fi
        if [ -z "$bad" ]; then
            # the pieces of a "..." comment: each in its output
            grep -F '...' "$T/h.$i" | awk '{ n = split($0, p, /\.\.\./); for (j = 1; j <= n; j++) {
                s = p[j]; sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); if (s != "") print s } }' > "$T/want"
            while IFS= read -r piece; do
                grep -qF -- "$piece" "$T/all" || { bad="its output lacks \"$piece\" (its comment in $NAME)"; break; }
            done < "$T/want"
        fi
        if [ -z "$bad" ]; then
            ok
            printf "ok %s (exit %s, %s s): %s\n" "$where" "$rc" "$((t1 - t0))" "$shown"
        else
            no "$where $bad: $shown"
            tail -n 5 "$T/all" | sed 's/^/    /'
            bg_said
        fi
        i=$((i + 1))
    done
done
[ "$k" -gt 0 ] || no "$NAME's code blocks hold no command"
[ "$pass" -gt 0 ] || no "none of $NAME's commands ran"
# The README is for users and stays short; the measurements' stories go to benchmarks/PERFORMANCE.md.
n=$(wc -l < "$README")
if [ "$n" -le "${README_MAX_LINES:-250}" ]; then ok; else no "$NAME has $n lines, more than ${README_MAX_LINES:-250}"; fi
summary
