#!/bin/sh
# scripts/gpu-ab on the CPU engine with prebuilt programs (--base-bin, --new-bin): frigg-bench decode on the bundled
# model, 2 reps, the arms alternated new base base new, every row of results.jsonl tagged with its arm, rep, cell
# and command, summary.txt's new/base ratio the one recomputed here from the rows, COMMANDS.md naming the
# invocation and the command. The arm's bin directory on PATH and in {bin}; a row key the harness uses itself kept
# as row_KEY; a failing cell (exit 1, the rest still run), a cell past --cell-timeout-s, cells past --deadline-s
# (exit 3, recorded as not run); --cooldown-c with a fake nvidia-smi (a GPU at 100 C cooling 10 C per reading) waits
# and records the readings; results never overwritten; --dry-run writes nothing. The source arms where git history
# is here: --base REV and --new-src TARBALL (a git archive --prefix | xz) extracted and made (a no-op make target).
# Errors: a bad --base revision, --cooldown-c without nvidia-smi or with one that reads no temperature, conflicting
# arms, no command, bad numbers.
BIN=${FRIGG_BIN:-bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/gpu-ab.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $*"; }
GA=scripts/gpu-ab
if [ ! -x "$BIN/frigg-bench" ]; then  # not built by the caller: a CPU-only frigg-bench of this tree's own
    BIN=$T/build/bin
    make FRIGG_CUDA=0 BUILD="$T/build" BIN="$BIN" -j2 "$BIN/frigg-bench" > "$T/make.log" 2>&1 ||
        { no "make frigg-bench: $(tail -n 5 "$T/make.log")"; echo "gpu-ab: $pass passed, $fail failed"; exit 1; }
fi
BIN=$(cd "$BIN" && pwd)
CMD='frigg-bench --backend cpu --model golden/default --batch 1 --ctx 64 --steps 4 --repeats 3 decode'

# ---- the A/B: one command, 2 reps, both arms the same programs
$GA --base-bin "$BIN" --new-bin "$BIN" --cooldown-c 0 --reps 2 --cmd "$CMD" --out "$T/o" > "$T/out" 2> "$T/err"
rc=$?
[ $rc = 0 ] && ok || no "exit status $rc: $(tail -n 5 "$T/err")"
python3 - "$T/o" "$CMD" <<'PY' > "$T/check" 2>&1
import json, statistics, sys, re
out, cmd = sys.argv[1:]
bad = []
def want(c, what):
    if not c: bad.append(what)
rows = [json.loads(l) for l in open(f"{out}/results.jsonl")]
want(len(rows) == 4, f"{len(rows)} rows, want 4")
order = [(r.get("arm"), r.get("rep"), r.get("cell"), r.get("cmd")) for r in rows]
want(order == [("new", 1, 1, 1), ("base", 1, 2, 1), ("base", 2, 3, 1), ("new", 2, 4, 1)], f"arm/rep/cell/cmd {order}")
for r in rows:
    want(list(r)[:4] == ["arm", "rep", "cell", "cmd"], f"row {r.get('cell')}: the tags do not lead: {list(r)[:5]}")
    want(r.get("bench") == "decode" and r.get("tok_s", 0) > 0 and r.get("batch") == 1 and r.get("ctx") == 64,
         f"row {r.get('cell')}: not frigg-bench's decode row: {r}")
    want(r.get("cmd_text") == cmd and r.get("exit") == 0 and r.get("wall_s", -1) > 0, f"row {r.get('cell')}: cmd_text/exit/wall_s")
    for k in ("gpu_name", "gpu_sm_mhz_before", "gpu_mem_mhz_before", "gpu_temp_c_before", "gpu_sm_mhz_after",
              "gpu_mem_mhz_after", "gpu_temp_c_after", "cooled_s"):
        want(k in r, f"row {r.get('cell')}: no {k}")
cells = [json.loads(l) for l in open(f"{out}/cells.jsonl")]
want([(c["arm"], c["rep"], c["ran"], c["status"], c["rows"]) for c in cells] ==
     [("new", 1, True, "ok", 1), ("base", 1, True, "ok", 1), ("base", 2, True, "ok", 1), ("new", 2, True, "ok", 1)],
     f"cells.jsonl: {cells}")
med = {a: statistics.median(r["tok_s"] for r in rows if r["arm"] == a) for a in ("new", "base")}
summ = open(f"{out}/summary.txt").read()
m = re.search(r"^cmd 1 bench=decode .*kv_dtype=bf16 batch=1 ctx=64: new (\S+) base (\S+) tok_s \(median of 2/2 rows\) "
              r"new/base (\d+\.\d{3})", summ, re.M)
want(m is not None, f"summary.txt has no ratio line: {summ}")
if m:
    want(m.group(3) == f"{med['new'] / med['base']:.3f}", f"summary ratio {m.group(3)}, from the rows {med['new'] / med['base']:.3f}")
want("cells: 4 of 4 ran" in summ, "summary: cells line")
md = open(f"{out}/COMMANDS.md").read()
want(f"1. `{cmd}`" in md, "COMMANDS.md does not name the command")
want("`scripts/gpu-ab --base-bin " in md and "--reps 2 --cmd 'frigg-bench --backend cpu" in md, "COMMANDS.md: no invocation")
want(md.count("prebuilt programs in") == 2 and "- cell 4: new, rep 2, cmd 1: ok" in md, "COMMANDS.md: arms or cells")
for m in bad: print("FAIL:", m)
print("checked", len(bad))
PY
grep -q '^checked 0$' "$T/check" && ok || no "$(cat "$T/check")"
cmp -s "$T/out" "$T/o/summary.txt" && ok || no "stdout is not summary.txt"
for c in 001-new 002-base 003-base 004-new; do
    grep -q 'decode batch 1 ctx 64' "$T/o/logs/cell-$c.err" && ok || no "logs/cell-$c.err: $(cat "$T/o/logs/cell-$c.err")"
done
# never overwritten
$GA --base-bin "$BIN" --new-bin "$BIN" --cooldown-c 0 --reps 1 --cmd true --out "$T/o" > /dev/null 2> "$T/err"
[ $? = 1 ] && grep -q 'not overwritten' "$T/err" && [ "$(wc -l < "$T/o/results.jsonl")" = 4 ] && ok ||
    no "an existing results.jsonl was not refused: $(cat "$T/err")"

# ---- the arms' programs, placeholders, a clashing row key, a failing cell (exit 1, the others still run)
ln -s "$BIN" "$T/bb"
# shellcheck disable=SC2016
$GA --base-bin "$T/bb" --new-bin "$BIN" --cooldown-c 0 --reps 1 \
    --cmd 'printf "{\"arm_is\":\"%s\",\"bin\":\"%s\",\"path\":\"%s\",\"fb\":\"%s\",\"cell\":7,\"tok_s\":{rep}}\n" {arm} {bin} "$(command -v frigg-bench)" "$FRIGG_BIN"; echo not json' \
    --cmd 'test {arm} = new' --out "$T/p" > /dev/null 2> "$T/err"
rc=$?
[ $rc = 1 ] && ok || no "a failing cell: exit status $rc, want 1"
python3 - "$T/p" "$BIN" "$T/bb" <<'PY' > "$T/check" 2>&1
import json, sys
out, newb, baseb = sys.argv[1:]
bad = []
def want(c, what):
    if not c: bad.append(what)
rows = [json.loads(l) for l in open(f"{out}/results.jsonl")]
want(len(rows) == 2, f"{len(rows)} rows, want 2 (the non-JSON line skipped)")
for r in rows:
    b = newb if r["arm"] == "new" else baseb
    want(r.get("arm_is") == r["arm"] and r.get("bin") == b and r.get("fb") == b, f"{{arm}}/{{bin}}/FRIGG_BIN of {r}")
    want(r.get("path") == b + "/frigg-bench", f"{r['arm']}: frigg-bench on PATH is {r.get('path')}, want {b}/frigg-bench")
    want(r.get("row_cell") == 7 and r.get("cell") in (1, 2), f"the row's own cell: {r}")
cells = [json.loads(l) for l in open(f"{out}/cells.jsonl")]
want([(c["cmd"], c["arm"], c["status"]) for c in cells] == [(1, "new", "ok"), (1, "base", "ok"), (2, "new", "ok"), (2, "base", "exit 1")],
     f"cells: {[(c['cmd'], c['arm'], c['status']) for c in cells]}")
s = open(f"{out}/summary.txt").read()
want("cmd 1 (all rows): new 1 base 1 tok_s (median of 1/1 rows) new/base 1.000" in s, f"summary of rows without keys: {s}")
want("cmd 2: no rows with tok_s; wall time new" in s, "summary of a command without rows")
want("failed: cell 4 (base, rep 1, cmd 2): exit 1" in s, "summary: the failed cell")
for m in bad: print("FAIL:", m)
print("checked", len(bad))
PY
grep -q '^checked 0$' "$T/check" && ok || no "$(cat "$T/check")"

# ---- a cell past --cell-timeout-s; cells past --deadline-s (the first starts at once, the second after 1 s)
$GA --base-bin "$BIN" --new-bin "$BIN" --cooldown-c 0 --reps 1 --cell-timeout-s 0.3 --cmd 'sleep 30' --out "$T/to" > /dev/null 2>&1
rc=$?
[ $rc = 1 ] && [ "$(grep -c '"status": "timeout"' "$T/to/cells.jsonl")" = 2 ] && ok || no "timeout: exit $rc, $(cat "$T/to/cells.jsonl")"
$GA --base-bin "$BIN" --new-bin "$BIN" --cooldown-c 0 --reps 2 --deadline-s 0.5 --cmd 'sleep 1' --out "$T/dl" > /dev/null 2>&1
rc=$?
[ $rc = 3 ] && ok || no "deadline: exit status $rc, want 3"
[ "$(grep -c '"ran": true' "$T/dl/cells.jsonl") $(grep -c '"ran": false' "$T/dl/cells.jsonl")" = "1 3" ] &&
    grep -q '^not run (--deadline-s): cell 2 (base, rep 1, cmd 1), cell 3 (base, rep 2, cmd 1), cell 4 (new, rep 2, cmd 1)$' "$T/dl/summary.txt" &&
    grep -q '^- cell 4: new, rep 2, cmd 1: not run (deadline)$' "$T/dl/COMMANDS.md" && ok ||
    no "deadline: $(cat "$T/dl/cells.jsonl" "$T/dl/summary.txt")"

# ---- --cooldown-c with a fake nvidia-smi: 100 C (the check at the start), then 90, 80, 70: the first cell waits two
# polls, the second none
cat > "$T/smi" <<EOF
#!/bin/sh
t=\$(cat "$T/smi.t" 2>/dev/null || echo 100)
case "\$*" in
*compute_cap*) echo 9.0 ;;
*driver_version*) echo "Fake GPU, 1.0, 1980, 2619" ;;
*) echo "Fake GPU, 1980, 2619, \$t"; n=\$((t - 10)); [ \$n -lt 40 ] && n=40; echo \$n > "$T/smi.t" ;;
esac
EOF
chmod +x "$T/smi"
$GA --base-bin "$BIN" --new-bin "$BIN" --nvidia-smi "$T/smi" --cooldown-c 70 --poll-s 0.05 --reps 1 --cmd true --out "$T/c" > /dev/null 2> "$T/err"
rc=$?
[ $rc = 0 ] && ok || no "cooldown: exit status $rc: $(cat "$T/err")"
python3 - "$T/c/cells.jsonl" <<'PY' > "$T/check" 2>&1
import json, sys
c = [json.loads(l) for l in open(sys.argv[1])]
got = [(x["gpu_name"], x["gpu_sm_mhz_before"], x["gpu_mem_mhz_before"], x["gpu_temp_c_before"], x["gpu_temp_c_after"], x["cool"]) for x in c]
want = [("Fake GPU", 1980, 2619, 60, 50, True), ("Fake GPU", 1980, 2619, 40, 40, True)]
print("checked", 0 if got == want and c[0]["cooled_s"] >= 0.1 and c[1]["cooled_s"] < c[0]["cooled_s"] else f"1: {got} {[x['cooled_s'] for x in c]}")
PY
grep -q '^checked 0$' "$T/check" && grep -q '^card: Fake GPU (GPU 0, driver 1.0' "$T/c/summary.txt" &&
    grep -q 'each cell waited for 70 C or less' "$T/c/COMMANDS.md" && ok || no "cooldown: $(cat "$T/check" "$T/c/summary.txt")"

