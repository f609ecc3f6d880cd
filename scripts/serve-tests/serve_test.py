"""frigg-serve through real clients: the official openai SDK (what users run against it), raw HTTP where the SDK
cannot say what is checked (status codes, headers, a socket closed mid-response), and prometheus_client's own
parser for /metrics. Run by tests/serve.sh with the serve set of scripts/pyenv; starts its own servers on the
bundled model (CPU engine, port 0) and stops them with SIGTERM.

    python serve_test.py --bin BIN/frigg-serve --model golden/default [--quick]

--quick (FRIGG_QUICK=1, e.g. under the sanitizers): the long requests generate 60 tokens instead of 120 and the tool
requests 8 instead of 24.

Prints one "FAIL: ..." line per failed check, "NOTE: ..." lines for what it observed but cannot prove (the
tiny model's tool-call arguments), and "serve: N passed, N failed" last. Exit status 1 when anything failed.

Long requests: the bundled model stops (<eos>, <turn|>) wherever it likes, so a request that must still be
running when the test acts on it (a disconnect, SIGTERM, a held queue, the requests beside a seeded one) is the
completion of class Long, with a seed found at start: the first seed whose run of Long.min_tokens tokens ends
with "length". Sampling is a function of the seed and the step, so the same seed with a larger max_tokens runs
at least Long.min_tokens tokens."""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import openai
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

KEY = "frigg-serve-test-key"
MODEL = "default"
QUICK = False
passed = failed = 0
timings = []


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)
    return ok


def note(what):
    print("NOTE:", what, flush=True)


def section(fn):
    """Run one group of checks; an exception (a crash of the server, an SDK error nobody expected) is a
    failure of that group, and the next group still runs."""
    def run(*a, **k):
        t0 = time.time()
        try:
            return fn(*a, **k)
        except Exception as e:  # noqa: BLE001 - every unexpected error is a failed check
            check(False, f"{fn.__name__}: unexpected {type(e).__name__}: {e}")
            traceback.print_exc(limit=4, file=sys.stdout)
        finally:
            timings.append(f"{fn.__name__} {time.time() - t0:.1f}")
    run.__name__ = fn.__name__
    return run


