"""lib.py — shared by the tokenizer oracle scripts: load a tokenizer.json with HF's own library
(PyPI tokenizers, the Python binding of the Rust crate, pinned in scripts/py/requirements-check.txt),
optionally with transformers' fix_mistral_regex rewrite, and a seeded generator of hostile test
strings. The generator is bit-exact with the one the committed golden vectors were first made with
(mulberry32 over IEEE doubles), so regenerating them reproduces every case."""
import hashlib
import json
import sys

ORACLE = "tokenizers@0.23.2"


def hf():
    try:
        import tokenizers
    except ImportError:
        sys.exit("tokenizer-oracle: HF tokenizers is missing; run it with the project's environment:\n"
                 "  $(scripts/pyenv) scripts/tokenizer-oracle/...")
    want = ORACLE.split("@")[1]
    if tokenizers.__version__ != want:
        sys.exit(f"tokenizer-oracle: tokenizers {tokenizers.__version__} found, {want} pinned "
                 "(scripts/py/requirements-check.txt)")
    return tokenizers


# The regex of transformers' _patch_mistral_regex (TOKENIZER.md §3), verbatim.
MISTRAL_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                 r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def patch_mistral(doc):
    """transformers wraps the pre-tokenizer as Sequence([Split(Regex, "isolated"), current]) (or
    replaces element 0 of an existing Sequence); this is the JSON that Split(pattern=Regex(...),
    behavior="isolated") serializes to, so the library's own deserializer builds the same object."""
    split = {"type": "Split", "pattern": {"Regex": MISTRAL_REGEX}, "behavior": "Isolated", "invert": False}
    cur = doc.get("pre_tokenizer")
    if cur is None:
        raise ValueError("hf_regex: no pre_tokenizer, transformers would not patch")
    if cur["type"] == "Sequence":
        doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split] + cur["pretokenizers"][1:]}
    elif cur["type"] == "Metaspace":
        raise ValueError("hf_regex: Metaspace would become ByteLevel; not supported by frigg")
    else:
        doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, cur]}
    return doc


def patched_json(path):
    with open(path, "rb") as f:
        return json.dumps(patch_mistral(json.loads(f.read().decode("utf-8"))), ensure_ascii=False)


def load(path, hf_regex):
    """(Tokenizer, sha256 of the file's bytes)."""
    with open(path, "rb") as f:
        raw = f.read()
    Tokenizer = hf().Tokenizer
    if hf_regex:
        tok = Tokenizer.from_str(json.dumps(patch_mistral(json.loads(raw.decode("utf-8"))), ensure_ascii=False))
    else:
        tok = Tokenizer.from_file(path)
    return tok, hashlib.sha256(raw).hexdigest()