# ---- --dry-run: the plan, nothing written
$GA --base-bin "$BIN" --new-bin "$BIN" --cooldown-c 0 --reps 2 --cmd "$CMD" --out "$T/dry" --dry-run > "$T/plan" 2>&1
rc=$?
[ $rc = 0 ] && [ ! -e "$T/dry" ] && [ "$(grep -c "^cell [1-4]: .* cmd 1: $CMD\$" "$T/plan")" = 4 ] &&
    [ "$(sed -n 's/^cell [0-9]*: \([a-z]*\) *rep \([0-9]\).*/\1\2/p' "$T/plan" | tr '\n' ' ')" = "new1 base1 base2 new2 " ] && ok ||
    no "--dry-run: exit $rc: $(cat "$T/plan")"

# ---- the source arms (git archive of a revision; a git archive tarball), built by a make target that exists
if git rev-parse --verify -q HEAD > /dev/null 2>&1; then
    h=$(git rev-parse HEAD)
    git archive --prefix=frigg-x/ HEAD -- GNUmakefile README.md | xz > "$T/src.tar.xz"
    sha=$(sha256sum "$T/src.tar.xz" | cut -d' ' -f1)
    $GA --base HEAD --new-src "$T/src.tar.xz" --work "$T/w" --targets GNUmakefile --cooldown-c 0 --reps 1 \
        --cmd 'test -f {build}/../GNUmakefile' --out "$T/s" > /dev/null 2> "$T/err"
    rc=$?
    [ $rc = 0 ] && ok || no "--base HEAD --new-src: exit status $rc: $(tail -n 5 "$T/err")"
    grep -q "^- base: git revision \`HEAD\` = commit $h " "$T/s/COMMANDS.md" &&
        grep -q "^- new: source tarball \`$T/src.tar.xz\`, sha256 $sha\$" "$T/s/COMMANDS.md" &&
        grep -q "^\$ make -C $T/w/base-$(echo "$h" | cut -c1-12) -j[0-9]* .*BUILD=$T/w/base-" "$T/s/build-base.log" &&
        grep -q "^\$ make -C $T/w/new-src-$(echo "$sha" | cut -c1-12) " "$T/s/build-new.log" && ok ||
        no "source arms: $(cat "$T/s/COMMANDS.md" "$T/s/build-base.log")"
    # the trees as git archive left them (the tarball's frigg-x/ prefix taken off)
    git show HEAD:GNUmakefile | cmp -s - "$T/w/base-$(echo "$h" | cut -c1-12)/GNUmakefile" &&
        git show HEAD:README.md | cmp -s - "$T/w/new-src-$(echo "$sha" | cut -c1-12)/README.md" && ok ||
        no "the trees: $(ls "$T/w"/*)"
