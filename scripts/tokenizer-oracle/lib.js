// lib.js — shared by the tokenizer oracle scripts: load a tokenizer.json with HF's own library
// (npm tokenizers@0.23.2, the Node binding of the Rust crate), optionally with transformers'
// fix_mistral_regex rewrite, and a seeded generator of hostile test strings.
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

function hf() {
  try {
    return require(path.join(__dirname, 'node_modules', 'tokenizers'));
  } catch (e) {
    console.error('tokenizer-oracle: npm tokenizers is missing; run\n' +
      '  npm install --prefix scripts/tokenizer-oracle tokenizers@0.23.2');
    process.exit(2);
  }
}

// The regex of transformers' _patch_mistral_regex (TOKENIZER.md §3), verbatim.
const MISTRAL_REGEX = String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

// transformers wraps the pre-tokenizer as Sequence([Split(Regex, "isolated"), current]) (or
// replaces element 0 of an existing Sequence). The npm binding's splitPreTokenizer() only takes a
// literal pattern, so the same object is built through the library's own deserializer instead:
// the JSON below is what Python's Split(pattern=Regex(...), behavior="isolated") serializes to.
function patchMistral(json) {
  const split = { type: 'Split', pattern: { Regex: MISTRAL_REGEX }, behavior: 'Isolated', invert: false };
  const cur = json.pre_tokenizer;
  if (cur == null) throw new Error('hf_regex: no pre_tokenizer, transformers would not patch');
  if (cur.type === 'Sequence') {
    json.pre_tokenizer = { type: 'Sequence', pretokenizers: [split, ...cur.pretokenizers.slice(1)] };
  } else if (cur.type === 'Metaspace') {
    throw new Error('hf_regex: Metaspace would become ByteLevel; not supported by frigg');
  } else {
    json.pre_tokenizer = { type: 'Sequence', pretokenizers: [split, cur] };
  }
  return json;
}

function load(file, hfRegex) {
  const raw = fs.readFileSync(file);
  const sha256 = crypto.createHash('sha256').update(raw).digest('hex');
  const { Tokenizer } = hf();
  let tok;
  if (hfRegex) tok = Tokenizer.fromString(JSON.stringify(patchMistral(JSON.parse(raw.toString('utf8')))));
  else tok = Tokenizer.fromFile(file);
  return { tok, sha256 };
}

async function encode(tok, text) {
  const e = await tok.encode(text, null, { addSpecialTokens: false });
  return Array.from(e.getIds());
}

async function decode(tok, ids) {
  return await tok.decode(ids, false);
}

