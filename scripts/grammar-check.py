#!/usr/bin/env python3
"""grammar-check.py — proves that frigg's constrained decoding writes JSON that validates against its schema, by
the Python jsonschema package (scripts/py/requirements-check.txt: jsonschema with rfc3339-validator, so that
"date-time" and "time" are checked too; formats checked: date, time, date-time, email, uuid, ipv4).

  grammar-check.py --bin BIN [--model DIR] [--schemas DIR] [--limit N] [--seeds K] [--max-tokens N]
                   [--parallel P] [--threads T] [--tool TEST_GRAMMAR_SCHEMAS]
      Every schema of DIR (default tests/grammar-schemas; --limit: the first N in name order) as frigg-run
      request lines {"prompt": "<bos>...", "max_tokens": N, "response_format": {"type": "json_schema",
      "json_schema": {"name": "t", "schema": SCHEMA}}}, greedy and at temperature 1.0 with K seeds (default 3),
      all through one frigg-run (BIN: the program or its folder) on the bundled model. An output whose
      finish_reason is "stop" must parse (strict JSON: no NaN, no duplicate keys) and validate; a "length" one is
      counted, and, with --tool (BUILD/tests/tools/grammar_schemas), must be a prefix the grammar continues.
      Each schema of DIR/bad/expected.tsv must get an error line holding its expected text (one that is not a
      JSON value cannot be put in a request line as a schema: it is left to grammar_schemas --check), and so must a
      1.1 MB schema.
  grammar-check.py --docs FILE
      Validate documents written by `grammar_schemas` (lines SCHEMA<TAB>HEX):
      the grammar's random documents (tests/tools/grammar_schemas --check DIR --docs-out FILE, or --sample N SEED
      SCHEMA...), no model needed.

Prints a FAIL line per failure, counts, and last "grammar-check: N passed, N failed"; exit 1 when any failed.
"""
import argparse
import json
import os
import subprocess
import sys

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = ["<bos>Svar i JSON: ", "<bos>Der var engang", "<bos>{\"data\": "]


class Counts:
    def __init__(self):
        self.passed = self.failed = 0

    def ok(self):
        self.passed += 1

    def fail(self, msg):
        self.failed += 1
        print("FAIL: " + msg[:2000])


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def require_formats():
    have = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers
    missing = [f for f in ("date", "time", "date-time", "email", "uuid", "ipv4") if f not in have]
    if missing:  # jsonschema skips a format it has no checker for: that would be a check that cannot fail
        sys.exit("grammar-check: jsonschema cannot check the formats %s (rfc3339-validator missing?)" % missing)


def no_constant(name):
    raise ValueError("not JSON: " + name)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate keys %r" % sorted(k for k in set(keys) if keys.count(k) > 1))
    return dict(pairs)


DUPLICATES = []  # (schema, text) of documents with an object that repeats a member name