class Server:
    def __init__(self, binary, model, args, tag):
        self.tag = tag
        self.log = tempfile.NamedTemporaryFile(prefix=f"frigg-serve-{tag}.", suffix=".log", delete=False)
        self.proc = subprocess.Popen([binary, "--model", model, "--port", "0", *args], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        self.port = None
        self.rc = None
        t0 = time.time()
        while time.time() - t0 < 60 and self.proc.poll() is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.stderr())
            if m:
                self.port = int(m.group(1))
                try:
                    if self.raw("GET", "/health", auth=False)[0] == 200:
                        break
                except OSError:
                    pass
            time.sleep(0.05)
        else:
            raise RuntimeError(f"frigg-serve ({tag}) did not become ready:\n{self.stderr()}")

    def stderr(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def client(self, key=KEY, **kw):
        return OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key, max_retries=0, timeout=120, **kw)

    def raw(self, method, path, body=None, headers=None, auth=True, timeout=60):
        """(status, headers as a dict of lower-case names, body bytes) over a fresh connection."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        if auth:
            h["Authorization"] = "Bearer " + KEY
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def metrics(self):
        st, _, body = self.raw("GET", "/metrics")
        if st != 200:
            raise RuntimeError(f"/metrics answered {st}")
        fams = {f.name: f for f in text_string_to_metric_families(body.decode())}
        samples = {}
        for f in fams.values():
            for s in f.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return fams, samples

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.rc = self.proc.wait()
            self.rc = f"hung (killed), rc {self.rc}"
        return self.rc


def mval(samples, name, **labels):
    """The sum of the samples called name whose labels include the given ones."""
    tot = 0.0
    for (n, ls), v in samples.items():
        d = dict(ls)
        if n == name and all(d.get(k) == v2 for k, v2 in labels.items()):
            tot += v
    return tot


def wait_for(pred, timeout=5.0, step=0.05):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


USER = [{"role": "user", "content": "Fortæl mig om Danmark."}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Vejret i en by",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def chat_stream(cl, **kw):
    """Stream a chat request; per choice index: text, finish_reason, role chunks; plus every chunk."""
    chunks = list(cl.chat.completions.create(stream=True, **kw))
    out = {}
    for ch in chunks:
        for c in ch.choices:
            o = out.setdefault(c.index, {"text": "", "finish": [], "roles": 0, "logprobs": [], "tool_calls": []})
            if c.delta.role:
                o["roles"] += 1
            if c.delta.content:
                o["text"] += c.delta.content
            if c.delta.tool_calls:
                o["tool_calls"].extend(c.delta.tool_calls)
            if c.finish_reason:
                o["finish"].append(c.finish_reason)
            if c.logprobs and c.logprobs.content:
                o["logprobs"].extend(c.logprobs.content)
    return out, chunks


def compl_stream(cl, **kw):
    chunks = list(cl.completions.create(stream=True, **kw))
    out = {}
    for ch in chunks:
        for c in ch.choices:
            o = out.setdefault(c.index, {"text": "", "finish": [], "tokens": [], "offsets": [], "lps": []})
            o["text"] += c.text or ""
            if c.finish_reason:
                o["finish"].append(c.finish_reason)
            if c.logprobs and c.logprobs.tokens:
                o["tokens"].extend(c.logprobs.tokens)
                o["offsets"].extend(c.logprobs.text_offset)
                o["lps"].extend(c.logprobs.token_logprobs)
    return out, chunks


class Long:
    """The calibrated long completion (see the module's docstring)."""
    prompt = "<bos>Der"
    seed = None
    min_tokens = 0

    @classmethod
    def body(cls, max_tokens, stream=False, **extra):
        b = {"model": MODEL, "prompt": cls.prompt, "temperature": 2.0, "seed": cls.seed, "max_tokens": max_tokens,
             "stream": stream}
        b.update(extra)
        return b


@section
def calibrate(srv, min_tokens):
    cl = srv.client()
    for seed in range(1, 41):
        r = cl.completions.create(model=MODEL, prompt=Long.prompt, temperature=2.0, seed=seed, max_tokens=min_tokens)
        if r.choices[0].finish_reason == "length":
            Long.seed, Long.min_tokens = seed, min_tokens
            return
    check(False, f"calibration: no seed in 1..40 runs {min_tokens} tokens without stopping")


@section
def basics(srv):
    st, hd, body = srv.raw("GET", "/health", auth=False)
    check(st == 200 and json.loads(body) == {"status": "ok"}, f"/health without a key: {st} {body[:80]!r}")
    cl = srv.client()
    ms = cl.models.list()
    check([m.id for m in ms.data] == [MODEL], f"/v1/models lists {[m.id for m in ms.data]}, want [{MODEL!r}]")
    check(cl.models.retrieve(MODEL).id == MODEL, "/v1/models/default")
    try:
        cl.models.retrieve("no-such-model")
        check(False, "/v1/models/no-such-model: no error")
    except openai.NotFoundError as e:
        check(e.code == "model_not_found", f"/v1/models/no-such-model: code {e.code}")


@section
def chat_and_completions(srv):
    cl = srv.client()
    # one seeded sampled request, streamed and not: the same text, the same finish, usage consistent
    kw = dict(model=MODEL, messages=USER, temperature=0.9, seed=11, max_tokens=24)
    r = cl.chat.completions.create(**kw)
    c = r.choices[0]
    check(r.object == "chat.completion" and c.message.role == "assistant" and isinstance(c.message.content, str),
          f"chat response shape: {r.object} {c.message.role} {type(c.message.content)}")
    check(c.finish_reason in ("stop", "length") and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
          and 0 < r.usage.completion_tokens <= 24, f"chat finish/usage: {c.finish_reason} {r.usage}")
    st, _, tb = srv.raw("POST", "/tokenize", {"model": MODEL, "messages": USER})
    check(st == 200 and json.loads(tb)["count"] == r.usage.prompt_tokens,
          f"/tokenize of the messages counts {tb[:60]!r}, the chat's usage.prompt_tokens is {r.usage.prompt_tokens}")
    s, chunks = chat_stream(cl, **kw)
    check(set(s) == {0} and s[0]["text"] == c.message.content,
          f"chat streamed != not streamed (seed 11): {s.get(0, {}).get('text')!r} vs {c.message.content!r}")
    check(s[0]["finish"] == [c.finish_reason] and s[0]["roles"] == 1,
          f"chat stream: finish {s[0]['finish']} (want [{c.finish_reason}]), role chunks {s[0]['roles']}")
    check(len({ch.id for ch in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"
          and all(ch.usage is None for ch in chunks), "chat stream: one id, chunk objects, no usage without include_usage")
    # completions, the same
    kw = dict(model=MODEL, prompt="<bos>Der var engang", temperature=0.9, seed=5, max_tokens=20)
    r = cl.completions.create(**kw)
    s, chunks = compl_stream(cl, **kw)
    check(r.object == "text_completion" and s[0]["text"] == r.choices[0].text and s[0]["finish"] == [r.choices[0].finish_reason],
          f"completion streamed != not streamed (seed 5): {s[0]['text']!r} {s[0]['finish']} vs {r.choices[0].text!r} "
          f"{r.choices[0].finish_reason}")
    # without a seed two sampled requests are independent draws; greedy twice is the same
    g1 = cl.completions.create(model=MODEL, prompt="<bos>Han", temperature=0, max_tokens=12).choices[0].text
    g2 = cl.completions.create(model=MODEL, prompt="<bos>Han", temperature=0, max_tokens=12).choices[0].text
    check(g1 == g2, f"greedy twice differs: {g1!r} {g2!r}")


@section
def n_choices(srv):
    cl = srv.client()
    kw = dict(model=MODEL, messages=USER, temperature=1.0, seed=7, max_tokens=12)
    r = cl.chat.completions.create(n=3, **kw)
    check([c.index for c in r.choices] == [0, 1, 2] and all(c.finish_reason in ("stop", "length") for c in r.choices),
          f"n=3: indexes {[c.index for c in r.choices]}, finishes {[c.finish_reason for c in r.choices]}")
    # documented: choice i samples with seed + i, so it is the n=1 request with that seed
    for i in range(3):
        one = cl.chat.completions.create(n=1, **{**kw, "seed": 7 + i}).choices[0].message.content
        check(one == r.choices[i].message.content, f"n=3 choice {i} != n=1 with seed {7 + i}: "
              f"{r.choices[i].message.content!r} vs {one!r}")
    s, chunks = chat_stream(cl, n=3, **kw)
    check(sorted(s) == [0, 1, 2], f"n=3 streamed: chunk indexes {sorted(s)}")
    for i in range(3):
        o = s.get(i, {"finish": [], "roles": 0, "text": None})
        check(len(o["finish"]) == 1 and o["finish"][0] == r.choices[i].finish_reason and o["roles"] == 1,
              f"n=3 streamed index {i}: finish {o['finish']}, role chunks {o['roles']}")
        check(o["text"] == r.choices[i].message.content, f"n=3 streamed index {i} text {o['text']!r} != "
              f"{r.choices[i].message.content!r}")
    check(all(len(ch.choices) == 1 for ch in chunks), "n=3 streamed: a chunk carries more than one choice")
    # completions: several prompts x n, index = prompt * n + j
    r = cl.completions.create(model=MODEL, prompt=["<bos>Der", "<bos>Han"], n=2, temperature=1.0, seed=3, max_tokens=6)
    check([c.index for c in r.choices] == [0, 1, 2, 3], f"2 prompts x n=2: indexes {[c.index for c in r.choices]}")
    one = cl.completions.create(model=MODEL, prompt="<bos>Han", temperature=1.0, seed=3 + 2, max_tokens=6).choices[0].text
    check(r.choices[2].text == one, f"prompt 1 choice 0 (seed + 2) {r.choices[2].text!r} != alone {one!r}")


@section
def stops(srv):
    cl = srv.client()
    for kind in ("chat", "completion"):
        if kind == "chat":
            kw = dict(model=MODEL, messages=USER, temperature=0.9, seed=11, max_tokens=24)
            full = cl.chat.completions.create(**kw).choices[0].message.content
        else:
            kw = dict(model=MODEL, prompt="<bos>Der var engang", temperature=0.9, seed=5, max_tokens=20)
            full = cl.completions.create(**kw).choices[0].text
        if len(full) < 6:
            check(False, f"stop ({kind}): the reference text {full!r} is too short to cut")
            continue
        k = len(full) // 2
        stop = full[k:k + 3]
        want = full[:full.index(stop)]
        if kind == "chat":
            r = cl.chat.completions.create(stop=[stop, "zq-never-generated"], **kw).choices[0]
            got, fin = r.message.content, r.finish_reason
            s, _ = chat_stream(cl, stop=[stop, "zq-never-generated"], **kw)
        else:
            r = cl.completions.create(stop=stop, **kw).choices[0]
            got, fin = r.text, r.finish_reason
            s, _ = compl_stream(cl, stop=stop, **kw)
        check(got == want and fin == "stop", f"stop {stop!r} ({kind}): {got!r} {fin}, want {want!r} stop")
        check(s[0]["text"] == want and s[0]["finish"] == ["stop"], f"stop {stop!r} ({kind}, streamed): {s[0]['text']!r} "
              f"{s[0]['finish']}, want {want!r}")


@section
def lengths(srv):
    cl = srv.client()
    if Long.seed is not None:
        r = cl.completions.create(**{k: v for k, v in Long.body(7).items() if k != "stream"})
        check(r.usage.completion_tokens == 7 and r.choices[0].finish_reason == "length",
              f"completions max_tokens 7: {r.usage.completion_tokens} tokens, {r.choices[0].finish_reason}")
        s, _ = compl_stream(cl, **{k: v for k, v in Long.body(7).items() if k != "stream"})
        check(s[0]["finish"] == ["length"] and s[0]["text"] == r.choices[0].text, "completions max_tokens 7 streamed")
    # chat: a reference run of c tokens; max_completion_tokens (and max_tokens) c - 1 is hit
    for seed in range(1, 20):
        ref = cl.chat.completions.create(model=MODEL, messages=USER, temperature=1.0, seed=seed, max_tokens=16)
        if ref.usage.completion_tokens >= 3:
            break
    c = ref.usage.completion_tokens
    for field in ("max_completion_tokens", "max_tokens"):
        r = cl.chat.completions.create(model=MODEL, messages=USER, temperature=1.0, seed=seed, **{field: c - 1})
        check(r.usage.completion_tokens == c - 1 and r.choices[0].finish_reason == "length"
              and ref.choices[0].message.content.startswith(r.choices[0].message.content),
              f"chat {field}={c - 1} (the unlimited run has {c}): {r.usage.completion_tokens} tokens, "
              f"{r.choices[0].finish_reason}, {r.choices[0].message.content!r}")
    r = cl.chat.completions.create(model=MODEL, messages=USER, temperature=1.0, seed=seed, max_completion_tokens=c + 20)
    ext = r.choices[0].message.content
    check(r.usage.completion_tokens <= c + 20 and ext.startswith(ref.choices[0].message.content)
          and (ref.choices[0].finish_reason == "length" or ext == ref.choices[0].message.content),
          f"chat max_completion_tokens {c + 20}: {ext!r} does not continue the {c}-token run")
    try:
        cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=3, max_completion_tokens=4)
        check(False, "max_tokens 3 with max_completion_tokens 4: accepted")
    except openai.BadRequestError as e:
        check(e.param == "max_completion_tokens", f"max_tokens/max_completion_tokens disagree: param {e.param}")
    # include_usage: a last chunk with choices [] and the usage of the same request not streamed
    kw = dict(model=MODEL, messages=USER, temperature=0.9, seed=11, max_tokens=24)
    ref = cl.chat.completions.create(**kw)
    chunks = list(cl.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    last = chunks[-1]
    check(last.choices == [] and last.usage is not None and last.usage.completion_tokens == ref.usage.completion_tokens
          and last.usage.prompt_tokens == ref.usage.prompt_tokens and last.usage.total_tokens == ref.usage.total_tokens,
          f"chat include_usage: last chunk {last.choices} {last.usage} vs {ref.usage}")
    check(all(ch.usage is None for ch in chunks[:-1]) and all(ch.choices for ch in chunks[:-1]),
          "chat include_usage: an earlier chunk has usage or no choices")
    kw = dict(model=MODEL, prompt="<bos>Der var engang", temperature=0.9, seed=5, max_tokens=20, n=2)
    ref = cl.completions.create(**kw)
    chunks = list(cl.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    last = chunks[-1]
    check(last.choices == [] and last.usage is not None and last.usage.completion_tokens == ref.usage.completion_tokens
          and last.usage.prompt_tokens == ref.usage.prompt_tokens,
          f"completions n=2 include_usage: {last.usage} vs {ref.usage}")
    try:
        cl.completions.create(model=MODEL, prompt="<bos>Der", stream_options={"include_usage": True})
        check(False, "stream_options without stream: accepted")
    except openai.BadRequestError as e:
        check(e.param == "stream_options", f"stream_options without stream: param {e.param}")


@section
def logprobs(srv):
    cl = srv.client()
    kw = dict(model=MODEL, messages=USER, temperature=0, max_tokens=10, logprobs=True, top_logprobs=3)
    r = cl.chat.completions.create(**kw)
    c = r.choices[0]
    lp = c.logprobs.content if c.logprobs else None
    check(lp is not None and len(lp) == r.usage.completion_tokens,
          f"chat logprobs: {len(lp) if lp else None} entries for {r.usage.completion_tokens} tokens")
    lp = lp or []
    ok_shape = all(isinstance(e.token, str) and isinstance(e.bytes, list) and e.logprob <= 0 and len(e.top_logprobs) == 3
                   and all(t.logprob <= 0 and isinstance(t.bytes, list) for t in e.top_logprobs) for e in lp)
    check(ok_shape, "chat logprobs: an entry lacks token/bytes/logprob <= 0 or has other than 3 top_logprobs")
    check(all(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob for e in lp),
          "chat top_logprobs not in descending order")
    check(all(e.token == e.top_logprobs[0].token and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6 for e in lp),
          "chat logprobs (greedy): the chosen token is not the first of top_logprobs")
    joined = b"".join(bytes(e.bytes) for e in lp).decode("utf-8", "replace")
    check(joined == c.message.content, f"chat logprobs: the tokens' bytes {joined!r} != the content {c.message.content!r}")
    s, _ = chat_stream(cl, **kw)
    check([(e.token, round(e.logprob, 5), len(e.top_logprobs)) for e in s[0]["logprobs"]] ==
          [(e.token, round(e.logprob, 5), len(e.top_logprobs)) for e in lp], "chat logprobs streamed != not streamed")
    r0 = cl.chat.completions.create(**{**kw, "top_logprobs": 0})
    check(r0.choices[0].logprobs is not None and all(e.top_logprobs == [] for e in r0.choices[0].logprobs.content),
          "chat logprobs with top_logprobs 0: entries should have empty top_logprobs")
    try:
        cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, top_logprobs=2)
        check(False, "top_logprobs without logprobs: accepted")
    except openai.BadRequestError as e:
        check(e.param == "top_logprobs", f"top_logprobs without logprobs: param {e.param}")
    # completions: tokens, token_logprobs, top_logprobs (dicts of at most k), text_offset into the text
    prompt = "<bos>Hun så på"  # greedy: " at være mere end ...", non-ASCII early
    kw = dict(model=MODEL, prompt=prompt, temperature=0, max_tokens=12, logprobs=2)
    r = cl.completions.create(**kw)
    c = r.choices[0]
    L = c.logprobs
    n = r.usage.completion_tokens
    check(L is not None and len(L.tokens) == len(L.token_logprobs) == len(L.top_logprobs) == len(L.text_offset) == n,
          f"completions logprobs: lengths {L and (len(L.tokens), len(L.token_logprobs), len(L.top_logprobs), len(L.text_offset))}"
          f" for {n} tokens")
    check("".join(L.tokens) == c.text, f"completions logprobs: tokens {''.join(L.tokens)!r} != text {c.text!r}")
    check(all(1 <= len(t) <= 2 for t in L.top_logprobs) and
          all(abs(max(t.values()) - lp) < 1e-6 for t, lp in zip(L.top_logprobs, L.token_logprobs)),
          "completions logprobs (greedy): top_logprobs do not hold the chosen token's logprob as their best")
    # text_offset: where each token starts in the text, in characters (as OpenAI and vLLM count, and Python indexes)
    check(L.text_offset and L.text_offset[0] == 0 and all(c.text[o:].startswith(t) for o, t in zip(L.text_offset, L.tokens)),
          f"completions text_offset {L.text_offset} does not index the tokens {L.tokens} in {c.text!r}")
    s, _ = compl_stream(cl, **kw)
    check(s[0]["tokens"] == L.tokens and s[0]["offsets"] == L.text_offset,
          f"completions logprobs streamed: tokens/offsets {s[0]['tokens']} {s[0]['offsets']} != {L.tokens} {L.text_offset}")
    note(f"completions logprobs text: {c.text!r}")


@section
def concurrency(srv):
    """A seeded request alone and while 4 others run beside it: the same text (the CPU engine is batch-invariant)."""
    cl = srv.client()
    kw = dict(model=MODEL, messages=USER, temperature=0.9, seed=23, max_tokens=24)
    alone = cl.chat.completions.create(**kw).choices[0].message.content
    kwc = dict(model=MODEL, prompt="<bos>Der var engang", temperature=1.0, seed=9, max_tokens=12)
    alone_c = cl.completions.create(**kwc).choices[0].text
    if Long.seed is None:
        check(False, "concurrency: no calibrated long request")
        return
    started = [threading.Event() for _ in range(4)]
    ends = [None] * 4
    errs = []

    def other(i):
        try:
            body = {k: v for k, v in Long.body(Long.min_tokens).items() if k != "stream"}
            for _ in cl.completions.create(stream=True, **body):
                started[i].set()
            ends[i] = time.time()
        except Exception as e:  # noqa: BLE001
            errs.append(repr(e))
            started[i].set()

    ts = [threading.Thread(target=other, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for e in started:
        e.wait(60)
    beside = cl.chat.completions.create(**kw).choices[0].message.content
    beside_c = cl.completions.create(**kwc).choices[0].text
    t_done = time.time()
    for t in ts:
        t.join(120)
    check(not errs, f"concurrency: the other requests failed: {errs}")
    check(all(e is not None and e > t_done for e in ends),
          "concurrency: the 4 other requests were not all still running when the seeded ones finished")
    check(beside == alone, f"seeded chat alone {alone!r} != beside 4 others {beside!r}")
    check(beside_c == alone_c, f"seeded completion alone {alone_c!r} != beside 4 others {beside_c!r}")


@section
def tools(srv):
    cl = srv.client()
    base = dict(model=MODEL, messages=[{"role": "user", "content": "Hvordan er vejret i Aarhus?"}], temperature=0,
                max_tokens=8 if QUICK else 24)
    plain = cl.chat.completions.create(**base)
    auto = cl.chat.completions.create(tools=TOOLS, **base)
    none = cl.chat.completions.create(tools=TOOLS, tool_choice="none", **base)
    check(auto.usage.prompt_tokens > plain.usage.prompt_tokens,
          f"tools are not in the prompt: {auto.usage.prompt_tokens} prompt tokens with, {plain.usage.prompt_tokens} without")
    check(none.usage.prompt_tokens == plain.usage.prompt_tokens and not none.choices[0].message.tool_calls
          and none.choices[0].message.content == plain.choices[0].message.content,
          "tool_choice none: not the request without tools")
    # the forced start (<|tool_call>call:get_weather{, 11 tokens) counts against max_tokens: room for arguments
    forced_kw = dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                     **{**base, "max_tokens": base["max_tokens"] + 16})
    # A forced call is either whole (tool_calls, finish_reason tool_calls) or an error naming tool_choice: never its
    # markup as content (without constrained decoding the tiny model may stop or run out of tokens inside it).
    m = None
    try:
        f = cl.chat.completions.create(**forced_kw)
        m = f.choices[0].message
        tc = m.tool_calls[0] if m.tool_calls else None
        try:
            args = json.loads(tc.function.arguments) if tc else None
        except ValueError:
            args = None
        check(tc is not None and tc.type == "function" and tc.function.name == "get_weather" and isinstance(args, dict)
              and tc.id and f.choices[0].finish_reason == "tool_calls" and "<|tool_call>" not in (m.content or ""),
              f"forced tool call: {m}")
        note(f"forced call parsed: {tc.function.name}({tc.function.arguments})" if tc else "forced call: none")
    except openai.BadRequestError as e:
        check(e.code == "invalid_tool_call" and e.param == "tool_choice" and "<|tool_call>" not in e.message,
              f"forced tool call the model left unfinished: {e.code} {e.param}: {e.message}")
        note(f"the model's forced call was not whole: {e.message}")
    try:
        s, _ = chat_stream(cl, **forced_kw)
        names = [t.function.name for t in s[0]["tool_calls"] if t.function and t.function.name]
        check(m is not None and m.tool_calls and names == [t.function.name for t in m.tool_calls]
              and s[0]["finish"] == ["tool_calls"] and not s[0]["text"], f"forced tool call streamed: {s[0]}")
    except openai.APIError as e:  # the stream's error event; the SDK raises it as it reads
        check(m is None and "not a whole call" in e.message and "<|tool_call>" not in str(e.body),
              f"forced tool call streamed: an error the request not streamed did not have: {e.message}")
    try:
        req = cl.chat.completions.create(tools=TOOLS, tool_choice="required", **{**base, "max_tokens": base["max_tokens"] + 16})
        rm = req.choices[0].message
        check(bool(rm.tool_calls) and req.choices[0].finish_reason == "tool_calls" and "<|tool_call>" not in (rm.content or ""),
              f"tool_choice required: {rm}")
    except openai.BadRequestError as e:
        check(e.code == "invalid_tool_call" and e.param == "tool_choice", f"tool_choice required: {e.code} {e.param}")
    # the round trip: the call (the server's if it parsed, else one written here) and its result go back
    call = ({"id": m.tool_calls[0].id, "type": "function", "function": {"name": m.tool_calls[0].function.name,
                                                                         "arguments": m.tool_calls[0].function.arguments}}
            if m is not None and m.tool_calls else {"id": "call_0", "type": "function",
                                  "function": {"name": "get_weather", "arguments": json.dumps({"city": "Aarhus"})}})
    msgs = base["messages"] + [{"role": "assistant", "content": None, "tool_calls": [call]},
                               {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"temperatur": 17})}]
    rt = cl.chat.completions.create(**{**base, "messages": msgs, "tools": TOOLS})
    check(rt.choices[0].finish_reason in ("stop", "length", "tool_calls") and rt.usage.prompt_tokens > auto.usage.prompt_tokens
          and (rt.choices[0].message.content is not None or rt.choices[0].message.tool_calls),
          f"tool round trip: {rt.choices[0]} {rt.usage}")
    st, _, tb = srv.raw("POST", "/tokenize", {"model": MODEL, "messages": msgs})
    st2, _, db = srv.raw("POST", "/detokenize", {"model": MODEL, "tokens": json.loads(tb)["tokens"] if st == 200 else []})
    text = json.loads(db).get("prompt", "") if st2 == 200 else ""
    check("call:get_weather" in text and "temperatur" in text and "17" in text,
          f"tool round trip: the rendered prompt lacks the call or its result: {text[-300:]!r}")
    note(f"tool round trip answer: {rt.choices[0].message.content!r} ({rt.choices[0].finish_reason})")
    for bad, param in (({"type": "function", "function": {"name": "nope"}}, "tool_choice"), ("required", "tool_choice")):
        try:
            cl.chat.completions.create(tool_choice=bad, **({**base, "tools": TOOLS} if bad != "required" else base))
            check(False, f"tool_choice {bad}: accepted")
        except openai.BadRequestError as e:
            check(e.param == param, f"tool_choice {bad}: param {e.param}")


GET_TIME = [{"type": "function", "function": {"name": "get_time", "description": "Klokken"}}]
TIME_Q = [{"role": "user", "content": "Hvad er klokken?"}]


def token_ids(srv, text):
    st, _, b = srv.raw("POST", "/tokenize", {"model": MODEL, "prompt": text})
    if st != 200:
        raise RuntimeError(f"/tokenize {text!r}: {st} {b[:200]!r}")
    return json.loads(b)["tokens"]


@section
def forced_calls(srv):
    """tool_choice required or named: a whole call comes back as tool_calls, with the forced start counted as
    completion tokens (and the prompt tokens those /tokenize counts for the messages and tools); the call is decoded
    under its grammar, so the model cannot end inside it (an <eos> made certain is masked out); one that runs out of
    tokens inside is a 400 invalid_tool_call naming tool_choice, or for a stream an error event, and never the call's
    markup as content."""
    cl = srv.client()
    st, _, tb = srv.raw("POST", "/tokenize", {"model": MODEL, "messages": TIME_Q, "tools": GET_TIME})
    check(st == 200, f"/tokenize of messages with tools: {st} {tb[:200]!r}")
    count = json.loads(tb)["count"] if st == 200 else -1
    named = {"type": "function", "function": {"name": "get_time"}}
    ft = len(token_ids(srv, "<|tool_call>call:get_time"))  # the named call's forced start: its grammar writes the "{"
    # <eos> made certain: masked out by the call's grammar, so the answer runs to max_tokens inside the call
    stop_now = dict(model=MODEL, messages=TIME_Q, tools=GET_TIME, temperature=0, max_tokens=ft + 8, logit_bias={"1": 100})
    for tc in (named, "required"):
        try:
            r = cl.chat.completions.create(tool_choice=tc, **stop_now)
            check(False, f"a forced call ({tc}) with <eos> made certain: answered {r.choices[0]}")
        except openai.BadRequestError as e:
            check(e.status_code == 400 and e.code == "invalid_tool_call" and e.param == "tool_choice"
                  and "reached max_tokens" in e.message,
                  f"a forced call ({tc}) with <eos> made certain: {e.code} {e.param}: {e.message}")
        chunks, err = [], None
        try:
            for ch in cl.chat.completions.create(tool_choice=tc, stream=True, stream_options={"include_usage": True},
                                                 **stop_now):
                chunks.append(ch)
        except openai.APIError as e:  # the stream's error event, raised by the SDK as it reads it
            err = e
        check(err is not None and isinstance(err.body, dict) and err.body.get("code") == "invalid_tool_call"
              and not any(c.choices and (c.choices[0].delta.content or c.choices[0].delta.tool_calls
                                         or c.choices[0].finish_reason) for c in chunks),
              f"the same streamed ({tc}): error {err!r}, chunks {chunks}")
        st, _, body = srv.raw("POST", "/v1/chat/completions", {**stop_now, "tool_choice": tc, "stream": True})
        events = [ln[6:] for ln in body.decode().split("\n\n") if ln.startswith("data: ")]
        check(st == 200 and len(events) >= 2 and events[-1] == "[DONE]"
              and json.loads(events[-2]).get("error", {}).get("code") == "invalid_tool_call"
              and b"<|tool_call>" not in body, f"the same streamed ({tc}), raw: {st} {body[-400:]!r}")
    # a whole call: the grammar's "{", then "}" and "<tool_call|>" made the likeliest (the biases and penalties found for golden/default: the
    # first step picks "}" by 98 + its logit against 100, the second "<tool_call|>" once "}" carries both penalties)
    close_b, close_t = token_ids(srv, "}"), token_ids(srv, "<tool_call|>")
    whole = dict(model=MODEL, messages=TIME_Q, tools=GET_TIME, tool_choice=named, temperature=0, max_tokens=ft + 3,
                 logit_bias={str(close_b[0]): 100, str(close_t[0]): 98}, frequency_penalty=2, presence_penalty=2)
    r = cl.chat.completions.create(**whole)
    c = r.choices[0]
    check(c.finish_reason == "tool_calls" and c.message.content is None and c.message.tool_calls
          and c.message.tool_calls[0].function.name == "get_time" and c.message.tool_calls[0].function.arguments == "{}",
          f"a whole forced call of get_time: {c}")
    check(r.usage.completion_tokens == ft + 3 and r.usage.prompt_tokens == count,
          f"a forced call's usage: {r.usage}, want {ft + 3} completion tokens (the forced {ft} and 3) and the {count} "
          f"prompt tokens /tokenize counts")
    s, chunks = chat_stream(cl, stream_options={"include_usage": True}, **whole)
    names = [t.function.name for t in s[0]["tool_calls"] if t.function and t.function.name]
    check(names == ["get_time"] and s[0]["finish"] == ["tool_calls"] and not s[0]["text"]
          and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == ft + 3
          and chunks[-1].usage.prompt_tokens == count, f"the whole forced call streamed: {s[0]} {chunks[-1].usage}")
    try:
        cl.chat.completions.create(**{**whole, "max_tokens": ft})
        check(False, f"max_tokens {ft}, the forced start's tokens: accepted")
    except openai.BadRequestError as e:
        check(e.param == "max_tokens", f"max_tokens the forced start uses up: param {e.param}: {e.message}")


@section
def null_fields(srv):
    """null is absent, for the fields frigg refuses values of too (the SDK sends None as null)."""
    cl = srv.client()
    r = cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, response_format=None, functions=None,
                                   function_call=None, audio=None, modalities=None, prediction=None,
                                   reasoning_effort=None, web_search_options=None)
    check(r.choices[0].finish_reason in ("stop", "length"), f"null optional fields: {r.choices[0]}")


@section
def noop_fields(srv):
    """The fields that change nothing here are accepted, and typed."""
    cl = srv.client()
    r = cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, prompt_cache_key="k1",
                                   safety_identifier="user-7", verbosity="low", prompt_cache_retention="24h")
    check(r.choices[0].finish_reason in ("stop", "length"), f"the no-op fields: {r.choices[0]}")
    chunks = list(cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, stream=True,
                                             stream_options={"include_usage": True, "include_obfuscation": False}))
    check(chunks and chunks[-1].usage is not None, "stream_options.include_obfuscation: no usage chunk")
    try:
        cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, verbosity="loud")
        check(False, "verbosity loud: accepted")
    except openai.BadRequestError as e:
        check(e.param == "verbosity", f"verbosity loud: param {e.param}")