// mulberry32: a small seeded PRNG, so the committed vectors can be regenerated bit for bit.
function rng(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = {
  danish: ['æ', 'ø', 'å', 'Æ', 'Ø', 'Å', 'Hvad', 'hedder', 'Danmarks', 'hovedstad', 'hjælpe', 'Kjøbenhavn',
    'Fyrtøiet', 'øl', 'blåbærgrød', 'Ærø', 'Østerbro', 'Åbenrå', 'sø', 'går', 'København', 'naïve', 'Straße'],
  english: ['Hello', 'world', 'The', 'quick', 'brown', 'fox', 'token', 'It', 'is', 'a', 'truth', "don't",
    'HTTP', 'example.com', 'foo_bar::x->y', 'x', 'FF', 'xFF', 'ABCdef', 'camelCase', 'SHOUT', 'i.e.'],
  emoji: ['😊', '🧑🏽‍💻', '🚀', '🫠', '👍🏿', '❤️', '🇩🇰', '👨‍👩‍👧‍👦', '🏳️‍🌈', '\u{1F3FB}', '🤖', '©', '™'],
  cjk: ['中文', '日本語', '한국어', 'ひらがな', 'カタカナ', '你好，世界！', '漢字', '𠀋', '〜', '。'],
  scripts: ['مرحبا بالعالم', 'שלום', 'नमस्ते', 'สวัสดี', 'Привет', 'κόσμος', 'Ελληνικά', 'ქართული', 'አማርኛ'],
  combining: ['e\u0301', 'a\u0308', '\u0301', 'o\u0302\u0323', 'Z\u0351\u0310\u0327', '\u20DD', 'n\u0303'],
  space: [' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', '\r', '\u00A0', '\u2009', '\u3000', '\u0085', '\u200B',
    '\u2028', '\u202F', '\u1680', '\u000B', '\u000C', '\t\t', ' \n ', '\u200D'],
  bytes: ['<0xFF>', '<0x0A>', '<0x41>', '<0xff>', '<0xGG>', '<0x', '0xFF', '<0x20>', '<0xE2><0x96><0x81>'],
  special: ['<bos>', '<eos>', '<pad>', '<unk>', '<mask>', '<|turn>', '<turn|>', '<|"|>', '<|tool_call>',
    '<tool_call|>', '<|tool_response>', '<tool_response|>', '<|tool>', '<tool|>', '<|channel>', '<channel|>',
    '<|think|>', '<|image|>', '<s>', '</s>', '<|user|>', '<|assistant|>', '<|end|>', '<|system|>',
    '<|endoftext|>', '<|tur', '<bos', '<<bos>>', '<|turn|>', 'user\n', 'model\n'],
  // words, added tokens and delimiters of the synthetic tokenizers (make-synthetic.py)
  synthetic: ['hello', ' world', 'world', '[MASK]', ' [MASK] ', 'x[MASK]y', '<|x|>', 'æble', 'æbler', 'fox', 'foxes',
    'the', 'a-b', '--', '1.5', '..', '...', 'x,y', ',,', '12', 'abc', 'ab', '\u{1F600}', '</s>  ', '  <s>  '],
  odd: ['\u0000', '\u0001', '\u001F', '\u007F', '\uFFFD', '\uFFFE', '\uFFFF', '\u{10FFFD}', '\u0378',
    '\u{E0001}', '\u{10FFFF}', '▁', '▁▁', ' ▁', '\u2581x', '...', '!!!', '—', '“quoted”', '‘x’', '$%^&*',
    'a/b\\c', '1234567890', '1.23', '-4e5', '½', '€', '§', '†', '«»', '()', '{}', '[]', '<>', '#', '//', '<?'],
};
const CATS = Object.keys(PIECES);
const SEPS = ['', ' ', ' ', '  ', '\n', '\t', '', ' '];

function randomCodePoint(r) {
  const ranges = [[0x20, 0x7E], [0xA0, 0x24F], [0x300, 0x36F], [0x370, 0x52F], [0x590, 0x6FF],
    [0x900, 0x97F], [0xE00, 0xE7F], [0x1E00, 0x1FFF], [0x2000, 0x206F], [0x2100, 0x2BFF], [0x3000, 0x30FF],
    [0x4E00, 0x9FFF], [0xAC00, 0xD7A3], [0xE000, 0xE0FF], [0xFB00, 0xFFFD], [0x10000, 0x1FAFF],
    [0x20000, 0x2A6DF], [0xE0000, 0xE007F], [0xF0000, 0x10FFFD], [0x0, 0x1F]];
  const [lo, hi] = ranges[Math.floor(r() * ranges.length)];
  return String.fromCodePoint(lo + Math.floor(r() * (hi - lo + 1)));
}

// One generated string: 1..10 pieces from the categories above, or random code points.
function genString(r) {
  const n = 1 + Math.floor(r() * 10);
  let s = '';
  for (let i = 0; i < n; i++) {
    if (r() < 0.15) {
      const k = 1 + Math.floor(r() * 4);
      for (let j = 0; j < k; j++) s += randomCodePoint(r);
    } else {
      const cat = PIECES[CATS[Math.floor(r() * CATS.length)]];
      s += cat[Math.floor(r() * cat.length)];
    }
    s += SEPS[Math.floor(r() * SEPS.length)];
  }
  return s;
}

module.exports = { hf, load, encode, decode, rng, genString, patchMistral, MISTRAL_REGEX };
