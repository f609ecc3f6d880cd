#!/bin/sh
# layering — common/ is a stack of rooms: a folder may include only itself and the folders below it, and a
# folder's private headers (the *_internal.h and tok_load.h kind) only from inside it. The tokenizer never sees
# an engine, the engines never see the scheduler, the wire format or an evaluation; a change that breaks this
# fails here. The order, lowest first, with what each may include:
#   base       (util, strbuf, threadpool, gpu_state)                       nothing
#   model      (config, safetensors, model, quant, compressed-tensors, random models)      base
#   tokenizer  (tokenizer.json, BPE, pre-tokenizer, decoding)              base
#   chat       (chat template, tool declarations, tool-call parsing)       base
#   grammar    (JSON Schema -> grammar, the recogniser, token masks)      tokenizer base
#   engine     (the step interface, CPU and CUDA engines, ops, GEMM, sampler)   base model (and kernels/)
#   run        (per-sequence generation, scheduler, requests, session, OpenAI wire format, CLI)   all above
#   eval       (nll, kl, gsm8k)                                            all above
# cmd/ and tests/ stand on top; they may include any door but not a private header (tests may: they test them).
cd "${FRIGG_ROOT:-.}" || exit 1
allowed() { # folder -> folders it may include
    case $1 in
        base) echo "base" ;;
        model | tokenizer | chat) echo "$1 base" ;;
        engine) echo "engine model base" ;;
        grammar) echo "grammar tokenizer base" ;;
        run) echo "run engine grammar chat tokenizer model base" ;;
        eval) echo "eval run engine grammar chat tokenizer model base" ;;
        *) echo "" ;;
    esac
}
PRIVATE="chat/chat_internal.h tokenizer/tok_internal.h tokenizer/tok_load.h grammar/gram_internal.h"
pass=0; fail=0
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
for d in common/*/; do
    d=${d%/}; f=${d#common/}
    [ -n "$(allowed "$f")" ] || { bad "common/$f is a folder this test does not know (add it to the order above)"; continue; }
done
[ -z "$(find common -maxdepth 1 -type f -name '*.[ch]')" ] || bad "source files directly in common/ (each belongs to a folder): $(find common -maxdepth 1 -type f -name '*.[ch]' | tr '\n' ' ')"
for src in common/*/*.c common/*/*.h; do
    here=$(basename "$(dirname "$src")")
    ok=$(allowed "$here")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src"); do
        case $inc in
            ../../kernels/*) [ "$here" = engine ] || bad "$src includes $inc (only engine/ reaches kernels/)"; continue ;;
            */*) to=${inc%%/*} ;;
            *) to=$here
               [ -f "common/$here/$inc" ] || { bad "$src includes \"$inc\", which is not in common/$here/ (name the folder)"; continue; } ;;
        esac
        case " $ok " in
            *" $to "*) pass=$((pass + 1)) ;;
            *) bad "$src (common/$here) includes $inc: $here may include only: $ok" ;;
        esac
        for p in $PRIVATE; do
            [ "$inc" = "$p" ] && [ "$to" != "$here" ] && bad "$src includes $p, private to common/${p%%/*}"
        done
    done
done
for src in cmd/*.c kernels/*.h kernels/*.cu kernels/*.cuh kernels/dev/*.cu; do
    for p in $PRIVATE; do
        if grep -q "#include \"$p\"" "$src"; then bad "$src includes $p, private to common/${p%%/*}"; else pass=$((pass + 1)); fi
    done
done
# The check itself must be able to fail: the same check on a copy with a planted upward include (the tokenizer
# reaching an engine) has to report it. (-L: a common/ that is a link, as in a copied tree, is copied, not linked.)
if [ -z "${LAYERING_INNER:-}" ]; then
    t=$(mktemp -d) && mkdir -p "$t/cmd" "$t/kernels/dev" && cp -RL common "$t/" &&
        echo '#include "engine/backend.h"' >> "$t/common/tokenizer/tokenizer.c"
    if out=$(LAYERING_INNER=1 FRIGG_ROOT=$t sh "$0" 2>&1); then
        bad "a planted include of engine/backend.h in common/tokenizer/ was not found"
    elif echo "$out" | grep -q "common/tokenizer/tokenizer.c (common/tokenizer) includes engine/backend.h"; then
        pass=$((pass + 1))
    else
        bad "the planted include was reported wrongly: $out"
    fi
    rm -rf "$t"
fi
echo "layering: $pass passed, $fail failed"
[ "$fail" = 0 ]
