#!/usr/bin/env python3
"""convert.py LLAMA_CPP_DIR ARGS... — llama.cpp's own convert_hf_to_gguf.py with ARGS, run unchanged except for
one fallback: where its BPE pre-tokenizer check does not recognise the tokenizer (it hashes the ids of a fixed
string and knows DFM-Mimir's real tokenizer.json by that hash), the pre-tokenizer is named "gemma4", the one
llama.cpp gives DFM-Mimir. The project's test tokenizer (../shared/data/tokenizers/mimir-equivalent.tokenizer.json,
Gemma 3's with Gemma 4's names) runs the same normalizer/pre-tokenizer pipeline but encodes that string with other
ids, so the check refuses it. The fallback is printed on stderr (and nothing else changes), so a converted file's
provenance says it.
"""
import runpy
import sys

if len(sys.argv) < 3:
    sys.exit("usage: convert.py LLAMA_CPP_DIR convert_hf_to_gguf.py-arguments...")
root = sys.argv[1]
sys.path[:0] = [root, root + "/gguf-py"]
import conversion.base as base  # noqa: E402  (llama.cpp's own module, from LLAMA_CPP_DIR)

original = base.TextModel.get_vocab_base_pre


def get_vocab_base_pre(self, tokenizer):
    try:
        return original(self, tokenizer)
    except NotImplementedError:
        print("convert.py: BPE pre-tokenizer not recognised; named gemma4 (llama.cpp's DFM-Mimir pre-tokenizer)",
              file=sys.stderr)
        return "gemma4"


base.TextModel.get_vocab_base_pre = get_vocab_base_pre
sys.argv = [root + "/convert_hf_to_gguf.py"] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
