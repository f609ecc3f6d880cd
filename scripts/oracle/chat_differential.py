#!/usr/bin/env python3
"""Differential check of frigg's chat renderer against jinja2 on random conversations (a script,
not a test: it needs jinja2 and a built library). Random messages mix every role, content parts,
whitespace that Python's strip() does and does not remove, tool calls with random argument
values, tool messages with matching and non-matching ids, reasoning, legacy tool_responses, and
random tool schemas. For each: jinja2 renders (as training did) and frigg renders; the result is
a match, both failing, or frigg refusing a case it documents as unsupported (Python repr() of
non-ASCII strings inside lists/dicts, non-list `required`). Any mismatch, or frigg rendering what
jinja2 rejects, is printed and makes the exit status 1.

Usage (repository root, after make): python3 scripts/oracle/chat_differential.py [seed] [count] [build dir]
"""
import json
import os
import random
import subprocess
import sys

import jinja2

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 1
N = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
BUILD = sys.argv[3] if len(sys.argv) > 3 else "build"
SHARED = os.environ.get("FRIGG_SHARED", "../shared")
T = jinja2.Environment().from_string(open(SHARED + "/data/mimir/gemma4_native_chat.jinja", encoding="utf-8").read())
R = random.Random(SEED)
DRIVER = BUILD + "/chat_render_stdin"
subprocess.run(["cc", "-std=c11", "-O1", "-D_GNU_SOURCE", "-Icommon", "scripts/oracle/chat_render_stdin.c",
                BUILD + "/libfriggcore.a", "-ljansson", "-lm", "-o", DRIVER], check=True)
WS = [' ', '\n', '\t', '\u00a0', '\u3000', '\u200b', '\r\n', '\x1c', '\u2028', '']
WORDS = ['Hej', 'verden', 'æøå', 'ÆBLE', '😊', '中文', '<|channel>', '<channel|>', 'thought\n', '<|"|>', '"q"', "it's", '\\', 'İ', 'ß', 'x:y', '{', '}', ',', 'None', '0', 'a b']
def text():
    return ''.join(R.choice(WS) + R.choice(WORDS) for _ in range(R.randint(0, 4))) + R.choice(WS)
KEYS = ['a', 'B', 'b', 'A', '_x', 'Z', 'æble', 'Æble', 'øl', 'İd', 'id', 'ID', 'k1', 'K1', 'long_key_name', 'description', 'type', 'properties', 'required', 'nullable', 'items', 'enum']
def scalar():
    c = R.randint(0, 9)
    if c == 0: return None
    if c == 1: return R.choice([True, False])
    if c == 2: return R.randint(-10**15, 10**15)
    if c == 3: return R.choice([0.1, 1e-05, 1e20, -0.0, 2.5, 1e16, 123.456, 5e-324, R.random() * 10 ** R.randint(-20, 20)])
    if c == 4: return R.randint(-3, 3)
    return text()
def value(d=0):
    c = R.randint(0, 5)
    if d < 3 and c == 0: return [value(d + 1) for _ in range(R.randint(0, 3))]
    if d < 3 and c == 1: return {R.choice(KEYS): value(d + 1) for _ in range(R.randint(0, 3))}
    return scalar()
TYPES = ['string', 'STRING', 'integer', 'number', 'boolean', 'array', 'object', 'Object', None, 'null']
def prop(d=0):
    p = {}
    if R.random() < 0.7: p['type'] = R.choice(TYPES)
    if p.get('type') is None and 'type' in p: pass
    if R.random() < 0.5: p['description'] = R.choice([text(), '', None, 5])
    if R.random() < 0.3: p['enum'] = [R.choice(['a', 'b', 'c', 'Æ']) for _ in range(R.randint(0, 3))]
    if R.random() < 0.3: p['nullable'] = R.choice([True, False, 1, 0])
    if d < 2 and R.random() < 0.3:
        items = {}
        if R.random() < 0.7: items['type'] = R.choice(['string', 'object', ['string', 'null'], 'integer'])
        if R.random() < 0.4: items['properties'] = {R.choice(KEYS): prop(d + 1) for _ in range(R.randint(0, 3))}
        if R.random() < 0.3: items['required'] = [R.choice(KEYS)]
        if R.random() < 0.3: items[R.choice(['minItems', 'format', 'gone'])] = R.choice([1, 'x', None, [1, 'a']])
        p['items'] = items
    if d < 2 and R.random() < 0.3: p['properties'] = {R.choice(KEYS): prop(d + 1) for _ in range(R.randint(0, 3))}
    if R.random() < 0.2: p['required'] = [R.choice(KEYS) for _ in range(R.randint(0, 2))]
    if d < 2 and R.random() < 0.2: p[R.choice(KEYS)] = prop(d + 1)
    return p
