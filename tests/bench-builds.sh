#!/bin/sh
# frigg-bench matrix --builds on the CPU engine: golden/default and an int8 build of it (frigg-quantize), bf16 and
# int8 KV, batches 1 and 2 at ctx 64. The rows: one per cell and build, the builds alternated cell by cell and their
# order reversed every other cell (A B, B A, ...: "order" its place),
# each with its build, weights dtype, kv dtype, temperatures and bytes_per_step = weight_bytes + kv_bytes (the KV
# bytes those of frigg_kv_seq_bytes at the mean position, recomputed here from config.json; the int8 build's
# weights fewer than bf16's). The refusals, each before any row: --cooldown-c without a readable GPU temperature, a
# bad build directory, a cell that does not fit a build, --builds without matrix. Each measurement's line on stderr
# names its build. Where the build has CUDA, an int8
# KV cache on the CUDA engine: measured with a GPU, else refused for the missing GPU alone. --cooldown-c with a fake nvidia-smi (a GPU at 90 C cooling
# 10 C per reading): the run waits, and the rows record it. The rendering: scripts/perf-table --builds (the table),
# --plot (SVG, PNG; a SKIP line without gnuplot, and then its refusal), and scripts/nightly-bench end to end.
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
FB=$BIN/frigg-bench
T=$(mktemp -d "${TMPDIR:-/tmp}/bench-builds.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $*"; }
D=$ROOT/golden/default
CELL="--backend cpu --batch 1,2 --ctx 64 --steps 4 --repeats 3"
if ! "$BIN/frigg-quantize" "$D" "$T/int8" --method int8 --threads 1 > "$T/q.log" 2>&1; then
    no "frigg-quantize --method int8: $(tail -n 3 "$T/q.log")"
    echo "bench-builds: $pass passed, $fail failed"; exit 1
fi

# the matrix: 2 builds x 2 kv dtypes x 2 batches
# shellcheck disable=SC2086
"$FB" $CELL --builds "$D,$T/int8" --kv-dtypes bf16,int8 matrix > "$T/rows.jsonl" 2> "$T/err"
[ $? = 0 ] && ok || no "matrix --builds: exit status $? ($(tail -n 2 "$T/err"))"
# progress (run/progress): none in a short run's log without --progress; with it, each measurement's last line
grep -q " runs (a warm-up" "$T/err" && no "matrix without --progress: progress lines in a short run" || ok
# shellcheck disable=SC2086
"$FB" --backend cpu --batch 1 --ctx 64 --steps 2 --builds "$D,$T/int8" --progress matrix > /dev/null 2> "$T/perr"
for b in "$D" "$T/int8"; do
    grep -Eq "^frigg-bench: build $b: decode batch 1 ctx 64: 4 of 4 runs \(a warm-up, then --repeats\), 100 %, [0-9.]+ s$" "$T/perr" &&
        ok || no "matrix --progress: no progress line naming $b: $(cat "$T/perr")"
done
"$FB" --model "$D" --backend cpu --prefill 16 --progress prefill > /dev/null 2> "$T/perr"
grep -Eq "^frigg-bench: prefill 16 tokens: 4 of 4 runs" "$T/perr" && ok || no "prefill --progress: $(cat "$T/perr")"
# the default contexts (512, 2048, 4096) on the bundled model (max_position_embeddings 512): decode at what fits,
# saying so, never a refusal of the defaults themselves
"$FB" --model "$D" --backend cpu --batch 1 --steps 2 decode > "$T/drows" 2> "$T/derr"; rc=$?
[ "$rc" = 0 ] && [ "$(grep -c '"ctx":512' "$T/drows")" = 1 ] && grep -q "beyond the model's max_position_embeddings 512" "$T/derr" &&
    ok || no "decode at the default contexts on golden/default: exit $rc, $(cat "$T/derr")"
python3 - "$T/rows.jsonl" "$D" "$T/int8" "$D/config.json" <<'PY' > "$T/check" 2>&1
import json, sys
path, a, b, cfgp = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.startswith("{")]
c = json.load(open(cfgp))
bad = []
def want(cond, what):
    if not cond: bad.append(what)
