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
  const a = { count: 10000, seed: 1, hfRegex: false };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--tokenizer') a.tokenizer = argv[++i];
    else if (k === '--ref') a.ref = argv[++i];
    else if (k === '--hf-regex') a.hfRegex = true;
    else if (k === '--corpus') a.corpus = argv[++i];
    else if (k === '--count') a.count = parseInt(argv[++i], 10);
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
  fs.writeFileSync(a.out, zlib.gzipSync(out.join('\n') + '\n', { level: 9 }));
  console.error(`gen-golden: ${n} cases → ${a.out}`);
}

main().catch((e) => { console.error(`gen-golden: ${e.stack || e}`); process.exit(1); });
