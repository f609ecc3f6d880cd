#!/bin/sh
# frigg-serve through real clients: the official openai SDK and prometheus_client's /metrics parser
# (scripts/serve-tests/serve_test.py, the pinned serve set of scripts/pyenv, installed from PyPI on the first run
# and then kept by its stamp). Chat and completions streamed and not, n, stop, max_tokens, include_usage,
# logprobs, seeds under concurrency, tools, forced tool calls (whole calls with their forced tokens counted, or a
# 400 / a stream's error event, never markup as content), null and no-op fields, a function's strict and unknown
# keys, byte tokens' logprobs bytes, /tokenize with tools, the SDK's error types, raw-HTTP statuses, /metrics,
# disconnects, --replicas, --max-queue and the SIGTERM drain; the bundled model on the CPU engine.
# Then NUL bytes ("\u0000", valid JSON) through the same SDK (below): a prompt, message content and a tool
# call's arguments holding them are tokenized as HF tokenizers tokenizes the text (the ids recorded from
# tokenizers 0.23.2 on jinja2 3.1.6's rendering of the chat template; compared live when scripts/pyenv's check
# set, and the oracle set with ../shared's template, are installed); generated NUL bytes (logit_bias on the
# byte token <0x00>) come back whole as \u0000, streamed and not; stop, role, tool names, model refuse them
# with a 400 naming the field. One summary line for both.
# FRIGG_NO_LIVE=1 skips it (a SKIP line) when the serve set is not installed yet, since installing needs PyPI;
# a failed install is a failure. FRIGG_QUICK=1 shortens the long requests.
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
SHARED=${FRIGG_SHARED:-$ROOT/../shared}
# ../shared holds the chat template the live NUL comparison renders with (tests/no-shared.sh: a test that reads
# it names it when it is missing)
[ -d "$SHARED" ] || echo "SKIP serve: $SHARED is missing: the NUL checks use the recorded ids, not a live rendering of its chat template"
if ! "$ROOT/scripts/pyenv" --have serve; then
    if [ -n "${FRIGG_NO_LIVE:-}" ]; then
        echo "SKIP serve: FRIGG_NO_LIVE is set and the serve set of scripts/pyenv is not installed (it needs PyPI)"
        echo "serve: 0 passed, 0 failed"
        exit 0
    fi
