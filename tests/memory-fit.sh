#!/bin/sh
# Engines larger than the machine are refused before they are made, in every program, as frigg-serve refuses them
# (run/memcheck.h): the CPU engine's KV cache is committed only as it is written, so such an engine used to start
# and die later under the OOM killer (frigg-bench --random-mimir --backend cpu --batch 64 --ctx 4096 reserved 406 GB
# on a 23 GB machine). Each refusal names the need, what the host has available (MemAvailable) and the options to
# lower; the same run with them lowered goes through. The big engines come from DFM-Mimir's shapes
# (--random-mimir, refused before the model is made) and from the bundled model with a config.json that claims a
# context of 10 million tokens (the weights do not depend on it).
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
M=$ROOT/golden/default
T=$(mktemp -d "${TMPDIR:-/tmp}/memory-fit.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
avail_kb=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo 2>/dev/null)
if [ -z "$avail_kb" ]; then
    echo "SKIP memory-fit: /proc/meminfo has no MemAvailable (nothing is refused without it)"
    echo "memory-fit: 0 passed, 0 failed"; exit 0
fi
if [ "$avail_kb" -gt $((400 * 1024 * 1024)) ]; then
    echo "SKIP memory-fit: this host has more than 400 GiB available: the engines below would fit"
    echo "memory-fit: 0 passed, 0 failed"; exit 0
fi
mkdir -p "$T/big"
cp "$M/tokenizer.json" "$T/big/"
ln -s "$(cd "$M" && pwd)/model.safetensors" "$T/big/model.safetensors"
sed 's/"max_position_embeddings": 512/"max_position_embeddings": 10000000/' "$M/config.json" > "$T/big/config.json"
grep -q '"max_position_embeddings": 10000000' "$T/big/config.json" || no "the big-context config was not written"
NEED='needs [0-9.]* GiB on the cpu engine (.*KV cache [0-9.]* GiB (.*) and the host has [0-9.]* GiB available (MemAvailable): lower'

# frigg-bench: DFM-Mimir's shapes, refused at once (the random model is not made first)
t0=$(date +%s)
"$BIN/frigg-bench" --random-mimir --backend cpu --batch 64 --ctx 4096 decode > "$T/out" 2> "$T/err"; rc=$?
t1=$(date +%s)
[ "$rc" = 1 ] && grep -q "$NEED --batch or --ctx" "$T/err" && grep -q 'decode batch 64 at ctx 4096: KV cache 384.00 GiB' "$T/err" &&
    ok || no "frigg-bench --random-mimir --batch 64 --ctx 4096: exit $rc: $(cat "$T/err")"
[ $((t1 - t0)) -le 5 ] && ok || no "frigg-bench took $((t1 - t0)) s to refuse (the model was made first?)"
[ ! -s "$T/out" ] && ok || no "frigg-bench wrote rows before refusing: $(head -c 300 "$T/out")"
"$BIN/frigg-bench" --model "$T/big" --backend cpu --batch 64 --ctx 1000000 --steps 2 decode > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 1 ] && grep -q "$NEED --batch or --ctx" "$T/err" && ok || no "frigg-bench --model big --ctx 1000000: exit $rc: $(cat "$T/err")"
"$BIN/frigg-bench" --model "$T/big" --backend cpu --prefill 1000000 prefill > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 1 ] && grep -q "$NEED --prefill" "$T/err" && grep -q "(prefill of 1000000 tokens: KV cache" "$T/err" && ok ||
    no "frigg-bench prefill 1000000: exit $rc: $(cat "$T/err")"
"$BIN/frigg-bench" --model "$T/big" --backend cpu --batch 2 --ctx 64 --steps 2 decode > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 0 ] && grep -q '"bench":"decode"' "$T/out" && ok || no "frigg-bench --ctx 64 on the big-context model: exit $rc: $(cat "$T/err")"

# frigg-run: 8 slots (its default --parallel) of 10 million tokens; -p takes one slot; --ctx lowers it
echo '{"prompt":"Hej","max_tokens":2}' | "$BIN/frigg-run" --model "$T/big" -b cpu -t 2 > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 2 ] && grep -q "frigg-run: .*$NEED --parallel or --ctx" "$T/err" && grep -q "(8 sequences x 10000000 tokens" "$T/err" && ok ||
    no "frigg-run on the big-context model: exit $rc: $(cat "$T/err")"
"$BIN/frigg-run" --model "$T/big" -b cpu -t 2 -p Hej > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 2 ] && grep -q "(1 sequence x 10000000 tokens" "$T/err" && ok || no "frigg-run -p: exit $rc: $(cat "$T/err")"
echo '{"prompt":"Hej","max_tokens":2}' | "$BIN/frigg-run" --model "$T/big" -b cpu -t 2 --ctx 512 > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 0 ] && grep -q '"output_ids"' "$T/out" && ok || no "frigg-run --ctx 512: exit $rc: $(cat "$T/err")"
"$BIN/frigg-run" --model "$T/big" -b cpu -t 2 -p Hej --ctx 512 > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 0 ] && ok || no "frigg-run -p --ctx 512: exit $rc: $(cat "$T/err")"

# frigg-eval nll: --parallel slots of the model's context, and their score logits; --ctx lowers it
head -n 2 "$M/heldout.jsonl" > "$T/two.jsonl"
"$BIN/frigg-eval" nll --model "$T/big" -b cpu -t 2 < "$T/two.jsonl" > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 2 ] && grep -q "$NEED --parallel, or --ctx" "$T/err" && grep -q "score logits [0-9.]* GiB)" "$T/err" && ok ||
    no "frigg-eval nll on the big-context model: exit $rc: $(cat "$T/err")"
"$BIN/frigg-eval" nll --model "$T/big" -b cpu -t 2 --ctx 256 < "$T/two.jsonl" > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 0 ] && tail -n 1 "$T/out" | grep -q '"sequences":2' && ok || no "frigg-eval nll --ctx 256: exit $rc: $(cat "$T/err")"
"$BIN/frigg-eval" nll --model "$T/big" -b cpu -t 2 --ctx 40 < "$T/two.jsonl" > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 1 ] && grep -q 'exceeds the context limit of 40 tokens' "$T/out" && ok || no "frigg-eval nll --ctx 40 (lines longer): exit $rc: $(cat "$T/out")"
# kl sizes its engines to its sequences: the big context claims nothing
"$BIN/frigg-eval" kl --model "$T/big" --ref "$M" -b cpu -t 2 --text "$M/heldout.txt" --limit 2 > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 0 ] && tail -n 1 "$T/out" | grep -q '"kl_mean":0.0,' && ok || no "frigg-eval kl: exit $rc: $(cat "$T/err") $(tail -n 1 "$T/out")"

echo "memory-fit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
