#!/bin/sh
# frigg-serve's structured output on the bundled model, through the openai SDK (scripts/pyenv's serve set) and
# validated with jsonschema (the check set): response_format json_schema on /v1/chat/completions (greedy and sampled)
# and /v1/completions, json_object; client.beta.chat.completions.parse with a pydantic model returns a parsed object
# (when the model ends its answer); tool_choice "required" gives whole calls (one or more; one with parallel_tool_calls
# false) and a named function one call, whose arguments validate
# against the tool's parameters (greedy and sampled; a strict: true tool among them, under which a call the model
# makes under tool_choice auto validates too, and response_format beside it is a 400); an unsupported keyword, a schema that is not one, a $ref cycle with no base case and
# a 1 MB schema are each a 400 (invalid_request_error, param response_format, the problem named), and the server keeps
# serving; a repeated schema is served from the cache. Skips (naming what is missing) without the Python sets.
ROOT=${FRIGG_ROOT:-$(pwd)}
BIN=${FRIGG_BIN:-$ROOT/bin}
if ! "$ROOT/scripts/pyenv" --have serve 2>/dev/null || ! "$ROOT/scripts/pyenv" --have check 2>/dev/null; then
    if [ -n "${FRIGG_NO_LIVE:-}" ] || [ -z "${CI:-}" ]; then
        echo "SKIP serve-structured: scripts/pyenv's serve and check sets (the openai SDK, jsonschema) are not installed"
        echo "serve-structured: 0 passed, 0 failed"
        exit 0
    fi
    "$ROOT/scripts/pyenv" >/dev/null || { echo "FAIL: scripts/pyenv (check set)"; echo "serve-structured: 0 passed, 1 failed"; exit 1; }
fi
py=$("$ROOT/scripts/pyenv" --serve) || { echo "FAIL: scripts/pyenv --serve"; echo "serve-structured: 0 passed, 1 failed"; exit 1; }
"$py" - "$BIN/frigg-serve" "$ROOT" <<'PY'
import json, os, sys, traceback
bin_, root = sys.argv[1:3]
sys.path.insert(0, os.path.join(root, "scripts/serve-tests"))
import jsonschema, openai, pydantic
import serve_test
from serve_test import KEY, MODEL, Server, check  # serve_test counts the checks

