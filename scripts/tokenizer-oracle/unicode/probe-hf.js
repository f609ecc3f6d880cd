// probe-hf.js TOKENIZER_JSON > hf.txt — how HF tokenizers (Oniguruma's Unicode tables) splits four
// probe strings per code point with the fix_mistral_regex pre-tokenizer: the piece counts of
// "!!"+c, c+"Aa", "a"+c+"a", c+c and "!"+c+"a". probe-pcre2.c prints the same for frigg's PCRE2 regex.
const path = require('path');
const lib = require(path.join(__dirname, '..', 'lib.js'));
const {tok} = lib.load(process.argv[2], true);
const pt = tok.getPreTokenizer();
const n = (s) => pt.preTokenizeString(s).length;
const out = [];
const ranges = [[0, 0x3FFFF], [0xE0000, 0xE0FFF]];
for (const [lo, hi] of ranges) for (let cp = lo; cp <= hi; cp++) {
  if (cp >= 0xD800 && cp <= 0xDFFF) continue;
  if (cp === 0x20) continue;
  const c = String.fromCodePoint(cp);
  const t = [n('!!' + c), n(c + 'Aa'), n('a' + c + 'a'), n(c + c), n('!' + c + 'a')];
  out.push(cp.toString(16) + ' ' + t.join(''));
}
process.stdout.write(out.join('\n') + '\n');