def tool():
    f = {'name': R.choice(['f', 'get_weather', 'søg', 'g2'])}
    if R.random() < 0.8: f['description'] = R.choice([text(), None, ''])
    if R.random() < 0.8:
        params = {}
        if R.random() < 0.8: params['type'] = R.choice(['object', 'OBJECT', 'string'])
        if R.random() < 0.8: params['properties'] = {R.choice(KEYS): prop() for _ in range(R.randint(0, 4))}
        if R.random() < 0.5: params['required'] = [R.choice(KEYS) for _ in range(R.randint(0, 3))]
        f['parameters'] = params
    if R.random() < 0.15: f['response'] = R.choice([None, {'type': 'object', 'description': text()}, {'type': 'string'}])
    return {'type': 'function', 'function': f}
def content():
    c = R.randint(0, 6)
    if c == 0: return None
    if c == 1: return [dict({'type': 'text', 'text': text()}) if R.random() < 0.8 else {'type': R.choice(['image', 'audio', 'video'])} for _ in range(R.randint(0, 3))]
    return text()
def calls():
    return [{'id': R.choice(['c0', 'c1', 'c2', None]), 'type': 'function', 'function': {'name': R.choice(['f', 'g', 'søg']), 'arguments': R.choice([{R.choice(KEYS): value() for _ in range(R.randint(0, 4))}, {R.choice(KEYS): value() for _ in range(R.randint(0, 4))}, json.dumps({'a': 1}), 'raw'])}} for _ in range(R.randint(1, 3))]
def message(i):
    role = R.choice(['user', 'user', 'assistant', 'assistant', 'tool', 'system', 'developer', 'environment'])
    m = {'role': role}
    if R.random() < 0.9: m['content'] = content() if role != 'tool' else R.choice([text(), None, 3, [{'type': 'text', 'text': text()}]])
    if role == 'assistant' and R.random() < 0.5: m['tool_calls'] = calls()
    if role == 'assistant' and R.random() < 0.2: m[R.choice(['reasoning', 'reasoning_content'])] = text()
    if role == 'assistant' and R.random() < 0.07: m['tool_responses'] = [{'name': R.choice(['f', 'g']), 'response': value()}]
    if role in ('tool', 'environment'):
        if R.random() < 0.8: m['tool_call_id'] = R.choice(['c0', 'c1', 'c2', 'zz'])
        if R.random() < 0.5: m['name'] = R.choice(['f', 'named'])
    return m
def render(r):
    return T.render(messages=r['messages'], tools=r['tools'] or [], add_generation_prompt=r['add_generation_prompt'],
                    enable_thinking=False, bos_token='<bos>', eos_token='<eos>')


recs = []
for _ in range(N):
    msgs = [message(i) for i in range(R.randint(1, 7))]
    tools = [tool() for _ in range(R.randint(0, 2))] if R.random() < 0.4 else None
    recs.append({'messages': msgs, 'tools': tools, 'add_generation_prompt': R.random() < 0.6})
inp = '\n'.join(json.dumps(r) for r in recs) + '\n'
p = subprocess.run([DRIVER], input=inp.encode(), capture_output=True)
outs = [json.loads(l) for l in p.stdout.decode().split('\n') if l]  # not splitlines(): U+2028 is raw in the JSON
assert len(outs) == N, (len(outs), p.stderr.decode()[-2000:])
stats = {'match': 0, 'both_err': 0, 'frigg_refused': 0, 'MISMATCH': 0, 'FRIGG_RENDERED_JINJA_ERR': 0}
refusals = {}
for r, o in zip(recs, outs):
    try:
        want = render(r)
    except Exception as e:
        want = None; jerr = '%s: %s' % (type(e).__name__, e)
    if want is None:
        if 'err' in o: stats['both_err'] += 1
        else:
            stats['FRIGG_RENDERED_JINJA_ERR'] += 1
            if stats['FRIGG_RENDERED_JINJA_ERR'] < 4: print('JINJA ERR', jerr, json.dumps(r, ensure_ascii=False)[:600])
    elif 'out' in o:
        if o['out'] == want: stats['match'] += 1
        else:
            stats['MISMATCH'] += 1
            if stats['MISMATCH'] < 4:
                i = next(k for k in range(min(len(want), len(o['out']))) if want[k] != o['out'][k]) if want[:len(o['out'])] != o['out'][:len(want)] else min(len(want), len(o['out']))
                print('MISMATCH at', i, repr(want[max(0,i-60):i+60]), '\n   got', repr(o['out'][max(0,i-60):i+60]), '\n  ', json.dumps(r, ensure_ascii=False)[:800])
    else:
        stats['frigg_refused'] += 1
        key = o['err'][:150]
        refusals[key] = refusals.get(key, 0) + 1
print('seed', SEED, stats)
for k, v in sorted(refusals.items(), key=lambda x: -x[1])[:12]: print('  refused %5d  %s' % (v, k))
sys.exit(1 if stats['MISMATCH'] or stats['FRIGG_RENDERED_JINJA_ERR'] else 0)
