#!/bin/sh
# GGUF end to end (common/model/gguf.h), on golden/fixtures/tiny-gguf (llama.cpp's converter and llama-quantize made
# its files; its README says how). Always:
#   - frigg-run's greedy ids on the BF16, Q8_0 and Q4_K_M files, causal and with the prompt as the prefix, are the ones
#     llama.cpp itself gave on the same files (llamacpp-greedy.txt, recorded by scripts/llamacpp/lc-greedy.c);
#   - frigg-eval nll and frigg-run's greedy tokens on the BF16 GGUF are exactly the safetensors source's;
#   - the Q8_0, Q4_K_M and Q5_K_M files load and score near the source;
#   - frigg-quantize FILE.gguf OUT builds a checkpoint that loads (config.json from the metadata, tokenizer.json
#     from beside the file) and scores near the source;
#   - a GGUF without tokenizer.json beside it runs on token ids, and a text prompt's error says where to put one;
#   - truncated copies of each file are refused with an error naming a key or tensor, never a crash.
# With the Python environment's check set (scripts/pyenv: PyPI gguf; installed under CI=true, else used when present):
#   - every tensor of every fixture file and a file of random blocks of each ggml type frigg decodes: frigg's f32
#     values (test_gguf --dump) bit-identical to gguf.quants.dequantize;
#   - frigg on a safetensors of the Q4_K_M file's weights as gguf-py dequantizes them (rounded to bf16) scores
#     exactly as on the GGUF;
#   - malformed files (gguf.GGUFWriter writing lying metadata; bytes changed where gguf.GGUFReader says a field is):
#     refused with the error the case names.
# With the oracle set and a llama.cpp source tree ($LLAMA_CPP_DIR, else /tmp/lcp/lc): golden/default converted by
# scripts/llamacpp/convert.py to BF16, F32 and F16 scores as its safetensors (BF16, F32: exactly; F16: within 1e-4 of
# the mean NLL: bf16 weights below f16's normal range lose bits in the converter's f16); otherwise a SKIP line.
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
F=$ROOT/golden/fixtures/tiny-gguf
T=$(mktemp -d "${TMPDIR:-/tmp}/gguf.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
good() { pass=$((pass + 1)); }
nll() { # model [input] -> the summary line
    "$BIN/frigg-eval" nll --model "$1" --backend cpu --threads 2 < "${2:-$F/heldout.jsonl}" 2>"$T/eval.err" | tail -n 1
}
nll_mean() { echo "$1" | sed -nE 's/.*"nll_mean":([0-9.eE+-]+).*/\1/p'; }
# near A B TOL: |A - B| <= TOL
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'; }

# ---- the BF16 GGUF is the safetensors source ----
src=$(nll "$F")
gg=$(nll "$F/model-bf16.gguf")
s=$(nll_mean "$src"); g=$(nll_mean "$gg")
if [ -n "$s" ] && [ "$s" = "$g" ] && [ "$(echo "$src" | sed 's/"model":"[^"]*"//')" = "$(echo "$gg" | sed 's/"model":"[^"]*"//')" ]; then
    good; else bad "nll: BF16 GGUF $g, safetensors $s (must be identical)"; cat "$T/eval.err"; fi
run_ids() { echo '{"input_ids":[2,17,300,45],"max_tokens":12}' |
    "$BIN/frigg-run" --model "$1" --backend cpu --threads 2 2>"$T/run.err" | sed -nE 's/.*"output_ids":\[([0-9,]*)\].*/\1/p'; }
a=$(run_ids "$F"); b=$(run_ids "$F/model-bf16.gguf")
if [ -n "$a" ] && [ "$a" = "$b" ]; then good; else bad "frigg-run greedy ids: safetensors [$a], BF16 GGUF [$b]"; cat "$T/run.err"; fi
# ---- llama.cpp's own greedy ids on the same files (recorded: llamacpp-greedy.txt says how), causal and prefix ----
while read -r file mask steps want _; do
    case $file in '#'*|'') continue ;; esac
    pt=',"prefix_tokens":0'; [ "$mask" = prefix ] && pt=""
    got=$(echo "{\"input_ids\":[2,17,300,45],\"max_tokens\":$steps,\"temperature\":0,\"stop_ids\":[]$pt}" |
        "$BIN/frigg-run" --model "$F/$file" --backend cpu --threads 2 2>"$T/run.err" | sed -nE 's/.*"output_ids":\[([0-9,]*)\].*/\1/p')
    if [ "$got" = "$want" ]; then good; else bad "$file $mask: frigg-run [$got], llama.cpp [$want]"; cat "$T/run.err"; fi
done < "$F/llamacpp-greedy.txt"

# ---- the quantized files ----
for q in q8_0:0.05 q5_k_m:0.3 q4_k_m:1.0; do
    name=${q%%:*}; tol=${q#*:}
    m=$(nll_mean "$(nll "$F/model-$name.gguf")")
    if near "$m" "$s" "$tol"; then good; else bad "$name: nll_mean $m, source $s (tolerance $tol)"; cat "$T/eval.err"; fi
done

# ---- frigg-quantize FILE.gguf OUT ----
if "$BIN/frigg-quantize" "$F/model-q8_0.gguf" "$T/fq" --method int8 >"$T/q.log" 2>&1 && [ -f "$T/fq/tokenizer.json" ] &&
    grep -q '"num_layers_per_stack": 1' "$T/fq/config.json"; then
    good
    m=$(nll_mean "$(nll "$T/fq")")
    if near "$m" "$s" 0.1; then good; else bad "frigg-quantize of the Q8_0 GGUF: nll_mean $m, source $s"; fi
else
    bad "frigg-quantize FILE.gguf OUT"; tail -n 5 "$T/q.log"
fi

# ---- the tokenizer: beside the file, or an error saying so ----
mkdir "$T/alone" && cp "$F/model-bf16.gguf" "$T/alone/m.gguf"
if "$BIN/frigg-run" --model "$T/alone/m.gguf" --backend cpu -p "Hej" >"$T/o" 2>&1; then
    bad "a text prompt without tokenizer.json ran"
elif grep -q "put the model's tokenizer.json at $T/alone/tokenizer.json" "$T/o"; then good
else bad "no tokenizer: the error does not say where to put it:"; cat "$T/o"; fi
c=$(run_ids "$T/alone/m.gguf")
if [ "$c" = "$a" ]; then good; else bad "token ids without a tokenizer: [$c], want [$a]"; cat "$T/run.err"; fi
t1=$("$BIN/frigg-run" --model "$F/model-bf16.gguf" --backend cpu -n 4 -p "Hej med dig" 2>/dev/null | sed -nE 's/.*"prompt_tokens":([0-9]+).*/\1/p')
t2=$("$BIN/frigg-run" --model "$F" --backend cpu -n 4 -p "Hej med dig" 2>/dev/null | sed -nE 's/.*"prompt_tokens":([0-9]+).*/\1/p')
if [ -n "$t1" ] && [ "$t1" = "$t2" ]; then good; else bad "text prompt: $t1 prompt tokens from the GGUF, $t2 from the folder"; fi

# ---- truncations: refused by name, never a crash ----
for f in model-bf16 model-q4_k_m; do
    size=$(wc -c < "$F/$f.gguf")
    for n in 3 23 100 1000 30000 $((size / 2)) $((size - 1)); do
        head -c "$n" "$F/$f.gguf" > "$T/cut.gguf"
        "$BIN/frigg-eval" nll --model "$T/cut.gguf" --backend cpu < /dev/null >"$T/o" 2>&1
        rc=$?
        if [ "$rc" -ge 1 ] && [ "$rc" -le 2 ] && grep -Eq 'cut\.gguf[: ].*(GGUF|key|tensor|count|offset)' "$T/o"; then good
        else bad "$f cut to $n bytes: exit $rc"; head -c 600 "$T/o"; fi
    done
done

# ---- gguf-py: the reference dequantization and malformed files ----
PY=""
if [ -n "${CI:-}" ] && [ -z "${FRIGG_NO_LIVE:-}" ]; then
    PY=$("$ROOT/scripts/pyenv" 2>"$T/pyenv.log") || { bad "scripts/pyenv (the check set)"; tail -n 5 "$T/pyenv.log"; PY=""; }
elif "$ROOT/scripts/pyenv" --have check 2>/dev/null; then
    PY=$("$ROOT/scripts/pyenv" 2>/dev/null)
fi
CHK=$ROOT/scripts/gguf-tests/gguf_check.py
add_counts() { # the "dequant: N passed, N failed" line of $T/log
    line=$(grep -E '^dequant: [0-9]+ passed, [0-9]+ failed' "$T/log" | tail -n 1)
    if [ -z "$line" ]; then bad "$1: no summary line"; tail -n 5 "$T/log"; return; fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/'); f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    pass=$((pass + p)); fail=$((fail + f))
    [ "$f" -eq 0 ] || { echo "FAIL: $1:"; grep '^FAIL' "$T/log"; }
}
if [ -n "$PY" ]; then
    "$PY" "$CHK" random "$T/random.gguf" || bad "gguf_check.py random"
    for f in "$F"/model-*.gguf "$T/random.gguf"; do
        d=$T/dump-$(basename "$f")
        if "$BUILD/tests/test_gguf" --dump "$f" "$d"; then "$PY" "$CHK" dequant "$f" "$d" >"$T/log" 2>&1; add_counts "$(basename "$f")"
        else bad "test_gguf --dump $f"; fi
    done
    if "$PY" "$CHK" reference "$F/model-q4_k_m.gguf" "$F/config.json" "$T/ref" 2>"$T/log"; then
        r=$(nll "$T/ref"); q=$(nll "$F/model-q4_k_m.gguf")
        if [ -n "$(nll_mean "$r")" ] && [ "$(nll_mean "$r")" = "$(nll_mean "$q")" ]; then good
        else bad "Q4_K_M: nll $(nll_mean "$q"), gguf-py's dequantized weights $(nll_mean "$r") (must be identical)"; fi
    else bad "gguf_check.py reference"; cat "$T/log"; fi
    if "$PY" "$CHK" malformed "$F/model-q8_0.gguf" "$T/bad" >"$T/cases" 2>"$T/log"; then
        tab=$(printf '\t')
        while IFS="$tab" read -r f phrase; do
            "$BIN/frigg-eval" nll --model "$f" --backend cpu < /dev/null >"$T/o" 2>&1
            rc=$?
            if [ "$rc" -ne 0 ] && grep -qF -- "$phrase" "$T/o"; then good
            else bad "$(basename "$f"): exit $rc, the error lacks '$phrase':"; head -c 600 "$T/o"; echo; fi
        done < "$T/cases"
    else bad "gguf_check.py malformed"; cat "$T/log"; fi
else
    echo "SKIP gguf: no Python environment with PyPI gguf (scripts/pyenv's check set; installed under CI=true): the comparison with gguf.quants.dequantize and the malformed files written by gguf-py"
fi

# ---- llama.cpp's own converter on golden/default ----
LCP=${LLAMA_CPP_DIR:-/tmp/lcp/lc}
if [ -f "$LCP/convert_hf_to_gguf.py" ] && [ -f "$LCP/conversion/hrm_text.py" ] && "$ROOT/scripts/pyenv" --have oracle 2>/dev/null; then
    OPY=$("$ROOT/scripts/pyenv" --oracle 2>/dev/null)
    D=$ROOT/golden/default
    head -n 16 "$D/heldout.jsonl" > "$T/h16.jsonl"
    ref=$(nll_mean "$(nll "$D" "$T/h16.jsonl")")
    for t in bf16 f32 f16; do
        if "$OPY" "$ROOT/scripts/llamacpp/convert.py" "$LCP" "$D" --outtype "$t" --outfile "$T/d-$t.gguf" >"$T/conv.log" 2>&1; then
            m=$(nll_mean "$(nll "$T/d-$t.gguf" "$T/h16.jsonl")")
            tol=0; [ "$t" = f16 ] && tol=0.0001
            if near "$m" "$ref" "$tol"; then good; else bad "golden/default converted to $t: nll_mean $m, safetensors $ref"; fi
        else bad "convert.py --outtype $t"; tail -n 5 "$T/conv.log"; fi
    done
else
    echo "SKIP gguf: no llama.cpp source tree with conversion/hrm_text.py at $LCP (set LLAMA_CPP_DIR) or no oracle set: golden/default through llama.cpp's converter not run"
fi

echo "gguf: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
