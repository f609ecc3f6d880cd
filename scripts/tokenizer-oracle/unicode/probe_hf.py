#!/usr/bin/env python3
"""probe_hf.py TOKENIZER_JSON > hf.txt — how HF tokenizers (Oniguruma's Unicode tables) splits five
probe strings per code point with the fix_mistral_regex pre-tokenizer: the piece counts of
"!!"+c, c+"Aa", "a"+c+"a", c+c and "!"+c+"a". probe-pcre2.c prints the same for frigg's PCRE2 regex."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import lib  # noqa: E402

tok, _ = lib.load(sys.argv[1], True)
pt = tok.pre_tokenizer


def n(s):
    return len(pt.pre_tokenize_str(s))


out = []
for lo, hi in ((0, 0x3FFFF), (0xE0000, 0xE0FFF)):
    for cp in range(lo, hi + 1):
        if 0xD800 <= cp <= 0xDFFF or cp == 0x20:
            continue
        c = chr(cp)
        t = [n("!!" + c), n(c + "Aa"), n("a" + c + "a"), n(c + c), n("!" + c + "a")]
        out.append("%x %s" % (cp, "".join(map(str, t))))
sys.stdout.write("\n".join(out) + "\n")