@section
def function_keys(srv):
    """A function's strict: true is accepted under tool_choice auto (a call the model makes is decoded under the
    tool's schema), strict false too; a key a function (or a tool) does not take is refused by name, and /tokenize
    checks those as the chat request does (strict is about decoding: /tokenize takes it)."""
    cl = srv.client()
    strict = [{"type": "function", "function": {"name": "get_time", "strict": True}}]
    r = cl.chat.completions.create(model=MODEL, messages=TIME_Q, max_tokens=2, tools=strict)
    check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), "strict true under auto: refused")
    st, _, b = srv.raw("POST", "/tokenize", {"model": MODEL, "messages": TIME_Q, "tools": strict})
    check(st == 200, f"/tokenize with strict: {st} {b[:200]!r}")
    for tools, param in (([{"type": "function", "function": {"name": "get_time", "paramters": {}}}],
                          "tools[0].function.paramters"),
                         ([{"type": "function", "function": {"name": "get_time"}, "strict": True}], "tools[0].strict")):
        try:
            cl.chat.completions.create(model=MODEL, messages=TIME_Q, max_tokens=2, tools=tools)
            check(False, f"{param}: accepted")
        except openai.BadRequestError as e:
            check(e.param == param, f"{param}: {e.param}: {e.message}")
        st, _, b = srv.raw("POST", "/tokenize", {"model": MODEL, "messages": TIME_Q, "tools": tools})
        check(st == 400 and json.loads(b)["error"]["param"] == param, f"/tokenize with {param}: {st} {b[:200]!r}")
    r = cl.chat.completions.create(model=MODEL, messages=TIME_Q, max_tokens=2,
                                   tools=[{"type": "function", "function": {"name": "get_time", "strict": False}}])
    check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), "strict false: refused")