else
    echo "SKIP: gpu-ab --base/--new-src: no git history in $(pwd)"
fi
# a build that fails: exit 1 with make's last lines, its log kept, no results.jsonl (a second call may use the folder)
mkdir "$T/broken" && printf 'all:\n\t@echo broken-tree-make; false\n' > "$T/broken/GNUmakefile" && tar cf "$T/broken.tar" -C "$T/broken" .
$GA --base-src "$T/broken.tar" --new-bin "$BIN" --work "$T/w" --targets all --cooldown-c 0 --cmd true --out "$T/bf" > /dev/null 2> "$T/err"
rc=$?
[ $rc = 1 ] && grep -q 'the base build failed (make exit 2' "$T/err" && grep -q '^broken-tree-make$' "$T/err" &&
    grep -q 'broken-tree-make' "$T/bf/build-base.log" && [ ! -e "$T/bf/results.jsonl" ] && ok || no "a failing build: exit status $rc: $(cat "$T/err")"
# a bad revision: a usage error naming it (without git history: saying so), before anything is written
$GA --base no-such-rev-0x --cooldown-c 0 --cmd true --out "$T/bad" > /dev/null 2> "$T/err"
rc=$?
[ $rc = 2 ] && grep -Eq -- '^gpu-ab: --base no-such-rev-0x: (not a git revision|.* has no git history)' "$T/err" && [ ! -e "$T/bad" ] && ok ||
    no "a bad --base: exit status $rc: $(cat "$T/err")"