def check_document(text, v, where):
    """None when text is strict JSON (no NaN or Infinity) that v accepts, else why not. A repeated member name is
    JSON (RFC 8259: names SHOULD be unique) that frigg's grammar can write for additionalProperties (it does not
    remember the names it wrote): noted in DUPLICATES; each object is then validated with every one of its values
    (the first of a name and the last)."""
    dup = []

    def pairs_hook(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            dup.append(1)
        return dict(pairs)

    try:
        doc = json.loads(text, parse_constant=no_constant, object_pairs_hook=pairs_hook)
    except ValueError as e:
        return "does not parse: %s" % e
    docs = [doc]
    if dup:
        DUPLICATES.append((where, text))
        docs.append(json.loads(text, parse_constant=no_constant, object_pairs_hook=lambda p: dict(reversed(p))))
    for d in docs:
        errs = sorted(v.iter_errors(d), key=lambda e: list(e.absolute_path))
        if errs:
            e = errs[0]
            return "invalid at %s: %s" % ("/" + "/".join(map(str, e.absolute_path)), e.message[:300])
    return None


def note_duplicates():
    if DUPLICATES:
        print("NOTE: %d documents repeat a member name (allowed by JSON; frigg's grammar does not remember the names "
              "of additionalProperties members it wrote), e.g. %s: %s" % (len(DUPLICATES), DUPLICATES[0][0],
                                                                          DUPLICATES[0][1][:200]))


def load_schemas(d, limit):
    names = sorted(f for f in os.listdir(d) if f.endswith(".json"))
    if limit:
        names = names[:limit]
    return [(n, json.load(open(os.path.join(d, n), encoding="utf-8"))) for n in names]


def docs_mode(path, c):
    cache = {}
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            schema_path, hx = line.rstrip("\n").split("\t")
            if schema_path not in cache:
                cache[schema_path] = validator(json.load(open(schema_path, encoding="utf-8")))
            try:
                text = bytes.fromhex(hx).decode("utf-8")
            except UnicodeDecodeError as e:
                c.fail("%s: a random document is not UTF-8 (%s): %s" % (schema_path, e, hx[:400]))
                continue
            why = check_document(text, cache[schema_path], os.path.basename(schema_path))
            if why:
                c.fail("%s: random document %s: %s" % (os.path.basename(schema_path), why, text[:400]))
            else:
                c.ok()
            n += 1
    print("grammar-check: %d random documents of %d schemas" % (n, len(cache)))


def request(schema, i, temp, seed, max_tokens, ident):
    r = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": max_tokens, "temperature": temp,
         "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}, "id": ident}
    if seed is not None:
        r["seed"] = seed
    return json.dumps(r, ensure_ascii=False)


def run_mode(a, c):
    prog = os.path.join(a.bin, "frigg-run") if os.path.isdir(a.bin) else a.bin
    schemas = load_schemas(a.schemas, a.limit)
    lines, meta = [], []
    for i, (name, s) in enumerate(schemas):
        for run, (temp, seed) in enumerate([(0.0, None)] + [(1.0, k + 1) for k in range(a.seeds)]):
            lines.append(request(s, i + run, temp, seed, a.max_tokens, [name, run]))
            meta.append(("good", name, s, run))
    bad_dir = os.path.join(a.schemas, "bad")
    skipped = 0
    for line in open(os.path.join(bad_dir, "expected.tsv"), encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.rstrip("\n").split("\t")
        name, want = cols[0], cols[-1]  # a third column: frigg-run's request reader refuses it first, so
        text = open(os.path.join(bad_dir, name), encoding="utf-8").read()
        try:
            s = json.loads(text, object_pairs_hook=no_duplicates)
        except ValueError:
            skipped += 1  # not a JSON value (or a duplicate key, which a request line's reader keeps the last of)
            continue
        lines.append(request(s, 0, 0.0, None, 8, ["bad", name]))
        meta.append(("bad", name, want, 0))
    big = {"type": "object", "description": "x" * (1100 * 1024)}
    lines.append(request(big, 0, 0.0, None, 8, ["bad", "1.1 MB"]))
    meta.append(("bad", "a 1.1 MB schema", "more than the 1048576 allowed", 0))
    cmd = [prog, "--model", a.model, "--backend", "cpu", "--parallel", str(a.parallel)]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    p = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    out = p.stdout.splitlines()
    if len(out) != len(lines):
        c.fail("frigg-run answered %d of %d lines (exit %d): %s" % (len(out), len(lines), p.returncode, p.stderr[-2000:]))
        return
    validators = {}
    stop = length = prefixes = 0
    length_by_schema = {}
    for (kind, name, x, run), resp_text in zip(meta, out):
        resp = json.loads(resp_text)
        if kind == "bad":
            msg = resp.get("error", {}).get("message", "") if isinstance(resp.get("error"), dict) else ""
            if "error" in resp and x in msg:
                c.ok()
            else:
                c.fail("bad/%s: the answer should be an error holding %r: %s" % (name, x, resp_text[:600]))
            continue
        if "error" in resp:
            c.fail("%s: refused: %s" % (name, resp["error"]))
            continue
        fr, text = resp.get("finish_reason"), resp.get("text", "")
        if name not in validators:
            validators[name] = validator(x)
        if fr == "stop":
            stop += 1
            why = check_document(text, validators[name], name)
            if why:
                c.fail("%s (run %d): %s: %r" % (name, run, why, text[:400]))
            else:
                c.ok()
        elif fr == "length":
            length += 1
            length_by_schema.setdefault(name, []).append(text)
        else:
            c.fail("%s (run %d): finish_reason %r" % (name, run, fr))
    if a.tool:  # a "length" text must be a prefix the grammar goes on from (or a whole document)
        for name, texts in sorted(length_by_schema.items()):
            # a text that ends inside a character (max_tokens reached between the bytes of one) ends in U+FFFD
            # in the response's text: the character's bytes so far are not there to check, the rest is
            hx = "".join(t.rstrip("\ufffd").encode("utf-8").hex() + "\n" for t in texts)
            r = subprocess.run([a.tool, "--prefix", os.path.join(a.schemas, name)], input=hx, capture_output=True,
                               text=True)
            verdicts = r.stdout.split()
            for t, v in zip(texts, verdicts):
                if v in ("continues", "whole"):
                    c.ok()
                    prefixes += 1
                else:
                    c.fail("%s: a \"length\" output is no prefix of a document: %r" % (name, t[:400]))
            if len(verdicts) != len(texts):
                c.fail("%s: grammar_schemas --prefix answered %d of %d (%s)" % (name, len(verdicts), len(texts),
                                                                                     r.stderr[-400:]))
    print("grammar-check: %d schemas, %d outputs: %d stopped (each parsed and validated), %d reached max_tokens "
          "(%d checked as prefixes); %d bad schemas sent, each refused as expected unless a FAIL line says (%d not JSON values, left to "
          "grammar_schemas --check)" % (len(schemas), stop + length, stop, length, prefixes,
                                     sum(1 for m in meta if m[0] == "bad"), skipped))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin")
    ap.add_argument("--docs")
    ap.add_argument("--model", default=os.path.join(ROOT, "golden", "default"))
    ap.add_argument("--schemas", default=os.path.join(ROOT, "tests", "grammar-schemas"))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tool")
    a = ap.parse_args()
    if bool(a.bin) == bool(a.docs):
        ap.error("give --bin (run frigg-run) or --docs (validate random documents)")
    require_formats()
    c = Counts()
    if a.docs:
        docs_mode(a.docs, c)
    else:
        run_mode(a, c)
    note_duplicates()
    print("grammar-check: %d passed, %d failed" % (c.passed, c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