want(len(rows) == 8, f"{len(rows)} rows, want 8 (2 kv x 2 batches x 2 builds)")
cells = [(kv, B) for kv in ("bf16", "int8") for B in (1, 2)]
for i, r in enumerate(rows):
    kv, B = cells[i // 2] if i // 2 < len(cells) else ("?", 0)
    j = i % 2 if i // 2 % 2 == 0 else 1 - i % 2  # the given order in even cells, reversed in odd ones: A B, B A, ...
    want(r.get("build") == (a, b)[j], f"row {i}: build {r.get('build')}, want {(a, b)[j]} (A B, B A order)")
    want(r.get("build_index") == j and r.get("order") == i % 2 and r.get("cell") == i // 2,
         f"row {i}: build_index/order/cell {r.get('build_index')}/{r.get('order')}/{r.get('cell')}, want {j}/{i % 2}/{i // 2}")
    want(r.get("kv_dtype") == kv and r.get("batch") == B and r.get("ctx") == 64, f"row {i}: cell {r.get('kv_dtype')} {r.get('batch')} {r.get('ctx')}, want {kv} {B} 64")
    want(r.get("bench") == "decode" and r.get("tok_s", 0) > 0, f"row {i}: bench/tok_s")
    want(r.get("weights") == ("bf16", "int8")[j], f"row {i}: weights {r.get('weights')}")
    want(r.get("temp_c_start") == -1 and r.get("temp_c_end") == -1, f"row {i}: temperatures without a GPU should be -1")
    want("cooldown_c" not in r, f"row {i}: cooldown_c without --cooldown-c")
    # KV bytes at the mean position: K and V of every virtual layer; CPU bf16 holds floats, int8 a byte + a scale per head
    slots = c["H_cycles"] * c["H_layers"] + c["H_cycles"] * c["L_cycles"] * c["L_layers"] if "H_layers" in c else None
    n0 = 64 - 4
    avg = n0 + 2
    D, H = c["hidden_size"], c["num_attention_heads"]
    per_slot = 2 * avg * (D * 4 if kv == "bf16" else D + 4 * H)
    kvb = r.get("kv_bytes", -1)
    want(kvb > 0 and abs(kvb / B / per_slot - round(kvb / B / per_slot)) < 1e-6, f"row {i}: kv_bytes {kvb} is no whole number of virtual layers of {per_slot} bytes at batch {B}")
    want(r.get("bytes_per_step") == r.get("weight_bytes", 0) + kvb, f"row {i}: bytes_per_step {r.get('bytes_per_step')} != weight_bytes + kv_bytes")
for i in range(0, len(rows) - 1, 2):
    x, y = sorted(rows[i:i + 2], key=lambda r: r.get("build_index", 0))  # the cell's bf16 build, then its int8 one
    want(y.get("weight_bytes", 1e18) < 0.6 * x.get("weight_bytes", 0), f"rows {i},{i+1}: int8 weight bytes not ~half of bf16's")
    want(x.get("kv_bytes") == y.get("kv_bytes"), f"rows {i},{i+1}: one cell, different KV bytes")
by = {(r["kv_dtype"], r["batch"], r["build_index"]): r["kv_bytes"] for r in rows}
want(by.get(("int8", 1, 0), 1e18) < 0.3 * by.get(("bf16", 1, 0), 0), "int8 KV bytes not under 0.3 of bf16's (floats) on the CPU engine")
want(by.get(("bf16", 2, 0)) == 2 * by.get(("bf16", 1, 0), -1), "batch 2's KV bytes not twice batch 1's")
for m in bad: print("FAIL:", m)
print("rows-checked", len(bad))
PY
grep -q '^rows-checked 0$' "$T/check" && ok || no "matrix rows: $(grep FAIL "$T/check" | head -n 8) $(grep -v FAIL "$T/check" | tail -n 3)"
# the per-measurement lines on stderr name their build: 2 kv dtypes x 2 batches of each
for b in "$D" "$T/int8"; do
    n=$(grep -c "^build $b: decode batch [12] ctx 64 kv \(bf16\|int8\): [0-9.]* tok/s" "$T/err")
    [ "$n" = 4 ] && ok || no "stderr: $n measurement lines name build $b, want 4: $(grep 'decode batch' "$T/err" | head -n 4)"
done

# refusals, each with no row written
refuse() { # WHAT PATTERN ARGS...: exit status 1 or 2, nothing on stdout, PATTERN on stderr
    what=$1 pat=$2; shift 2
    "$FB" "$@" > "$T/out" 2> "$T/err"; rc=$?
    if [ "$rc" != 1 ] && [ "$rc" != 2 ]; then no "$what: exit status $rc, want 1 or 2"
    elif [ -s "$T/out" ]; then no "$what: wrote rows before failing: $(head -c 200 "$T/out")"
    elif ! grep -q "$pat" "$T/err"; then no "$what: stderr lacks \"$pat\": $(cat "$T/err")"
    else ok; fi
}
EMPTY=$T/empty-path; mkdir -p "$EMPTY"  # no nvidia-smi here: the temperature cannot be read
# shellcheck disable=SC2086
PATH=$EMPTY:/usr/bin:/bin refuse "--cooldown-c without a GPU" "temperature cannot be read" $CELL --builds "$D,$T/int8" --cooldown-c 65 matrix
# shellcheck disable=SC2086
refuse "a bad build directory (second)" "build $T/missing" $CELL --builds "$D,$T/missing" matrix
# shellcheck disable=SC2086
refuse "a cell beyond a build's max_position_embeddings" "does not fit" --backend cpu --batch 1 --ctx 64,1024 --steps 4 --builds "$D,$T/int8" matrix
# shellcheck disable=SC2086
refuse "--builds without matrix" "form of the matrix mode" $CELL --builds "$D,$T/int8" decode
# shellcheck disable=SC2086
refuse "--cooldown-c without --builds" "option of matrix --builds" $CELL --model "$D" --cooldown-c 65 decode
# shellcheck disable=SC2086
refuse "an unknown kv dtype" "bf16 or int8" $CELL --builds "$D" --kv-dtypes bf16,int4 matrix
if "$FB" --version 2>&1 | grep -q cuda; then
    # the CUDA engine keeps an int8 KV cache: a row where a GPU is present, else the missing GPU is the one complaint
    "$FB" --backend cuda --batch 1 --ctx 64 --steps 4 --builds "$D" --kv-dtypes int8 matrix > "$T/out" 2> "$T/err"; rc=$?
    if [ "$rc" = 0 ]; then
        grep -q '"kv_dtype":"int8"' "$T/out" && grep -q '"backend":"cuda"' "$T/out" && ok ||
            no "int8 KV on the CUDA engine: $(head -c 300 "$T/out")"
    elif [ "$rc" = 1 ] && [ ! -s "$T/out" ] && grep -q "no CUDA device is present" "$T/err" && ! grep -q "int8" "$T/err"; then
        ok
    else
        no "int8 KV on the CUDA engine: exit status $rc, stderr: $(cat "$T/err")"
    fi
fi
# plain decode with --kv-dtype int8
# shellcheck disable=SC2086
"$FB" --backend cpu --batch 1 --ctx 64 --steps 4 --model "$D" --kv-dtype int8 decode > "$T/plain" 2>/dev/null
grep -q '"kv_dtype":"int8"' "$T/plain" && [ "$(grep -c '^{' "$T/plain")" = 1 ] && ok || no "decode --kv-dtype int8: $(cat "$T/plain")"

# --cooldown-c against a fake nvidia-smi: 90 C, then 10 C cooler at every temperature reading
FAKE=$T/fake; mkdir -p "$FAKE"; echo 0 > "$T/reads"
cat > "$FAKE/nvidia-smi" <<SH
#!/bin/sh
case "\$*" in
*name,*) echo "Fake GPU, 1980, 2619, 50" ;;
*) n=\$(cat "$T/reads"); echo \$((n + 1)) > "$T/reads"; t=\$((90 - 10 * n)); [ \$t -lt 40 ] && t=40; echo \$t ;;
esac
SH
chmod +x "$FAKE/nvidia-smi"
PATH=$FAKE:$PATH "$FB" --backend cpu --batch 1 --ctx 64 --steps 4 --builds "$D" --cooldown-c 70 matrix > "$T/cool" 2> "$T/cool.err"
python3 - "$T/cool" <<'PY' > "$T/check" 2>&1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
r = rows[0] if len(rows) == 1 else {}
# readings: 90 (the check), 80 (wait), 70 (cool enough), 60 (the start), 50 (the end)
ok = (r.get("cooldown_c") == 70 and r.get("cooled_s", 0) >= 0.9 and r.get("temp_c_start") == 60 and
      r.get("temp_c_end") == 50 and r.get("gpu") == "Fake GPU")
