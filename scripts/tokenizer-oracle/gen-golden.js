#!/usr/bin/env node
// gen-golden.js — golden token-id vectors from HF tokenizers (npm tokenizers@0.23.2) for
// tests/test_tokenizer.c. Writes gzip'd JSON lines:
//   line 1: {"tokenizer": REF, "sha256": ..., "mode": "default"|"hf_regex", "oracle": "tokenizers@0.23.2",
//            "vocab_size": N, "seed": S}
//   then per case: {"src": "da"|"en", "line": L, "ids": [...], "dec": null|"..."}   (corpus lines; the
//            text is read back from the corpus file, so it is not stored twice). To keep the files
//            small, only every 50th corpus line stores its ids; the others store "n" (the id count)
//            and "h": the first 16 hex digits of sha256 over the ids as uint32 little-endian.
//   or           {"src": "gen", "text": "...", "ids": [...], "dec": null|"..."}
//   or           {"src": "ids", "ids": [...], "dec": "..."}   (decode only: random id sequences rich in
//                 byte-fallback tokens, valid and invalid UTF-8 runs, and ids out of the vocab)
// "dec" is HF's decode(ids, skip_special_tokens=false), null when it equals the input text.
// REF names the tokenizer for the test: "shared:<path under FRIGG_SHARED>" or "root:<path in repo>".
//
// usage: gen-golden.js --tokenizer FILE --ref REF [--hf-regex] [--corpus DIR] [--count N]
//                      [--seed S] --out OUT.jsonl.gz
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const crypto = require('crypto');
const lib = require('./lib');

function parseArgs(argv) {
  const a = { count: 10000, decodeCount: 2000, seed: 1, hfRegex: false };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--tokenizer') a.tokenizer = argv[++i];
    else if (k === '--ref') a.ref = argv[++i];
    else if (k === '--hf-regex') a.hfRegex = true;
    else if (k === '--corpus') a.corpus = argv[++i];
    else if (k === '--count') a.count = parseInt(argv[++i], 10);
    else if (k === '--decode-count') a.decodeCount = parseInt(argv[++i], 10);
    else if (k === '--long-runs') a.longRuns = true;
    else if (k === '--seed') a.seed = parseInt(argv[++i], 10);
    else if (k === '--out') a.out = argv[++i];
    else { console.error(`gen-golden: unknown argument ${k}`); process.exit(2); }
  }
  if (!a.tokenizer || !a.ref || !a.out) {
    console.error('usage: gen-golden.js --tokenizer FILE --ref REF [--hf-regex] [--corpus DIR] [--count N] [--seed S] --out OUT.jsonl.gz');
    process.exit(2);
  }
  return a;
}

function idsHash(ids) {
  const buf = Buffer.alloc(ids.length * 4);
  ids.forEach((id, k) => buf.writeUInt32LE(id, k * 4));
  return crypto.createHash('sha256').update(buf).digest('hex').slice(0, 16);
}

async function main() {
  const a = parseArgs(process.argv);
  const { tok, sha256 } = lib.load(a.tokenizer, a.hfRegex);
  const out = [];
  out.push(JSON.stringify({ tokenizer: a.ref, sha256, mode: a.hfRegex ? 'hf_regex' : 'default',
    oracle: 'tokenizers@0.23.2', vocab_size: tok.getVocabSize(true), seed: a.seed }));
  let n = 0;
  if (a.corpus) {
    for (const lang of ['da', 'en']) {
      const lines = fs.readFileSync(path.join(a.corpus, `${lang}.txt`), 'utf8').split('\n');
      if (lines[lines.length - 1] === '') lines.pop();
      for (let i = 0; i < lines.length; i++) {
        const ids = await lib.encode(tok, lines[i]);
        const dec = await lib.decode(tok, ids);
        const d = dec === lines[i] ? null : dec;
        if (i % 50 === 0) out.push(JSON.stringify({ src: lang, line: i + 1, ids, dec: d }));
        else out.push(JSON.stringify({ src: lang, line: i + 1, n: ids.length, h: idsHash(ids), dec: d }));
        n++;
      }
    }
  }
  const r = lib.rng(a.seed);
  for (let i = 0; i < a.count; i++) {
    const text = lib.genString(r);
    const ids = await lib.encode(tok, text);
    const dec = await lib.decode(tok, ids);
    out.push(JSON.stringify({ src: 'gen', text, ids, dec: dec === text ? null : dec }));
    n++;
  }
  // --long-runs: runs long enough to exhaust a regex engine's backtracking stack
  if (a.longRuns) {
    for (const unit of [' ', '!', 'a', 'A', 'aA', '\t', '\n', ' \n', '1', '😊', 'æ', '.,', '<bos>', '▁']) {
      for (const reps of [3000, 40000]) {
        const text = unit.repeat(reps);
        const ids = await lib.encode(tok, text);
        const dec = await lib.decode(tok, ids);
        out.push(JSON.stringify({ src: 'gen', text, ids, dec: dec === text ? null : dec }));
        n++;
      }
    }
  }
  // decode-only cases: byte tokens (UTF-8 lead and continuation bytes, ASCII, invalid bytes),
  // ordinary ids, added tokens, ids past the vocab
  const vsize = tok.getVocabSize(true);
  const byteIds = [];
  for (let b = 0; b < 256; b++) {
    const id = tok.tokenToId('<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>');
    if (id !== null && id !== undefined) byteIds.push([b, id]);
  }
  const pickByte = (lo, hi) => {
    const c = byteIds.filter(([b]) => b >= lo && b <= hi);
    return c.length ? c[Math.floor(r() * c.length)][1] : Math.floor(r() * vsize);
  };
  for (let i = 0; i < a.decodeCount; i++) {
    const len = 1 + Math.floor(r() * 16);
    const ids = [];
    for (let k = 0; k < len; k++) {
      const x = r();
      if (x < 0.2) ids.push(pickByte(0xC2, 0xF4));
      else if (x < 0.45) ids.push(pickByte(0x80, 0xBF));
      else if (x < 0.55) ids.push(pickByte(0x00, 0x7F));
      else if (x < 0.6) ids.push(pickByte(0xF5, 0xFF));
      else if (x < 0.65) ids.push(vsize + Math.floor(r() * 5));
      else ids.push(Math.floor(r() * vsize));
    }
    out.push(JSON.stringify({ src: 'ids', ids, dec: await lib.decode(tok, ids) }));
    n++;
  }
  fs.writeFileSync(a.out, zlib.gzipSync(out.join('\n') + '\n', { level: 9 }));
  console.error(`gen-golden: ${n} cases → ${a.out}`);
}

main().catch((e) => { console.error(`gen-golden: ${e.stack || e}`); process.exit(1); });