@section
def tokenize_tools(srv):
    """/tokenize of messages with tools counts the chat request's prompt tokens; tools without messages are a 400."""
    cl = srv.client()
    auto = cl.chat.completions.create(model=MODEL, messages=TIME_Q, tools=TOOLS, max_tokens=1, temperature=0)
    st, _, b = srv.raw("POST", "/tokenize", {"model": MODEL, "messages": TIME_Q, "tools": TOOLS})
    check(st == 200 and json.loads(b)["count"] == auto.usage.prompt_tokens,
          f"/tokenize with tools: {st} {b[:80]!r}, the chat's prompt_tokens {auto.usage.prompt_tokens}")
    st, _, b = srv.raw("POST", "/tokenize", {"model": MODEL, "prompt": "x", "tools": TOOLS})
    check(st == 400 and json.loads(b)["error"]["param"] == "tools", f"/tokenize of a prompt with tools: {st} {b[:200]!r}")


@section
def byte_token_logprobs(srv, model_dir):
    """A byte-fallback token's logprobs bytes are its own raw byte; completions' top_logprobs hold the sampled
    token."""
    cl = srv.client()
    # <0xE2>, the first byte of a three-byte character, made certain: each entry's bytes are [0xE2], not U+FFFD's
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        e2 = json.load(f)["model"]["vocab"]["<0xE2>"]
    kw = dict(temperature=0, max_tokens=2, logit_bias={str(e2): 100})
    r = cl.chat.completions.create(model=MODEL, messages=USER, logprobs=True, top_logprobs=1, **kw)
    lp = r.choices[0].logprobs.content if r.choices[0].logprobs else []
    check(len(lp) == 2 and all(e.bytes == [0xE2] for e in lp), f"chat logprobs of <0xE2>: {lp}")
    # completions: OpenAI's legacy top_logprobs hold the sampled token beside the k best (the bias is not in the
    # logprobs, so <0xE2> is not among them)
    r = cl.completions.create(model=MODEL, prompt="<bos>Der", logprobs=1, **kw)
    L = r.choices[0].logprobs
    check(L is not None and len(L.top_logprobs) == 2 and all(
        len(t) == 2 and tok in t and abs(t[tok] - lp) < 1e-6 for t, tok, lp in zip(L.top_logprobs, L.tokens, L.token_logprobs)),
        f"completions top_logprobs without the sampled token: {L}")


