#!/bin/sh
# Structured output (response_format) through frigg-run on the bundled model (CPU engine):
#   - json_schema: for each schema below, greedy and two sampled seeds; every answer that ends with "stop" parses
#     and validates against its schema with Python's jsonschema (scripts/pyenv's check set, else a python3 that has
#     it; neither: the validation SKIPs), and most of them end with "stop" (the grammar allows only the end);
#   - json_object: an object, whatever the model;
#   - max_tokens reached inside the value: finish_reason "length", the text a prefix the grammar accepts;
#   - constrained and unconstrained requests in one step (--parallel): the unconstrained answer is the same as alone;
#   - bad response_format / schemas: an error line naming the problem, the next line still answered;
#   - frigg-bench grammar: its rows (compile ms, mask us p50/p99), and a schema that does not compile.
ROOT=${FRIGG_ROOT:-$(pwd)}
BIN=${FRIGG_BIN:-$ROOT/bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/structured.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
RUN="$BIN/frigg-run --model $ROOT/golden/default -b cpu -t 2"
PY=""
if [ -n "${CI:-}" ] && [ -z "${FRIGG_NO_LIVE:-}" ]; then
    PY=$("$ROOT/scripts/pyenv" 2>"$T/pyenv.log") || { no "scripts/pyenv (the check set)"; tail -n 5 "$T/pyenv.log"; PY=""; }
elif "$ROOT/scripts/pyenv" --have check 2>/dev/null; then
    PY=$("$ROOT/scripts/pyenv" 2>/dev/null)
fi
[ -n "$PY" ] && ! "$PY" -c 'import jsonschema' 2>/dev/null && PY=""
[ -z "$PY" ] && python3 -c 'import jsonschema' 2>/dev/null && PY=python3

# The schemas: real-world shapes (nested objects, arrays of objects, enums, optional fields, patterns, formats,
# unions, $ref recursion), one per line.
cat > "$T/schemas" <<'S'
{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"]}
{"type":"object","properties":{"city":{"enum":["Aarhus","Odense","København"]},"zip":{"type":"string","pattern":"^[0-9]{4}$"}},"required":["city","zip"]}
{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"}},"required":["id","ok"]},"minItems":1,"maxItems":3}
{"type":"object","properties":{"when":{"type":"string","format":"date"},"id":{"type":"string","format":"uuid"}},"required":["when","id"]}
{"type":"object","properties":{"v":{"type":["integer","null"]},"note":{"type":"string","maxLength":8}},"required":["v"]}
{"$defs":{"node":{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["n"]}},"$ref":"#/$defs/node"}
{"anyOf":[{"type":"object","properties":{"a":{"const":1}},"required":["a"]},{"type":"object","properties":{"b":{"type":"string","maxLength":5}},"required":["b"]}]}
{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","minLength":1,"maxLength":6},"maxItems":4},"score":{"type":"number"}},"required":["tags","score"]}
{"enum":["ja","nej","måske"]}
{"type":"object","properties":{"user":{"type":"object","properties":{"email":{"type":"string","format":"email"},"admin":{"type":"boolean"}},"required":["email","admin"]}},"required":["user"]}
{"type":"object","properties":{"k":{"type":"string","maxLength":4}},"required":["k"],"additionalProperties":false}
{"type":"string","pattern":"^[A-Z][a-z]{1,8}$"}
S
python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
out = open(t + "/req.jsonl", "w")
for i, line in enumerate(open(t + "/schemas")):
    s = json.loads(line)
    for seed in (None, 1, 2):
        r = {"id": [i, seed], "prompt": "<bos>Der var engang", "max_tokens": 96,
             "response_format": {"type": "json_schema", "json_schema": {"name": "t%d" % i, "schema": s, "strict": True}}}
        if seed is not None:
            r.update(temperature=1.0, seed=seed)
        out.write(json.dumps(r, ensure_ascii=False) + "\n")
PY
$RUN --parallel 4 < "$T/req.jsonl" > "$T/out" 2>"$T/err"; rc=$?
[ "$rc" = 0 ] && ok || { no "schemas: exit $rc"; tail -n 3 "$T/err"; }
[ "$(grep -c . "$T/out")" = "$(grep -c . "$T/req.jsonl")" ] && ok || no "schemas: $(grep -c . "$T/out") answers"
if [ -n "$PY" ]; then
    "$PY" - "$T" <<'PY' > "$T/val" 2>&1
import json, sys
import jsonschema
t = sys.argv[1]
schemas = [json.loads(l) for l in open(t + "/schemas")]
stop = bad = 0
for line in open(t + "/out"):
    r = json.loads(line)
    i, seed = r["id"]
    if "error" in r:
        print("FAIL: schema %d seed %s: %s" % (i, seed, r["error"])); bad += 1; continue
    if r["finish_reason"] != "stop":
        continue
    stop += 1
    try:
        v = json.loads(r["text"])
        jsonschema.Draft202012Validator(schemas[i], format_checker=jsonschema.FormatChecker()).validate(v)
    except Exception as e:
        print("FAIL: schema %d seed %s: %r does not validate: %s" % (i, seed, r["text"], str(e).splitlines()[0])); bad += 1
print("validated %d stop answers of %d, %d bad" % (stop, 3 * len(schemas), bad))
if stop * 4 < 3 * len(schemas) * 3:
    print("FAIL: only %d of %d answers ended with stop" % (stop, 3 * len(schemas)))
PY
    grep FAIL "$T/val" && no "jsonschema validation ($(tail -n 1 "$T/val"))" || { ok; echo "structured: $(tail -n 1 "$T/val")"; }
else
    echo "SKIP structured: no Python with jsonschema (scripts/pyenv's check set; installed under CI=true): the answers are not validated"
fi

# json_object, max_tokens inside the value, mixed batch, errors
S1='{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]}'
printf '%s\n' \
    '{"id":1,"prompt":"<bos>Der var engang","max_tokens":48,"temperature":1.0,"seed":5,"response_format":{"type":"json_object"}}' \
    '{"id":2,"prompt":"<bos>Der var engang","max_tokens":3,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":'"$S1"'}}}' \
    '{"id":3,"prompt":"<bos>Der var engang","max_tokens":8,"response_format":{"type":"text"}}' \
    '{"id":4,"prompt":"<bos>Der var engang","max_tokens":8}' > "$T/misc.jsonl"
$RUN --parallel 4 < "$T/misc.jsonl" > "$T/misc" 2>"$T/err"; rc=$?
[ "$rc" = 0 ] && ok || no "misc: exit $rc"
python3 - "$T/misc" > "$T/miscval" <<'PY'
import json, sys
rs = {r["id"]: r for r in map(json.loads, open(sys.argv[1]))}
def fail(m): print("FAIL: " + m)
r = rs[1]
if r["finish_reason"] == "stop":
    try:
        if not isinstance(json.loads(r["text"]), dict): fail("json_object: not an object: %r" % r["text"])
    except ValueError as e: fail("json_object: %r does not parse: %s" % (r["text"], e))
elif not r["text"].lstrip().startswith("{"): fail("json_object: %r" % r["text"])
r = rs[2]
if r["finish_reason"] != "length" or r["usage"]["completion_tokens"] != 3 or not r["text"].startswith("{"):
    fail("max_tokens 3 inside the value: %r %s" % (r["text"], r["finish_reason"]))
if rs[3]["text"] != rs[4]["text"]: fail("text response_format changed the answer: %r %r" % (rs[3]["text"], rs[4]["text"]))
PY
grep FAIL "$T/miscval" && no "json_object / length / text" || ok
# the unconstrained answer beside constrained ones equals the one alone
sed -n 4p "$T/misc.jsonl" | $RUN > "$T/alone" 2>/dev/null
[ "$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["text"])' "$T/alone")" = \
  "$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][3]["text"])' "$T/misc")" ] && ok ||
    no "an unconstrained answer beside constrained ones differs from the one alone"

printf '%s\n' \
    '{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"t","schema":{"type":"object","frobnicate":1}}}}' \
    '{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"t","schema":{"type":"string","format":"uri"}}}}' \
    '{"prompt":"x","response_format":{"type":"xml"}}' \
    '{"prompt":"x","response_format":{"type":"json_schema"}}' \
    '{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"bad name","schema":{}}}}' \
    '{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"t","schema":{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}}}}' \
    '{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"t","schema":{},"extra":1}}}' \
    '{"prompt":"<bos>Hej","max_tokens":2}' > "$T/bad.jsonl"
$RUN < "$T/bad.jsonl" > "$T/bad" 2>/dev/null; rc=$?
[ "$rc" = 1 ] && ok || no "bad schemas: exit $rc, want 1"
chk() { # line, fixed text
    sed -n "$1p" "$T/bad" | grep -qF -- "$2" && ok || no "bad line $1: want '$2': $(sed -n "$1p" "$T/bad")"
}
chk 1 "unsupported keyword 'frobnicate'"
chk 2 "format 'uri' is not supported"
chk 3 '\"response_format.type\" must be'
chk 4 '\"response_format.json_schema\" must be an object'
chk 5 '\"response_format.json_schema.name\" must be'
chk 6 '\"response_format.json_schema.schema\": '
chk 7 'unknown member \"extra\"'
sed -n 8p "$T/bad" | grep -q '"finish_reason"' && ok || no "the line after the bad ones: $(sed -n 8p "$T/bad")"
# frigg-bench grammar: a row per schema with compile time and mask times; a schema that does not compile: exit 1
sed -n 1p "$T/schemas" > "$T/s1.json"; sed -n 6p "$T/schemas" > "$T/s6.json"
printf '%s\n' '{"type":"object","frobnicate":1}' > "$T/bad.json"
"$BIN/frigg-bench" --model "$ROOT/golden/default" --steps 16 grammar "$T/s1.json" "$T/s6.json" > "$T/gb" 2>"$T/gberr"; rc=$?
[ "$rc" = 0 ] && ok || { no "frigg-bench grammar: exit $rc"; cat "$T/gberr"; }
python3 - "$T/gb" <<'PY' || no "frigg-bench grammar rows: $(head -c 300 "$T/gb")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2, rows
for r in rows:
    assert r["mode"] == "grammar" and r["compile_ms"] > 0 and r["states"] > 0, r
    for k in ("mask_cold_us", "mask_warm_us", "mask_precomputed_us"):
        assert r[k]["n"] > 0 and 0 <= r[k]["p50"] <= r[k]["p99"] <= r[k]["max"], r
PY
"$BIN/frigg-bench" --model "$ROOT/golden/default" grammar "$T/bad.json" > /dev/null 2>"$T/gberr"; rc=$?
[ "$rc" = 1 ] && grep -q "frobnicate" "$T/gberr" && ok || no "frigg-bench grammar, a bad schema: exit $rc: $(cat "$T/gberr")"
echo "structured: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