USER = [{"role": "user", "content": "Hvad hedder du, og hvor gammel er du?"}]
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
def rf(schema, name="person"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

def validates(text, schema, what):
    try:
        jsonschema.Draft202012Validator(schema).validate(json.loads(text))
        return True
    except Exception as e:
        print("FAIL: %s: %r: %s" % (what, text, str(e).splitlines()[0]))
        return False

srv = Server(bin_, os.path.join(root, "golden/default"), ["--threads", "2", "--slots", "4", "--api-key", KEY], "structured")
try:
    cl = srv.client()
    stops = 0
    for kw in ({"temperature": 0}, {"temperature": 1.0, "seed": 1}, {"temperature": 1.0, "seed": 2}, {"temperature": 0.7, "seed": 3}):
        r = cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=64, response_format=rf(PERSON), **kw)
        c = r.choices[0]
        if c.finish_reason == "stop":
            stops += 1
            check(validates(c.message.content, PERSON, "chat json_schema %s" % kw), "chat json_schema %s validates" % kw)
        else:
            check(c.finish_reason == "length" and r.usage.completion_tokens == 64, "chat json_schema: finish %s" % c.finish_reason)
    check(stops >= 2, "chat json_schema: %d of 4 answers ended with stop" % stops)
    # completions, and a list of prompts sharing the grammar
    r = cl.completions.create(model=MODEL, prompt=["Der var engang", "Danmark er"], max_tokens=64,
                              extra_body={"response_format": rf({"enum": ["ja", "nej", "måske"]}, "yn")})
    for c in r.choices:
        check(c.finish_reason == "stop" and json.loads(c.text) in ("ja", "nej", "måske"), "completions enum: %r %s" % (c.text, c.finish_reason))
    r = cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=48, temperature=1.0, seed=4,
                                   response_format={"type": "json_object"})
    c = r.choices[0]
    if c.finish_reason == "stop":
        check(isinstance(json.loads(c.message.content), dict), "json_object: %r" % c.message.content)
    else:
        check(c.message.content.lstrip().startswith("{"), "json_object (length): %r" % c.message.content)
    # streamed: the chunks join into the same answer as the whole response
    whole = cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=64, temperature=0, response_format=rf(PERSON))
    parts = [ch.choices[0].delta.content or "" for ch in cl.chat.completions.create(
        model=MODEL, messages=USER, max_tokens=64, temperature=0, response_format=rf(PERSON), stream=True) if ch.choices]
    check("".join(parts) == whole.choices[0].message.content, "streamed %r != whole %r" % ("".join(parts), whole.choices[0].message.content))

    # the SDK's parse() with a pydantic model
    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=10)
        age: int
    parsed = 0
    for seed in (None, 1, 2, 3):
        kw = {"temperature": 0} if seed is None else {"temperature": 1.0, "seed": seed}
        try:
            r = cl.beta.chat.completions.parse(model=MODEL, messages=USER, max_tokens=96, response_format=Person, **kw)
            p = r.choices[0].message.parsed
            if r.choices[0].finish_reason == "stop":
                check(isinstance(p, Person), "parse(): %r" % p)
                parsed += isinstance(p, Person)
        except openai.LengthFinishReasonError:
            pass
        except Exception as e:
            check(False, "parse() %s: %r" % (kw, e))
    check(parsed >= 1, "parse(): %d of 4 parsed" % parsed)

    # forced tool calls: the arguments validate against the tool's parameters, every time
    TOOLS = [{"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {
                 "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                  "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                 "required": ["city", "days"]}}},
             {"type": "function", "function": {"name": "get_time", "parameters": {
                 "type": "object", "properties": {"tz": {"enum": ["UTC", "CET"]}}, "required": ["tz"]}}}]
    params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    # required: one call or more (parallel_tool_calls, the default), whole ones (cut off by max_tokens: "length");
    # required without parallel calls, and a named function: exactly one
    for tc, par in (("required", None), ("required", False), ({"type": "function", "function": {"name": "get_weather"}}, None),
                    ({"type": "function", "function": {"name": "get_time"}}, None)):
        for kw in ({"temperature": 0}, {"temperature": 1.0, "seed": 1}, {"temperature": 1.0, "seed": 2}):
            what = "tool_choice %s parallel %s %s" % (tc if isinstance(tc, str) else tc["function"]["name"], par, kw)
            if par is not None:
                kw = dict(kw, parallel_tool_calls=par)
            try:
                r = cl.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Vejret i Aarhus?"}],
                                               tools=TOOLS, tool_choice=tc, max_tokens=64, **kw)
            except Exception as e:
                check(False, "%s: %r" % (what, e))
                continue
            c = r.choices[0]
            calls = c.message.tool_calls or []
            many = tc == "required" and par is None
            ok = (c.finish_reason in ("tool_calls", "length") and len(calls) >= 1) if many else \
                 (c.finish_reason == "tool_calls" and len(calls) == 1)
            if ok and not isinstance(tc, str):
                ok = calls[0].function.name == tc["function"]["name"]
            for t in calls if ok else []:
                ok = ok and validates(t.function.arguments, params[t.function.name], what)
            check(ok, "%s: %s %s" % (what, c.finish_reason, [(t.function.name, t.function.arguments) for t in calls]))

    # strict: true under tool_choice auto: the model may answer in text or call; a call it makes is decoded under its
    # tool's schema (the grammar starts at the <|tool_call> it generates), so every call validates
    for kw in ({"temperature": 0}, {"temperature": 1.0, "seed": 3}, {"temperature": 1.0, "seed": 4}):
        what = "strict under auto %s" % kw
        try:
            r = cl.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Vejret i Aarhus?"}],
                                           tools=TOOLS, tool_choice="auto", max_tokens=64, **kw)
            c = r.choices[0]
            ok = c.finish_reason in ("stop", "tool_calls", "length")
            for t in (c.message.tool_calls or []) if c.finish_reason == "tool_calls" else []:
                ok = ok and validates(t.function.arguments, params[t.function.name], what)
            check(ok, "%s: %s %s" % (what, c.finish_reason, [(t.function.name, t.function.arguments)
                                                             for t in c.message.tool_calls or []]))
        except Exception as e:
            check(False, "%s: %r" % (what, e))
    try:
        cl.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Vejret i Aarhus?"}], tools=TOOLS,
                                   tool_choice="auto", max_tokens=4, response_format={"type": "json_object"})
        check(False, "strict tools under auto with response_format: accepted")
    except openai.BadRequestError as e:
        check(e.param == "response_format", "strict under auto with response_format: %s %s" % (e.param, e.message))

    # refusals: 400 naming the problem, the server still serving
    cycle = {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}
    big = {"type": "object", "properties": {("k%06d" % i): {"type": "string", "description": "x" * 40} for i in range(20000)}}
    for schema, needle in (({"type": "object", "frobnicate": 1}, "frobnicate"), ({"type": "string", "format": "uri"}, "uri"),
                           (cycle, "schema"), (big, "schema")):
        try:
            cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=4, response_format=rf(schema))
            check(False, "%s: accepted" % needle)
        except openai.BadRequestError as e:
            body = e.body if isinstance(e.body, dict) else {}
            check(e.status_code == 400 and e.param == "response_format" and body.get("type") == "invalid_request_error"
                  and needle in str(e.message), "%s: %s %s %s" % (needle, e.status_code, e.param, e.message))
        except openai.APIStatusError as e:
            check(False, "%s: %s %s" % (needle, e.status_code, e.message))
    r = cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=4)
    check(r.choices[0].finish_reason in ("stop", "length"), "serving after the refusals")
finally:
    srv.stop()
check(srv.rc == 0, "frigg-serve exit %s" % srv.rc)
print("serve-structured: %d passed, %d failed" % (serve_test.passed, serve_test.failed))
sys.exit(1 if serve_test.failed else 0)
PY