print("cool-ok" if ok else "FAIL: %d rows: %s" % (len(rows), rows))
PY
grep -q '^cool-ok$' "$T/check" && grep -q "waiting for 70 C" "$T/cool.err" && ok || no "--cooldown-c with a fake GPU: $(cat "$T/check") $(cat "$T/cool.err")"

# rendering
PT=$ROOT/scripts/perf-table
"$PT" --builds "$T/rows.jsonl" > "$T/table.md" 2> "$T/pt.err"
if [ $? = 0 ] && grep -q '| bf16 | 1 | 64 | [0-9.,]* | [0-9.,]* ([0-9.]*×) |' "$T/table.md" && [ "$(grep -c '^| \(bf16\|int8\) |' "$T/table.md")" = 4 ]; then ok
else no "perf-table --builds: $(cat "$T/table.md" "$T/pt.err")"; fi
if command -v gnuplot > /dev/null 2>&1; then
    "$PT" --builds "$T/rows.jsonl" --plot "$T/p.svg" > /dev/null 2>&1 && grep -q '<svg' "$T/p.svg" && ok || no "perf-table --plot SVG"
    "$PT" --builds "$T/rows.jsonl" --plot "$T/p.png" > /dev/null 2>&1 && head -c 4 "$T/p.png" | grep -q PNG && ok || no "perf-table --plot PNG"