@section
def errors(srv):
    cl = srv.client()
    for kind in ("chat", "completion", "chat-stream"):
        try:
            if kind == "completion":
                cl.completions.create(model=MODEL, prompt="<bos>Der var engang", max_tokens=600)
            else:
                cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=600, stream=kind == "chat-stream")
            check(False, f"{kind}: a prompt + 600 tokens (context 512) was accepted")
        except openai.BadRequestError as e:
            check(e.code == "context_length_exceeded" and "512" in e.message,
                  f"{kind}: prompt + 600: code {e.code}: {e.message}")
    try:  # a prompt longer than the context, max_tokens left to its default (the rest of the context)
        cl.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Der var engang en konge. " * 120}])
        check(False, "a prompt over the context: accepted")
    except openai.BadRequestError as e:
        check(e.code == "context_length_exceeded", f"a prompt over the context: code {e.code}")
    try:
        cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, extra_body={"no_such_field": 1})
        check(False, "an unknown field: accepted")
    except openai.BadRequestError as e:
        check(e.param == "no_such_field" and "no_such_field" in e.message, f"an unknown field: param {e.param}")
    try:
        cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, response_format={
            "type": "json_schema", "json_schema": {"name": "t", "schema": {"type": "object", "frobnicate": 1}}})
        check(False, "response_format with an unsupported keyword: accepted")
    except openai.BadRequestError as e:
        check(e.param == "response_format" and "frobnicate" in e.message,
              f"response_format with an unsupported keyword: param {e.param}: {e.message}")
    r = cl.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, response_format={"type": "text"})
    check(r.choices[0].finish_reason in ("stop", "length"), "response_format text: refused")
    for fn in (lambda: cl.chat.completions.create(model="gpt-4o", messages=USER, max_tokens=2),
               lambda: cl.completions.create(model="gpt-4o", prompt="x", max_tokens=2)):
        try:
            fn()
            check(False, "an unknown model: accepted")
        except openai.NotFoundError as e:
            check(e.code == "model_not_found", f"an unknown model: code {e.code}")
    for what, c in (("a wrong key", srv.client(key="not-the-key")), ("no key", srv.client())):
        try:
            extra = {"Authorization": openai.omit} if what == "no key" else None
            c.chat.completions.create(model=MODEL, messages=USER, max_tokens=2, extra_headers=extra)
            check(False, f"{what}: accepted")
        except openai.AuthenticationError as e:
            check(e.code == "invalid_api_key", f"{what}: code {e.code}")
    # raw HTTP
    st, hd, body = srv.raw("GET", "/v1/models", auth=False)
    check(st == 401 and json.loads(body)["error"]["code"] == "invalid_api_key", f"no key, raw: {st}")
    st, hd, body = srv.raw("GET", "/v1/no-such-route")
    check(st == 404 and "error" in json.loads(body), f"unknown route: {st} {body[:80]!r}")
    st, hd, body = srv.raw("GET", "/v1/chat/completions")
    check(st == 405 and hd.get("allow") == "POST" and "error" in json.loads(body), f"GET chat: {st} allow {hd.get('allow')}")
    st, hd, body = srv.raw("POST", "/health")
    check(st == 405 and hd.get("allow") == "GET", f"POST /health: {st} allow {hd.get('allow')}")
    big = json.dumps({"model": MODEL, "prompt": "x" * 70000, "max_tokens": 1}).encode()  # --max-body-bytes 65536
    st, hd, body = srv.raw("POST", "/v1/completions", big, {"Content-Type": "application/json"})
    check(st == 413 and json.loads(body)["error"]["code"] == "request_too_large", f"a 70 kB body: {st} {body[:80]!r}")
    # the same body without a Content-Length (chunked): counted as it arrives
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    c.request("POST", "/v1/completions", body=iter([big[:40000], big[40000:]]),
              headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}, encode_chunked=True)
    r = c.getresponse()
    r.read()
    c.close()
    check(r.status == 413, f"a 70 kB chunked body: {r.status}")
    st, hd, body = srv.raw("POST", "/v1/chat/completions", b"{\"model\": ", {"Content-Type": "application/json"})
    check(st == 400 and json.loads(body)["error"]["type"] == "invalid_request_error", f"malformed JSON: {st}")
    # /tokenize and /detokenize
    text = "Der var engang en konge, som hed Æbelø."
    st, _, tb = srv.raw("POST", "/tokenize", {"model": MODEL, "prompt": text})
    t = json.loads(tb)
    check(st == 200 and t["count"] == len(t["tokens"]) > 3 and t["max_model_len"] == 512, f"/tokenize: {st} {tb[:100]!r}")
    st, _, db = srv.raw("POST", "/detokenize", {"model": MODEL, "tokens": t["tokens"]})
    check(st == 200 and json.loads(db)["prompt"] == text, f"/detokenize(/tokenize(text)) != text: {db[:100]!r}")
    r = cl.completions.create(model=MODEL, prompt=t["tokens"], max_tokens=1, temperature=0)
    check(r.usage.prompt_tokens == t["count"], "completions with /tokenize's ids: another prompt length")
    st, _, _ = srv.raw("POST", "/detokenize", {"model": MODEL, "tokens": [10 ** 9]})
    check(st == 400, f"/detokenize of an id outside the vocabulary: {st}")


