#!/usr/bin/env node
// bench-hf.js — HF's side of scripts/bench-tokenizer (npm tokenizers@0.23.2, timed inside node so
// node's own start-up is not counted): Tokenizer.fromFile, then every corpus line encoded one call
// at a time (awaited in turn, as frigg's bench does), then the same lines through encodeBatch
// (HF's multi-threaded batch path).
// usage: bench-hf.js TOKENIZER_JSON HF_REGEX(0|1) REPEATS CORPUS_FILE...
'use strict';
const fs = require('fs');
const lib = require('./lib');

function stats(t) {
  const s = [...t].sort((a, b) => a - b);
  return { ms_median: +s[Math.floor(s.length / 2)].toFixed(1), ms_min: +s[0].toFixed(1), ms_max: +s[s.length - 1].toFixed(1) };
}
const now = () => Number(process.hrtime.bigint()) / 1e6;

async function main() {
  const [file, hfArg, repArg, ...corpus] = process.argv.slice(2);
  const hf = hfArg === '1', reps = Math.max(1, parseInt(repArg, 10));
  const { Tokenizer } = lib.hf();
  const raw = hf ? JSON.stringify(lib.patchMistral(JSON.parse(fs.readFileSync(file, 'utf8')))) : null;
  let tok;
  const tl = [];
  for (let r = 0; r < reps; r++) {
    const t0 = now();
    tok = hf ? Tokenizer.fromString(raw) : Tokenizer.fromFile(file);
    tl.push(now() - t0);
  }
  console.log(JSON.stringify({ bench: 'tokenizer_load', impl: 'hf-npm', file, hf_regex: hf ? 1 : 0,
    note: hf ? 'fromString of the patched JSON (JSON.parse/stringify not timed)' : 'fromFile', ...stats(tl), repeats: reps }));
  const lines = [];
  let bytes = 0;
  for (const f of corpus) {
    const ls = fs.readFileSync(f, 'utf8').split('\n');
    if (ls[ls.length - 1] === '') ls.pop();
    for (const l of ls) { lines.push(l); bytes += Buffer.byteLength(l); }
  }
  for (const mode of ['sequential', 'batch']) {
    const te = [];
    let tokens = 0;
    for (let r = 0; r < reps; r++) {
      tokens = 0;
      const t0 = now();
      if (mode === 'sequential') {
        for (const l of lines) tokens += (await tok.encode(l, null, { addSpecialTokens: false })).getIds().length;
      } else {
        const enc = await tok.encodeBatch(lines, { addSpecialTokens: false });
        for (const e of enc) tokens += e.getIds().length;
      }
      te.push(now() - t0);
    }
    const s = stats(te);
    console.log(JSON.stringify({ bench: 'tokenizer_encode_corpus', impl: `hf-npm-${mode}`, file, hf_regex: hf ? 1 : 0,
      lines: lines.length, bytes, tokens, threads: mode === 'batch' ? require('os').cpus().length : 1, ...s,
      MB_per_s: +(bytes / 1e3 / s.ms_median).toFixed(2), repeats: reps }));
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