def encode(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def decode(tok, ids):
    return tok.decode(ids, skip_special_tokens=False)


def read_lines(path):
    """A corpus file's lines, split on '\\n' only (no newline translation), a final empty one dropped."""
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _imul(a, b):
    return (a * b) & 0xFFFFFFFF


def rng(seed):
    """mulberry32: a small seeded PRNG returning doubles in [0, 1), so the committed vectors can be
    regenerated bit for bit (32-bit arithmetic as in its reference form)."""
    state = [seed & 0xFFFFFFFF]

    def r():
        state[0] = (state[0] + 0x6D2B79F5) & 0xFFFFFFFF
        t = state[0]
        t = _imul(t ^ (t >> 15), t | 1)
        t ^= (t + _imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296
    return r


def floor_mul(r, n):
    """floor(r() * n) for a double r() in [0, 1): the index draw every list pick uses."""
    return int(r() * n)


PIECES = {
    "danish": ['æ', 'ø', 'å', 'Æ', 'Ø', 'Å', 'Hvad', 'hedder', 'Danmarks', 'hovedstad', 'hjælpe', 'Kjøbenhavn',
               'Fyrtøiet', 'øl', 'blåbærgrød', 'Ærø', 'Østerbro', 'Åbenrå', 'sø', 'går', 'København', 'naïve',
               'Straße'],
    "english": ['Hello', 'world', 'The', 'quick', 'brown', 'fox', 'token', 'It', 'is', 'a', 'truth', "don't",
                'HTTP', 'example.com', 'foo_bar::x->y', 'x', 'FF', 'xFF', 'ABCdef', 'camelCase', 'SHOUT', 'i.e.'],
    "emoji": ['😊', '🧑🏽‍💻', '🚀', '🫠', '👍🏿', '❤️', '🇩🇰', '👨‍👩‍👧‍👦', '🏳️‍🌈', '\U0001F3FB', '🤖', '©', '™'],
    "cjk": ['中文', '日本語', '한국어', 'ひらがな', 'カタカナ', '你好，世界！', '漢字', '𠀋', '〜', '。'],
    "scripts": ['مرحبا بالعالم', 'שלום', 'नमस्ते', 'สวัสดี', 'Привет', 'κόσμος', 'Ελληνικά', 'ქართული', 'አማርኛ'],
    "combining": ['e\u0301', 'a\u0308', '\u0301', 'o\u0302\u0323', 'Z\u0351\u0310\u0327', '\u20DD', 'n\u0303'],
    "space": [' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', '\r', '\u00A0', '\u2009', '\u3000', '\u0085', '\u200B',
              '\u2028', '\u202F', '\u1680', '\u000B', '\u000C', '\t\t', ' \n ', '\u200D'],
    "bytes": ['<0xFF>', '<0x0A>', '<0x41>', '<0xff>', '<0xGG>', '<0x', '0xFF', '<0x20>', '<0xE2><0x96><0x81>'],
    "special": ['<bos>', '<eos>', '<pad>', '<unk>', '<mask>', '<|turn>', '<turn|>', '<|"|>', '<|tool_call>',
                '<tool_call|>', '<|tool_response>', '<tool_response|>', '<|tool>', '<tool|>', '<|channel>',
                '<channel|>', '<|think|>', '<|image|>', '<s>', '</s>', '<|user|>', '<|assistant|>', '<|end|>',
                '<|system|>', '<|endoftext|>', '<|tur', '<bos', '<<bos>>', '<|turn|>', 'user\n', 'model\n'],
    # words, added tokens and delimiters of the synthetic tokenizers (make-synthetic.py)
    "synthetic": ['hello', ' world', 'world', '[MASK]', ' [MASK] ', 'x[MASK]y', '<|x|>', 'æble', 'æbler', 'fox',
                  'foxes', 'the', 'a-b', '--', '1.5', '..', '...', 'x,y', ',,', '12', 'abc', 'ab', '\U0001F600',
                  '</s>  ', '  <s>  '],
    "odd": ['\u0000', '\u0001', '\u001F', '\u007F', '\uFFFD', '\uFFFE', '\uFFFF', '\U0010FFFD', '\u0378',
            '\U000E0001', '\U0010FFFF', '▁', '▁▁', ' ▁', '\u2581x', '...', '!!!', '—', '“quoted”', '‘x’', '$%^&*',
            'a/b\\c', '1234567890', '1.23', '-4e5', '½', '€', '§', '†', '«»', '()', '{}', '[]', '<>', '#', '//',
            '<?'],
}
CATS = list(PIECES)
SEPS = ['', ' ', ' ', '  ', '\n', '\t', '', ' ']
RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F),
          (0xE00, 0xE7F), (0x1E00, 0x1FFF), (0x2000, 0x206F), (0x2100, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x9FFF),
          (0xAC00, 0xD7A3), (0xE000, 0xE0FF), (0xFB00, 0xFFFD), (0x10000, 0x1FAFF), (0x20000, 0x2A6DF),
          (0xE0000, 0xE007F), (0xF0000, 0x10FFFD), (0x0, 0x1F)]


def random_code_point(r):
    lo, hi = RANGES[floor_mul(r, len(RANGES))]
    return chr(lo + floor_mul(r, hi - lo + 1))


def gen_string(r):
    """One generated string: 1..10 pieces from the categories above, or random code points."""
    n = 1 + floor_mul(r, 10)
    s = []
    for _ in range(n):
        if r() < 0.15:
            k = 1 + floor_mul(r, 4)
            for _ in range(k):
                s.append(random_code_point(r))
        else:
            cat = PIECES[CATS[floor_mul(r, len(CATS))]]
            s.append(cat[floor_mul(r, len(cat))])
        s.append(SEPS[floor_mul(r, len(SEPS))])
    return "".join(s)


def dumps(obj):
    """One JSON line as the golden files hold it: no spaces, non-ASCII as UTF-8."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