SAMPLE_HISTS = ("frigg_time_to_first_token_seconds", "frigg_time_per_output_token_seconds",
                "frigg_e2e_request_latency_seconds", "frigg_request_queue_time_seconds")
COUNTERS = ("frigg_prompt_tokens", "frigg_generation_tokens", "frigg_request_success", "frigg_http_responses")
GAUGES = ("frigg_requests_waiting", "frigg_requests_running", "frigg_slots_in_use", "frigg_slots_total")


@section
def metrics(srv, slots):
    fams, s0 = srv.metrics()
    for name, typ in [(h, "histogram") for h in SAMPLE_HISTS] + [(c, "counter") for c in COUNTERS] + \
                     [(g, "gauge") for g in GAUGES]:
        check(name in fams and fams[name].type == typ, f"/metrics: no {typ} {name} "
              f"({fams[name].type if name in fams else 'absent'})")
    for h in SAMPLE_HISTS:
        buckets = sorted(((float(dict(ls)["le"]), v) for (n, ls), v in s0.items() if n == h + "_bucket"))
        counts = [v for _, v in buckets]
        check(buckets and buckets[-1][0] == float("inf") and counts == sorted(counts)
              and counts[-1] == mval(s0, h + "_count"), f"/metrics: {h} buckets not cumulative or +Inf != count")
    check(mval(s0, "frigg_slots_total") == slots, f"frigg_slots_total {mval(s0, 'frigg_slots_total')}, want {slots}")
    check(all(dict(ls).get("replica") == "cpu:0" for (n, ls) in s0 if n.startswith("frigg_") and
              not n.startswith("frigg_http_")), "/metrics: a series without replica=\"cpu:0\"")  # HTTP: per server
    cl = srv.client()
    body = {k: v for k, v in Long.body(5).items() if k != "stream"} if Long.seed is not None else \
        dict(model=MODEL, prompt="<bos>Der", max_tokens=5)
    r = cl.completions.create(**body)
    try:
        cl.completions.create(model="gpt-4o", prompt="x")
    except openai.NotFoundError:
        pass
    _, s1 = srv.metrics()
    d = lambda n, **l: mval(s1, n, **l) - mval(s0, n, **l)  # noqa: E731
    check(d("frigg_prompt_tokens_total") == r.usage.prompt_tokens,
          f"frigg_prompt_tokens_total moved {d('frigg_prompt_tokens_total')}, the request had {r.usage.prompt_tokens}")
    check(d("frigg_generation_tokens_total") == r.usage.completion_tokens,
          f"frigg_generation_tokens_total moved {d('frigg_generation_tokens_total')}, want {r.usage.completion_tokens}")
    fin = r.choices[0].finish_reason
    check(d("frigg_request_success_total", finish_reason=fin) == 1 and d("frigg_request_success_total") == 1,
          f"frigg_request_success_total{{finish_reason={fin}}} moved {d('frigg_request_success_total', finish_reason=fin)}")
    for h in SAMPLE_HISTS:
        want = 1 if h != "frigg_time_per_output_token_seconds" or r.usage.completion_tokens > 1 else 0
        check(d(h + "_count") == want and d(h + "_sum") >= 0, f"{h}_count moved {d(h + '_count')}, want {want}")
    # the request and the first scrape (counted after its body was made) are 200s; the unknown model a 404
    check(d("frigg_http_responses_total", code="200") == 2 and d("frigg_http_responses_total", code="404") == 1,
          f"frigg_http_responses_total moved 200: {d('frigg_http_responses_total', code='200')} (want 2), "
          f"404: {d('frigg_http_responses_total', code='404')} (want 1)")
    check(mval(s1, "frigg_slots_in_use") == 0 and mval(s1, "frigg_requests_running") == 0
          and mval(s1, "frigg_requests_waiting") == 0, "/metrics: gauges not 0 when idle")