fi
py=$("$ROOT/scripts/pyenv" --serve) || {
    echo "FAIL: scripts/pyenv --serve could not install scripts/py/requirements-serve.txt (PyPI unreachable?);"
    echo "      FRIGG_NO_LIVE=1 skips this test"
    echo "serve: 0 passed, 1 failed"
    exit 1
}
quick=""
[ "${FRIGG_QUICK:-0}" = 1 ] && quick=--quick
T=$(mktemp -d "${TMPDIR:-/tmp}/serve.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$py" "$ROOT/scripts/serve-tests/serve_test.py" --bin "$BIN/frigg-serve" --model "$ROOT/golden/default" $quick \
    > "$T/main" 2>&1
rc1=$?
grep -v '^serve: [0-9]* passed, [0-9]* failed' "$T/main"

"$py" - "$BIN/frigg-serve" "$ROOT" "$SHARED" > "$T/nul" 2>&1 <<'PY'
import json, os, sys, traceback
bin_, root, shared = sys.argv[1:4]
sys.path.insert(0, os.path.join(root, "scripts/serve-tests"))
import openai
from serve_test import KEY, MODEL, Server

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: nul:", what, flush=True)


# HF tokenizers 0.23.2 on golden/default/tokenizer.json (add_special_tokens=False); the chat ones of the text
# jinja2 3.1.6 renders with gemma4_native_chat.jinja from the messages normalized as
# scripts/oracle/render_chat_golden.py does
RECORDED = {
    "a\x00b": [549, 238, 550],
    "hi \x00 there": [556, 557, 613, 238, 1072],
    "user": [2, 105, 783, 616, 107, 572, 238, 573, 106, 107, 105, 561, 563, 1152, 107],
    "conv": [2, 105, 567, 7371, 107, 567, 1825, 238, 653, 561, 106, 107, 105, 783, 616, 107, 572, 238, 106, 107, 105,
             561, 563, 1152, 107, 48, 551, 943, 516, 1639, 333, 1780, 1204, 361, 551, 1324, 516, 52, 534, 238, 567,
             1056, 52, 363, 49, 50, 917, 5713, 713, 516, 1639, 333, 1780, 1204, 361, 1619, 1936, 516, 52, 507, 508,
             238, 522, 52, 363, 51, 4506, 238, 629, 106, 107, 105, 783, 616, 107, 238, 106, 107, 105, 561, 563, 1152,
             107],
}
USER = [{"role": "user", "content": "x\x00y"}]
CALL = {"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "O\x00slo"})}}  # "O\u0000slo"
CONV = [{"role": "system", "content": "sys\x00tem"}, {"role": "user", "content": "x\x00"},
        {"role": "assistant", "content": "sv\x00ar", "tool_calls": [CALL]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "c1", "content": "12\x00C"},
        {"role": "user", "content": "\x00"}]

tk = render = None
try:
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(os.path.join(root, "golden/default/tokenizer.json"))
    sys.argv = [sys.argv[0], shared]  # render_chat_golden reads the template from its first argument
    sys.path.insert(0, os.path.join(root, "scripts/oracle"))
    import render_chat_golden as g
    render = lambda msgs: g.render(g.normalize(msgs), None, True)
except Exception as e:  # noqa: BLE001 - the live comparison is optional, the recorded ids are not
    print(f"SKIP serve: NUL bytes against HF tokenizers and jinja2 live ({type(e).__name__}: {e}); recorded ids used",
          flush=True)


def want(key, text=None, msgs=None):
    if tk is not None and text is not None:
        ids = tk.encode(text, add_special_tokens=False).ids
    elif tk is not None and render is not None and msgs is not None:
        ids = tk.encode(render(msgs), add_special_tokens=False).ids
    else:
        return RECORDED[key]
    check(ids == RECORDED[key], f"{key!r}: HF tokenizers now gives {ids}, recorded {RECORDED[key]}")
    return ids


def refused(fn, param, what):
    try:
        fn()
        check(False, f"{what}: accepted")
    except openai.BadRequestError as e:
        check(e.param == param and "NUL" in e.message, f"{what}: param {e.param}: {e.message}")


def section(fn):
    """One group of checks: an exception (an SDK error nobody expected) fails the group, the next one runs."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        check(False, f"{fn.__name__}: unexpected {type(e).__name__}: {e}")
        traceback.print_exc(limit=4, file=sys.stdout)


def prompts():  # /tokenize and the prompt the completion counts
    for text in ("a\x00b", "hi \x00 there"):
        ids = want(text, text=text)
        st, _, b = srv.raw("POST", "/tokenize", {"model": MODEL, "prompt": text})
        check(st == 200 and json.loads(b)["tokens"] == ids, f"/tokenize {text!r}: {st} {b[:200]!r}, want {ids}")
        r = cl.completions.create(model=MODEL, prompt=text, max_tokens=1, temperature=0)
        check(r.usage.prompt_tokens == len(ids), f"completion of {text!r}: {r.usage.prompt_tokens} prompt tokens")


def messages():  # content, content parts, a tool call's arguments and its result
    for key, msgs in (("user", USER), ("conv", CONV)):
        ids = want(key, msgs=msgs)
        st, _, b = srv.raw("POST", "/tokenize", {"model": MODEL, "messages": msgs})
        check(st == 200 and json.loads(b)["tokens"] == ids, f"/tokenize of the {key} messages: {st} {b[:200]!r}")
        r = cl.chat.completions.create(model=MODEL, messages=msgs, max_tokens=1, temperature=0)
        check(r.usage.prompt_tokens == len(ids), f"chat of the {key} messages: {r.usage.prompt_tokens} prompt "
                                                 f"tokens, want {len(ids)}")
    parts = [{"role": "user", "content": [{"type": "text", "text": "x\x00"}, {"type": "text", "text": "y"}]}]
    r = cl.chat.completions.create(model=MODEL, messages=parts, max_tokens=1, temperature=0)
    check(r.usage.prompt_tokens == len(RECORDED["user"]), f"content parts: {r.usage.prompt_tokens} prompt tokens")


NUL = {"temperature": 0, "max_tokens": 3, "logit_bias": {"238": 100}}  # the byte token <0x00>, made certain
HEJ = [{"role": "user", "content": "Hej"}]


def generated():
    st, _, b = srv.raw("POST", "/detokenize", {"model": MODEL, "tokens": [238]})
    check(st == 200 and json.loads(b)["prompt"] == "\x00", f"/detokenize [238]: {st} {b!r}")
    r = cl.completions.create(model=MODEL, prompt="Hej", **NUL)
    check(r.choices[0].text == "\x00" * 3, f"completion of three NUL bytes: {r.choices[0].text!r}")
    text = "".join(c.choices[0].text for c in cl.completions.create(model=MODEL, prompt="Hej", stream=True, **NUL)
                   if c.choices)
    check(text == "\x00" * 3, f"streamed completion of three NUL bytes: {text!r}")
    r = cl.chat.completions.create(model=MODEL, messages=HEJ, logprobs=True, **NUL)
    lp = r.choices[0].logprobs.content if r.choices[0].logprobs else []
    check(r.choices[0].message.content == "\x00" * 3, f"chat of three NUL bytes: {r.choices[0].message.content!r}")
    check(len(lp) == 3 and all(t.token == "\x00" and t.bytes == [0] for t in lp), f"their logprobs: {lp}")
    text = "".join(c.choices[0].delta.content or "" for c in
                   cl.chat.completions.create(model=MODEL, messages=HEJ, stream=True, **NUL) if c.choices)
    check(text == "\x00" * 3, f"streamed chat of three NUL bytes: {text!r}")
    st, _, b = srv.raw("POST", "/v1/completions", {"model": MODEL, "prompt": "Hej", **NUL})
    check(st == 200 and b'"text":"\\u0000\\u0000\\u0000"' in b, f"the body writes \\u0000: {b[:300]!r}")


def refusals():  # naming the field
    refused(lambda: cl.completions.create(model=MODEL, prompt="x", max_tokens=1, stop="a\x00"), "stop", "stop")
    refused(lambda: cl.completions.create(model=MODEL, prompt="x", max_tokens=1, stop=["b", "a\x00"]), "stop[1]",
            "stop[1]")
    refused(lambda: cl.chat.completions.create(model=MODEL, messages=[{"role": "user\x00", "content": "q"}],
                                               max_tokens=1), "messages[0].role", "a role")
    refused(lambda: cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=1, tools=[
        {"type": "function", "function": {"name": "get_weather\x00"}}]), "tools[0].function.name", "a tool's name")
    refused(lambda: cl.chat.completions.create(model=MODEL + "\x00", messages=USER, max_tokens=1), "model", "model")
    st, _, b = srv.raw("POST", "/tokenize", {"model": MODEL, "messages": [{"role": "user\x00", "content": "q"}]})
    e = json.loads(b).get("error", {}) if st == 400 else {}
    check(e.get("param") == "messages[0].role" and "NUL" in e.get("message", ""), f"/tokenize of a NUL role: {st} {b!r}")


srv = None
try:
    srv = Server(bin_, os.path.join(root, "golden/default"), ["--threads", "2", "--slots", "2", "--api-key", KEY],
                 "nul")
    cl = srv.client()
    for fn in (prompts, messages, generated, refusals):
        section(fn)
    check(srv.stop() == 0, f"exit status {srv.rc}")
except Exception as e:  # noqa: BLE001 - a server that did not start
    check(False, f"unexpected {type(e).__name__}: {e}")
finally:
    if srv is not None:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
        if failed:
            print("---- frigg-serve (nul) stderr ----\n" + "\n".join(srv.stderr().splitlines()[-15:]))
        os.unlink(srv.log.name)
print(f"serve-nul: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
rc2=$?
grep -v '^serve-nul: [0-9]* passed, [0-9]* failed' "$T/nul"
line() { grep -E "^$1: [0-9]+ passed, [0-9]+ failed" "$2" | tail -n 1; }
sum() { # file name field -> the count, or nothing
    line "$2" "$1" | sed -E "s/^$2: ([0-9]+) passed, ([0-9]+) failed.*/\\$3/"
}
p1=$(sum "$T/main" serve 1); f1=$(sum "$T/main" serve 2)
p2=$(sum "$T/nul" serve-nul 1); f2=$(sum "$T/nul" serve-nul 2)
# a program that ended without its summary, or with a non-zero status and none failed, is one failure
[ -n "$p1" ] || { p1=0; f1=1; echo "FAIL: serve_test.py printed no summary (exit $rc1)"; }
[ -n "$p2" ] || { p2=0; f2=1; echo "FAIL: the NUL checks printed no summary (exit $rc2)"; }
[ "$rc1" -ne 0 ] && [ "$f1" -eq 0 ] && f1=1
[ "$rc2" -ne 0 ] && [ "$f2" -eq 0 ] && f2=1
echo "serve: $((p1 + p2)) passed, $((f1 + f2)) failed"
[ $((f1 + f2)) -eq 0 ]