# ---- more usage errors (exit 2, nothing written)
PY3=$(python3 -c "import sys; print(sys.executable)")  # the interpreter itself, not a shim that needs PATH
mkdir "$T/nopath"
env PATH="$T/nopath" "$PY3" $GA --base-bin "$BIN" --new-bin "$BIN" --cooldown-c 60 --cmd true --out "$T/u" > /dev/null 2> "$T/err"
rc=$?
[ $rc = 2 ] && grep -q -- '--cooldown-c 60 needs the GPU.s temperature, and there is no nvidia-smi' "$T/err" && [ ! -e "$T/u" ] && ok ||
    no "--cooldown-c without nvidia-smi: exit status $rc: $(cat "$T/err")"
env PATH="$T/nopath" "$PY3" $GA --base-bin "$BIN" --new-bin "$BIN" --cmd true --out "$T/u" > /dev/null 2> "$T/err"
[ $? = 2 ] && grep -q 'no nvidia-smi' "$T/err" && ok || no "the default --cooldown-c without nvidia-smi: $(cat "$T/err")"
printf '#!/bin/sh\nexit 9\n' > "$T/badsmi"; chmod +x "$T/badsmi"
$GA --base-bin "$BIN" --new-bin "$BIN" --nvidia-smi "$T/badsmi" --cmd true --out "$T/u" > /dev/null 2> "$T/err"
[ $? = 2 ] && grep -q 'gave no temperature for GPU 0' "$T/err" && [ ! -e "$T/u" ] && ok || no "a failing nvidia-smi: $(cat "$T/err")"
while IFS='|' read -r args pat; do
    # shellcheck disable=SC2086
    eval "$GA --out '$T/u' $args" > /dev/null 2> "$T/err"
    rc=$?
    [ $rc = 2 ] && grep -q -- "$pat" "$T/err" && [ ! -e "$T/u" ] && ok || no "'$args': exit status $rc, want 2 and '$pat': $(cat "$T/err")"
done <<EOF
--new-bin $BIN --cooldown-c 0 --cmd true|no base arm
--base-bin $BIN --base HEAD --cooldown-c 0 --cmd true|takes one of
--base-bin $BIN --cooldown-c 0|no command
--base-bin $T/none --cooldown-c 0 --cmd true|--base-bin $T/none: no such directory
--base-src $T/none.tar.xz --cooldown-c 0 --cmd true|no such file
--base-bin $BIN --cooldown-c 0 --cmds $T/none --cmd true|--cmds $T/none
--base-bin $BIN --cooldown-c 0 --reps 0 --cmd true|--reps takes a whole number
--base-bin $BIN --cooldown-c x --cmd true|--cooldown-c takes a number
--base-bin $BIN --cooldown-c 0 --frobnicate 1 --cmd true|unknown option --frobnicate
--base-bin $BIN --cooldown-c 0 --cmd|--cmd needs a value
EOF
echo "gpu-ab: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