else
    echo "SKIP: perf-table --plot: gnuplot is not installed (Debian gnuplot-nox; scripts/install-deps)"
fi
# without gnuplot on PATH (python3 still found): a clear refusal
PY3=$(python3 -c 'import sys; print(sys.executable)')
mkdir -p "$T/py"
PATH=$T/py "$PY3" "$PT" --builds "$T/rows.jsonl" --plot "$T/none.svg" > /dev/null 2> "$T/pt.err"
[ $? != 0 ] && grep -q "needs gnuplot, which is not installed" "$T/pt.err" && [ ! -e "$T/none.svg" ] && ok || no "--plot without gnuplot: $(cat "$T/pt.err")"

# nightly-bench, shrunk: one quantized build, one cell, no cooldown (no GPU), the plot where gnuplot is
plotopt=--no-plot; command -v gnuplot > /dev/null 2>&1 && plotopt="--plot-format svg"
# shellcheck disable=SC2086
FRIGG_BIN=$BIN "$ROOT/scripts/nightly-bench" --backend cpu --methods int8 --batch 1 --ctx 64 --steps 4 --repeats 3 \
    --cooldown-c none --threads 1 $plotopt "$D" "$T/night" > "$T/n.out" 2> "$T/n.err"
rc=$?
if [ $rc = 0 ] && [ "$(grep -c '"build"' "$T/night/builds.jsonl")" = 2 ] && grep -q '| bf16 | 1 | 64 |' "$T/night/builds.md" \
    && grep -q 'frigg-bench' "$T/night/COMMANDS.md" && { [ "$plotopt" = --no-plot ] || [ -s "$T/night/builds.svg" ]; }; then ok
else no "nightly-bench: exit $rc: $(tail -n 5 "$T/n.err")"; fi
# a second night keeps the build (newer than SRC), and a bad SRC is a usage error
FRIGG_BIN=$BIN "$ROOT/scripts/nightly-bench" --backend cpu --methods int8 --batch 1 --ctx 64 --steps 4 --cooldown-c none \
    --no-plot "$D" "$T/night" > /dev/null 2> "$T/n.err" && grep -q "kept" "$T/n.err" && ok || no "nightly-bench again: $(tail -n 3 "$T/n.err")"
FRIGG_BIN=$BIN "$ROOT/scripts/nightly-bench" "$T/nothing" "$T/night2" > /dev/null 2>&1
[ $? = 2 ] && [ ! -e "$T/night2" ] && ok || no "nightly-bench with no checkpoint: not a usage error"
echo "bench-builds: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