def open_raw(srv, body):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer " +
              KEY.encode() + b"\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


@section
def disconnect(srv):
    if Long.seed is None:
        check(False, "disconnect: no calibrated long request")
        return
    for stream in (True, False):
        what = "streaming" if stream else "non-streaming"
        _, s0 = srv.metrics()
        s = open_raw(srv, Long.body(400, stream=stream))
        if stream:  # read until the first content chunk
            buf = b""
            while buf.count(b"data: ") < 2:
                b = s.recv(4096)
                if not b:
                    break
                buf += b
            check(buf.startswith(b"HTTP/1.1 200"), f"disconnect ({what}): {buf[:60]!r}")
        else:
            wait_for(lambda: mval(srv.metrics()[1], "frigg_slots_in_use") > 0, 5)
            time.sleep(0.3)
        s.close()
        t0 = time.time()

        def back():
            _, m = srv.metrics()
            return (mval(m, "frigg_slots_in_use") == 0 and
                    mval(m, "frigg_request_success_total", finish_reason="cancelled") ==
                    mval(s0, "frigg_request_success_total", finish_reason="cancelled") + 1) and m
        m = wait_for(back, 5)
        check(bool(m), f"disconnect ({what}): within 5 s slots_in_use is not 0 or the cancelled counter did not move by 1")
        if m:
            gen = mval(m, "frigg_generation_tokens_total") - mval(s0, "frigg_generation_tokens_total")
            check(gen < 400, f"disconnect ({what}): {gen} tokens generated, the request ran to its end")
            if not stream:
                check(mval(m, "frigg_http_responses_total", code="499") == mval(s0, "frigg_http_responses_total", code="499") + 1,
                      "disconnect (non-streaming): not counted as 499")
            note(f"disconnect ({what}): freed after {time.time() - t0:.2f} s, {gen:.0f} tokens generated")


