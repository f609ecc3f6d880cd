#!/usr/bin/env python3
"""make-synthetic.py — small tokenizer.json files that exercise what the three real files do not:
added-token flags (single_word, lstrip, rstrip, normalized, duplicates, empty, out-of-vocab ids),
legacy merges with a "#version" line, duplicate vocab keys, \\u escapes with surrogate pairs,
Metaspace (first/always, split on/off), every Split behaviour (string and regex, invert), unk without
byte fallback (fused and not), ignore_merges, the Strip and Metaspace decoders, and no decoder.
gen-all turns each into golden vectors with HF's library. Writes golden/tokenizer/synthetic/."""
import json
import os
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else 'golden/tokenizer/synthetic'
WORDS = ['the', 'hello', 'world', 'token', 'hej', 'verden', 'and', 'æble', 'smørrebrød', 'quick', 'fox', 'is', 'a',
         'truth', 'ab', 'abc', 'x', 'y']
SP = '\u2581'


def base_vocab(bytes_=True, skip_bytes=()):
    vocab, merges = {}, []

    def add(t):
        if t not in vocab:
            vocab[t] = len(vocab)
    for t in ['<unk>', '<s>', '</s>']:
        add(t)
    if bytes_:
        for b in range(256):
            if b not in skip_bytes:
                add('<0x%02X>' % b)
    for c in [chr(c) for c in range(0x21, 0x7F)] + [SP, 'æ', 'ø', 'å', 'Æ', 'Ø', 'Å', '\n', '\t', '—', '“', '”']:
        add(c)
    for w in WORDS:  # prefix merges: ▁ t → ▁t, ▁t h → ▁th, ...; and the same without ▁
        for word in (SP + w, w):
            cur = word[0]
            for ch in word[1:]:
                if (cur, ch) not in merges:
                    merges.append((cur, ch))
                add(cur + ch)
                cur = cur + ch
    if (SP, SP) not in merges:
        merges.append((SP, SP))
        add(SP + SP)
    return vocab, merges


def added(id_, content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True):
    return {'id': id_, 'content': content, 'single_word': single_word, 'lstrip': lstrip, 'rstrip': rstrip,
            'normalized': normalized, 'special': special}


def bpe(vocab, merges, legacy=False, **kw):
    m = {'type': 'BPE', 'dropout': None, 'unk_token': '<unk>', 'continuing_subword_prefix': None,
         'end_of_word_suffix': None, 'fuse_unk': True, 'byte_fallback': True, 'ignore_merges': False,
         'vocab': vocab, 'merges': ['#version: 0.2'] + ['%s %s' % p for p in merges] if legacy else [list(p) for p in merges]}
    m.update(kw)
    return m


def doc(model, normalizer=None, pre=None, decoder=None, added_tokens=()):
    return {'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': list(added_tokens),
            'normalizer': normalizer, 'pre_tokenizer': pre, 'post_processor': None, 'decoder': decoder, 'model': model}


REPLACE = {'type': 'Replace', 'pattern': {'String': ' '}, 'content': SP}
GEMMA_DEC = {'type': 'Sequence', 'decoders': [{'type': 'Replace', 'pattern': {'String': SP}, 'content': ' '},
                                              {'type': 'ByteFallback'}, {'type': 'Fuse'}]}


def write(name, d, dup_key=None):
    text = json.dumps(d, ensure_ascii=True)  # \u escapes, surrogate pairs for astral characters
    if dup_key:  # a duplicate vocab key: serde (and frigg) keep the last value
        k, v = dup_key
        text = text.replace('"vocab": {', '"vocab": {%s: %d, ' % (json.dumps(k), v), 1)
    with open(os.path.join(OUT, name + '.json'), 'w') as f:
        f.write(text)


def main():
    os.makedirs(OUT, exist_ok=True)
    v, m = base_vocab()
    v['\U0001F600'] = len(v)  # an astral token, written as a surrogate pair
    n = len(v)
    flags = [added(1, '<s>', rstrip=True), added(2, '</s>', lstrip=True, rstrip=True, special=False),
             added(0, '[MASK]', single_word=True, lstrip=True), added(0, 'hello', normalized=True, special=False),
             added(0, ' world', normalized=True, special=False), added(0, '<|x|>'), added(0, ''),
             added(0, '<|x|>', rstrip=True), added(0, 'æble', single_word=True, special=False)]
    write('flags', doc(bpe(v, m, legacy=True), REPLACE,
                       {'type': 'Split', 'pattern': {'String': ' '}, 'behavior': 'MergedWithPrevious', 'invert': False},
                       GEMMA_DEC, flags), dup_key=('x', v['y']))
    v2, m2 = base_vocab(bytes_=False)
    write('metaspace', doc(bpe(v2, m2, byte_fallback=False, fuse_unk=False, ignore_merges=True), None,
                           {'type': 'Metaspace', 'replacement': SP, 'prepend_scheme': 'first', 'split': True},
                           {'type': 'Metaspace', 'replacement': SP, 'prepend_scheme': 'first', 'split': True},
                           [added(n + 5, '<s>', rstrip=True), added(n + 6, 'fox', single_word=True, normalized=True)]))
    write('metaspace-nosplit', doc(bpe(v2, m2, byte_fallback=False), None,
                                   {'type': 'Metaspace', 'replacement': SP, 'prepend_scheme': 'always', 'split': False},
                                   {'type': 'Metaspace', 'replacement': SP, 'prepend_scheme': 'always', 'split': False}))
    v3, m3 = base_vocab()
    splits = {'type': 'Sequence', 'pretokenizers': [
        {'type': 'Split', 'pattern': {'String': '-'}, 'behavior': 'Removed', 'invert': False},
        {'type': 'Split', 'pattern': {'Regex': '[0-9]+'}, 'behavior': 'Isolated', 'invert': False},
        {'type': 'Split', 'pattern': {'String': '.'}, 'behavior': 'Contiguous', 'invert': False},
        {'type': 'Split', 'pattern': {'String': ','}, 'behavior': 'MergedWithNext', 'invert': False},
        {'type': 'Split', 'pattern': {'String': SP}, 'behavior': 'MergedWithNext', 'invert': True}]}
    write('splits', doc(bpe(v3, m3), {'type': 'Sequence', 'normalizers': [{'type': 'Prepend', 'prepend': SP}, REPLACE]},
                        splits, {'type': 'Sequence', 'decoders': GEMMA_DEC['decoders'] +
                                 [{'type': 'Strip', 'content': ' ', 'start': 2, 'stop': 0}]},
                        [added(1, '<s>', lstrip=True)]))
    v4, m4 = base_vocab(skip_bytes=range(0x80, 0xC0))  # continuation bytes missing: no unk either
    write('nodecoder', doc(bpe(v4, m4, unk_token=None), REPLACE, None, None, [added(2, '</s>', rstrip=True)]))


main()
