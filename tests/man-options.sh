#!/bin/sh
# Every program's --help and its man page name the same options: each long option --help prints is an option the
# man page's OPTIONS (or, for frigg-bench, LOAD) section defines in a .TP tag, and each option such a tag defines is
# in --help; a short form --help pairs with a long one ("-m, --model") is in the man page's tag for it; a short
# form only the man page gives must be one the program accepts (getopt does not call it invalid); every man page
# defines -h, --help and --version, and both exit 0 (--help need not list itself).
ROOT=${FRIGG_ROOT:-$(pwd)}
BIN=${FRIGG_BIN:-$ROOT/bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/man-options.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
for page in "$ROOT"/man/*.1; do
    prog=$(basename "$page" .1)
    if [ ! -x "$BIN/$prog" ]; then
        echo "FAIL: $BIN/$prog is not built (man/$prog.1 has no program)"; fail=$((fail + 1)); continue
    fi
    "$BIN/$prog" --help > "$T/help" 2>&1; rc=$?
    "$BIN/$prog" --version > /dev/null 2>&1; rv=$?
    python3 - "$prog" "$page" "$T/help" "$rc" "$rv" "$BIN/$prog" <<'PY' > "$T/res"
import re, subprocess, sys
prog, page, helpf, rc, rv, exe = sys.argv[1:]
LONG = r'(?<![\w-])--[a-z0-9][a-z0-9-]*'
help_text = open(helpf).read()
bad = []
if rc != "0": bad.append("--help exits %s" % rc)
if rv != "0": bad.append("--version exits %s" % rv)
help_long = set(re.findall(LONG, help_text)) - {"--help", "--version"}
help_pairs = set(re.findall(r'(?<![\w-])(-[a-zA-Z]), (' + LONG[len(r'(?<![\w-])'):] + ')', help_text))
man = open(page).read().replace('\\-', '-')
lines = man.split('\n')
tags, sec = [], None
for i, l in enumerate(lines):
    if l.startswith('.SH'):
        sec = l[3:].strip().strip('"')
    elif l.startswith('.TP') and i + 1 < len(lines) and sec in ('OPTIONS', 'LOAD'):
        tags.append(re.sub(r'\\f[BIRP]|"', '', lines[i + 1]))
man_long = set(o for t in tags for o in re.findall(LONG, t))
for o in sorted(help_long - man_long):
    bad.append("%s is in --help but no .TP tag of %s defines it" % (o, page.split('/')[-1]))
for o in sorted(man_long - help_long - {"--help", "--version"}):
    bad.append("%s is defined in the man page but not in --help" % o)
for need in ("--help", "--version"):
    if need not in man_long: bad.append("the man page does not define %s" % need)
if not any(re.search(r'(?<![\w-])-h\b', t) for t in tags if '--help' in t): bad.append("the man page does not give -h")
for s, l in sorted(help_pairs):
    if not any(re.search(r'(?<![\w-])' + s + r'\b', t) and re.search(r'(?<![\w-])' + l + r'(?![\w-])', t) for t in tags):
        bad.append("--help gives %s, %s; the man page's tag for %s lacks %s" % (s, l, l, s))
help_shorts = set(s for s, _ in help_pairs)
for t in tags:
    for s in re.findall(r'(?<![\w-])(-[a-zA-Z])\b', t):
        if s in help_shorts or s == '-h': continue
        r = subprocess.run([exe, s], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if 'invalid option' in r.stderr or 'unrecognized option' in r.stderr:
            bad.append("the man page gives %s, which %s refuses" % (s, prog))
        else:
            print("note: %s: %s is accepted and in the man page, but --help does not show it" % (prog, s))
for b in bad: print("FAIL: %s: %s" % (prog, b))
print("checked %s: %d long options in --help, %d in the man page" % (prog, len(help_long), len(man_long)))
PY
    cat "$T/res"
    f=$(grep -c '^FAIL' "$T/res")
    if [ "$f" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + f)); fi
done
echo "man-options: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