@section
def replicas(srv):
    """--replicas 2: requests running at once go to both replicas, and a seeded request is the same on either."""
    if Long.seed is None:
        check(False, "replicas: no calibrated long request")
        return
    cl = srv.client()
    fams, s0 = srv.metrics()
    labels = sorted({dict(ls).get("replica") for (n, ls) in s0 if n == "frigg_slots_total"})
    check(labels == ["cpu:0", "cpu:1"], f"--replicas 2: /metrics replicas {labels}")
    body = {k: v for k, v in Long.body(40).items() if k != "stream"}
    res, errs = [None] * 4, []

    def one(i):
        try:
            res[i] = cl.completions.create(**body).choices[0].text
        except Exception as e:  # noqa: BLE001
            errs.append(repr(e))
    ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    _, s1 = srv.metrics()
    check(not errs, f"replicas: {errs}")
    per = {r: mval(s1, "frigg_request_success_total", replica=r) - mval(s0, "frigg_request_success_total", replica=r)
           for r in ("cpu:0", "cpu:1")}
    gen = {r: mval(s1, "frigg_generation_tokens_total", replica=r) - mval(s0, "frigg_generation_tokens_total", replica=r)
           for r in ("cpu:0", "cpu:1")}
    check(per["cpu:0"] >= 1 and per["cpu:1"] >= 1 and sum(per.values()) == 4 and gen["cpu:0"] > 0 and gen["cpu:1"] > 0,
          f"replicas: 4 requests at once finished {per} per replica, generated {gen}")
    check(len(set(res)) == 1 and res[0] is not None, f"replicas: the same seeded request differs between replicas: {res}")


@section
def queue_limit(srv):
    """--max-queue 1: with one streaming request held open a second is a 429 with Retry-After; the held one keeps
    streaming; once it is gone a request is served again."""
    if Long.seed is None:
        check(False, "queue: no calibrated long request")
        return
    cl = srv.client()
    stream = cl.completions.create(**{**Long.body(Long.min_tokens), "stream": True})
    it = iter(stream)
    first = next(it)
    try:
        cl.completions.create(model=MODEL, prompt="<bos>Han", max_tokens=2)
        check(False, "--max-queue 1: a second request while one runs was accepted")
    except openai.RateLimitError as e:
        check(e.status_code == 429 and e.code == "queue_full" and e.response.headers.get("retry-after") == "1",
              f"--max-queue 1: {e.status_code} {e.code} Retry-After {e.response.headers.get('retry-after')}")
    st, hd, _ = srv.raw("POST", "/v1/completions", {"model": MODEL, "prompt": "<bos>Han", "max_tokens": 2})
    check(st == 429 and hd.get("retry-after") == "1", f"--max-queue 1, raw: {st}")
    rest = list(it)
    check(first.choices and len(rest) >= 5 and rest[-1].choices[0].finish_reason == "length",
          f"the held stream did not go on after the 429s ({len(rest)} more chunks)")
    ok = wait_for(lambda: srv.raw("POST", "/v1/completions", {"model": MODEL, "prompt": "<bos>Han", "max_tokens": 2})[0] == 200, 5)
    check(ok, "--max-queue 1: not served again after the held request ended")


@section
def drain(srv):
    """SIGTERM with a request running: /health 503, new requests 503, the running one completes, exit 0."""
    if Long.seed is None:
        check(False, "drain: no calibrated long request")
        return
    cl = srv.client()
    got = {"first": threading.Event(), "chunks": [], "err": None}

    def run():
        try:
            for ch in cl.completions.create(**{**Long.body(Long.min_tokens), "stream": True,
                                               "stream_options": {"include_usage": True}}):
                got["chunks"].append(ch)
                got["first"].set()
        except Exception as e:  # noqa: BLE001
            got["err"] = repr(e)
        got["first"].set()
    t = threading.Thread(target=run)
    t.start()
    got["first"].wait(30)
    srv.proc.send_signal(signal.SIGTERM)
    def health_503():  # a probe refused or cut off while the server turns is not an answer: ask again
        try:
            return srv.raw("GET", "/health", auth=False)[0] == 503
        except OSError:
            return False
    st = wait_for(health_503, 3)
    check(st, "SIGTERM: /health did not turn 503 while a request runs")
    try:
        sn, _, body = srv.raw("POST", "/v1/completions", {"model": MODEL, "prompt": "<bos>Han", "max_tokens": 2})
        check(sn == 503 and json.loads(body)["error"]["code"] == "shutting_down", f"a new request while draining: {sn}")
    except OSError as e:
        check(False, f"a new request while draining: {e}")
    t.join(120)
    chunks = got["chunks"]
    fins = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    usage = chunks[-1].usage if chunks else None
    check(got["err"] is None and fins == ["length"] and usage is not None and usage.completion_tokens == Long.min_tokens,
          f"SIGTERM: the running request did not complete: error {got['err']}, finishes {fins}, usage {usage}")
    rc = srv.stop(timeout=60)
    check(rc == 0, f"SIGTERM: exit status {rc}")
    check("stopped" in srv.stderr(), "SIGTERM: no 'stopped' on stderr")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    global QUICK
    QUICK = a.quick
    t0 = time.time()
    slots = 6
    servers = []
    try:
        main_srv = Server(a.bin, a.model, ["--threads", "2", "--slots", str(slots), "--api-key", KEY,
                                           "--max-body-bytes", "65536"], "main")
        servers.append(main_srv)
        calibrate(main_srv, 60 if a.quick else 120)
        basics(main_srv)
        chat_and_completions(main_srv)
        n_choices(main_srv)
        stops(main_srv)
        lengths(main_srv)
        logprobs(main_srv)
        tools(main_srv)
        forced_calls(main_srv)
        null_fields(main_srv)
        noop_fields(main_srv)
        function_keys(main_srv)
        tokenize_tools(main_srv)
        byte_token_logprobs(main_srv, a.model)
        errors(main_srv)
        metrics(main_srv, slots)
        concurrency(main_srv)
        disconnect(main_srv)
        q = Server(a.bin, a.model, ["--threads", "2", "--slots", "2", "--api-key", KEY, "--max-queue", "1"], "queue")
        servers.append(q)
        queue_limit(q)
        check(q.stop() == 0, f"--max-queue server: exit status {q.rc}")
        rep = Server(a.bin, a.model, ["--threads", "2", "--slots", "4", "--api-key", KEY, "--replicas", "2"], "replicas")
        servers.append(rep)
        replicas(rep)
        check(rep.stop() == 0, f"--replicas server: exit status {rep.rc}")
        drain(main_srv)
    except Exception as e:  # noqa: BLE001 - a server that did not start
        check(False, f"{type(e).__name__}: {e}")
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
            if failed:  # the sanitizers' reports (their first lines and our frames), then the log's end
                lines = s.stderr().splitlines()
                san = [ln for ln in lines if re.search(r"ERROR: |SUMMARY: |runtime error|(cmd|common)/\w+\.c:", ln)]
                print(f"---- frigg-serve ({s.tag}) stderr ----")
                print("\n".join(san[:40] + ["..."] + lines[-8:] if san else lines[-15:]))
            os.unlink(s.log.name)
    note(f"{time.time() - t0:.1f} s: " + ", ".join(timings))
    print(f"serve: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
