#!/bin/sh
# frigg-bench load against a fake OpenAI-compatible streaming server (Python standard library only, below): the
# row's request, token and error counts by kind (HTTP 500, an SSE error event, a data payload that is not JSON,
# a stream cut before [DONE], a stalled stream past --timeout-s; text with a NUL byte is valid), token counts from the usage chunk (the server
# reports 8 tokens over 4 text chunks), TTFT at least the server's programmed 150 ms first-token delay (loose
# bounds only), what each request carried (checked by the server: exactly P token ids in [1000, 8000), max_tokens,
# temperature 0, stream + include_usage, the model from /v1/models, the Bearer key), --duration-s, and a server
# that is not listening giving connect errors, not a hang. Exit status 1 whenever a request failed.
BIN=${FRIGG_BIN:-bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/bench-load.XXXXXX")
srv=""
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP bench-load: no python3"
    echo "bench-load: 0 passed, 0 failed"
    exit 0
fi
cat > "$T/fake.py" <<'PY'
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, KEY, PLEN = sys.argv[1], sys.argv[2], int(sys.argv[3])
lock = threading.Lock()
count = {}       # model -> requests that arrived
prompts = set()  # distinct prompts seen
bad = []         # why a request was refused

def check(path, r, auth):
    if auth != "Bearer " + KEY: return "Authorization %r" % auth
    if r.get("model") not in ("fake", "fake-broken", "fake-ok"): return "model %r" % r.get("model")
    if r.get("stream") is not True or r.get("stream_options") != {"include_usage": True}: return "stream options"
    if r.get("max_tokens") != 8 or r.get("temperature") != 0: return "max_tokens/temperature"
    if path == "/v1/completions":
        p = r.get("prompt")
        if not (isinstance(p, list) and len(p) == PLEN and all(type(i) is int and 1000 <= i < 8000 for i in p)):
            return "prompt %r" % (p,)
        prompts.add(tuple(p))
    else:
        m = r.get("messages")
        if not (isinstance(m, list) and len(m) == 1 and m[0].get("role") == "user" and len(m[0]["content"].split()) == PLEN):
            return "messages %r" % (m,)
    return None

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def plain(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        if self.path == "/v1/models": self.plain(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        elif self.path == "/stats":
            with lock: self.plain(200, {"count": count, "distinct_prompts": len(prompts), "bad": bad})
        else: self.plain(404, {"error": {"message": "no such path"}})
    def chunk(self, b):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.flush()
    def event(self, obj):
        self.chunk(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")
    def text(self, chat, t):
        c = {"index": 0, "delta": {"content": t}} if chat else {"index": 0, "text": t}
        self.event({"object": "chat.completion.chunk" if chat else "text_completion", "choices": [c]})
    def do_POST(self):
        r = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        chat = self.path == "/v1/chat/completions"
        with lock:
            why = check(self.path, r, self.headers.get("Authorization"))
            if why: bad.append(why)
            model = r.get("model")
            k = count.get(model, 0)
            count[model] = k + 1
        if why: return self.plain(400, {"error": {"message": why}})
        if model == "fake" and k % 10 == 3: return self.plain(500, {"error": {"message": "internal"}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if chat: self.event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})  # no text
            time.sleep(0.15)  # the programmed time to the first token
            if model == "fake" and k % 10 == 7:
                self.text(chat, "x")
                self.event({"error": {"message": "boom", "type": "server_error"}})
            elif model == "fake-broken" and k % 4 == 0:
                self.text(chat, "x")
                self.event(b"{not json")
            elif model == "fake-broken" and k % 4 == 1:
                self.text(chat, "x")
                time.sleep(8)  # past the client's --timeout-s 3 (a loaded machine's slow answer stays within it)
            elif model == "fake-broken" and k % 4 == 2:
                self.text(chat, "x")
                self.text(chat, "y")
                self.wfile.write(b"0\r\n\r\n")  # the stream ends, no [DONE]
                return
            else:
                for i in range(4):  # 4 text chunks, 8 tokens in the usage (fake-broken: none, 3 chunks)
                    if i: time.sleep(0.02)
                    if model == "fake-broken" and i == 3: break
                    # fake-ok: text a model can make, valid JSON however odd: a NUL byte (\u0000) and a character
                    # past the BMP (a surrogate pair), as json.dumps escapes them
                    self.text(chat, " tok%d" % i + ("\x00\U0001F600" if model == "fake-ok" and i == 1 else ""))
                if model != "fake-broken":
                    self.event({"choices": [], "usage": {"prompt_tokens": PLEN, "completion_tokens": 8, "total_tokens": PLEN + 8}})
            self.chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

s = ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
with open(PORT_FILE + ".tmp", "w") as f: f.write(str(s.server_address[1]))
import os; os.rename(PORT_FILE + ".tmp", PORT_FILE)
s.serve_forever()
PY
python3 "$T/fake.py" "$T/port" sekrit 16 2>"$T/server.err" &
srv=$!
for i in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port" 2>/dev/null)
[ -n "$PORT" ] || { echo "FAIL: the fake server did not start"; cat "$T/server.err"; echo "bench-load: 0 passed, 1 failed"; exit 1; }
# flat ROW: the row's fields as KEY<tab>VALUE lines in ROW.kv (objects compact, keys sorted), read by get and within
flat() { python3 -c 'import json,sys
r = json.loads(open(sys.argv[1]).readline())
for k, v in r.items(): print("%s\t%s" % (k, json.dumps(v, sort_keys=True, separators=(",", ":")) if not isinstance(v, str) else v))' "$1" > "$1.kv" 2>/dev/null; }
get() { awk -F '\t' -v k="$2" '$1 == k { print $2 }' "$1.kv"; }
# within ROW KEY LO HI: LO <= field <= HI
within() { awk -F '\t' -v k="$2" -v lo="$3" -v hi="$4" '$1 == k { f = $2 != "null" && $2 + 0 >= lo && $2 + 0 <= hi } END { exit !f }' "$1.kv"; }
stats() { python3 -c 'import json,sys,urllib.request; s=json.load(urllib.request.urlopen("http://127.0.0.1:%s/stats" % sys.argv[1])); v=s[sys.argv[2]]; print(v.get(sys.argv[3], 0) if len(sys.argv) > 3 else v)' "$PORT" "$@"; }

# 1. completions, model from /v1/models, key from FRIGG_API_KEY, base URL given with /v1/: 20 requests, of which
# the server answers 2 with HTTP 500 and 2 with an SSE error event.
FRIGG_API_KEY=sekrit timeout 30 "$BIN/frigg-bench" load --url "http://127.0.0.1:$PORT/v1/" --streams 4 --requests 20 \
    --prompt-tokens 16 --max-tokens 8 --seed 3 > "$T/r1" 2> "$T/e1"; rc=$?
flat "$T/r1"
[ "$rc" = 1 ] && ok || no "run 1: exit status $rc, want 1 (requests failed)"
[ "$(wc -l < "$T/r1")" = 1 ] && ok || no "run 1: $(wc -l < "$T/r1") rows, want 1"
[ "$(get "$T/r1" bench)" = load ] && [ "$(get "$T/r1" model)" = fake ] && [ "$(get "$T/r1" endpoint)" = completions ] \
    && ok || no "run 1: bench/model/endpoint: $(cat "$T/r1")"
[ "$(get "$T/r1" requests)" = 16 ] && [ "$(get "$T/r1" failed)" = 4 ] && ok \
    || no "run 1: requests $(get "$T/r1" requests) failed $(get "$T/r1" failed), want 16 and 4"
[ "$(get "$T/r1" errors)" = '{"http_500":2,"sse_error":2}' ] && ok || no "run 1: errors $(get "$T/r1" errors)"
[ "$(get "$T/r1" tokens)" = 128 ] && [ "$(get "$T/r1" tokens_min)" = 8 ] && [ "$(get "$T/r1" tokens_max)" = 8 ] \
    && [ "$(get "$T/r1" requests_without_usage)" = 0 ] && ok \
    || no "run 1: tokens $(get "$T/r1" tokens) (min $(get "$T/r1" tokens_min)), want 128 from the usage chunks"
[ "$(get "$T/r1" usage_prompt_tokens_mean)" = 16.0 ] && [ "$(get "$T/r1" prompt_tokens)" = 16 ] && ok \
    || no "run 1: prompt tokens $(get "$T/r1" usage_prompt_tokens_mean)"
within "$T/r1" ttft_ms_p50 140 2000 && within "$T/r1" ttft_ms_p99 140 3000 && ok \
    || no "run 1: TTFT p50 $(get "$T/r1" ttft_ms_p50) ms p99 $(get "$T/r1" ttft_ms_p99), the server waits 150 ms"
within "$T/r1" tpot_ms_p50 4 500 && ok || no "run 1: TPOT p50 $(get "$T/r1" tpot_ms_p50) ms (3 gaps of 20 ms over 7 tokens)"
within "$T/r1" e2e_ms_p50 190 4000 && within "$T/r1" tok_s 1 100000 && ok \
    || no "run 1: e2e p50 $(get "$T/r1" e2e_ms_p50) ms, tok/s $(get "$T/r1" tok_s)"
[ "$(get "$T/r1" streams)" = 4 ] && [ "$(get "$T/r1" requests_limit)" = 20 ] && [ -n "$(get "$T/r1" gpu)" ] \
    && get "$T/r1" command | grep -q 'frigg-bench load' && ok || no "run 1: streams/limit/gpu/command: $(cat "$T/r1")"
[ "$(stats count fake)" = 20 ] && [ "$(stats distinct_prompts)" = 20 ] && ok \
    || no "run 1: the server saw $(stats count fake) requests, $(stats distinct_prompts) distinct prompts, want 20 and 20"
grep -q '^load: 4 streams, 16 requests (4 failed)' "$T/e1" && ok || no "run 1: no summary on stderr: $(cat "$T/e1")"

# 2. chat, --api-key (masked in the row): a payload that is not JSON, a stall past --timeout-s, a stream cut
# before [DONE], and one that succeeds without a usage chunk (its 3 text chunks are its tokens).
timeout 30 "$BIN/frigg-bench" load --url "http://127.0.0.1:$PORT" --endpoint chat --model fake-broken --api-key sekrit \
    --streams 4 --requests 4 --prompt-tokens 16 --max-tokens 8 --timeout-s 3 > "$T/r2" 2> "$T/e2"; rc=$?
flat "$T/r2"
[ "$rc" = 1 ] && ok || no "run 2: exit status $rc, want 1"
[ "$(get "$T/r2" errors)" = '{"malformed":2,"timeout":1}' ] && ok || no "run 2: errors $(get "$T/r2" errors)"
[ "$(get "$T/r2" requests)" = 1 ] && [ "$(get "$T/r2" tokens)" = 3 ] && [ "$(get "$T/r2" requests_without_usage)" = 1 ] \
    && [ "$(get "$T/r2" prompt)" = words ] && ok || no "run 2: $(cat "$T/r2")"
within "$T/r2" ttft_ms_p50 140 2000 && ok || no "run 2: TTFT $(get "$T/r2" ttft_ms_p50) ms (the empty role chunk counts as text?)"
! grep -q sekrit "$T/r2" && grep -q -- '--api-key \*\*\*' "$T/r2" && ok || no "run 2: the API key is not masked: $(get "$T/r2" command)"

# 3. --duration-s 1, 2 streams, nothing fails (a chunk's text holds "\u0000" and a surrogate pair: valid JSON):
# exit 0; every request the server saw is counted.
timeout 30 "$BIN/frigg-bench" load --url "http://127.0.0.1:$PORT" --model fake-ok --api-key sekrit --streams 2 \
    --duration-s 1 --prompt-tokens 16 --max-tokens 8 > "$T/r3" 2> "$T/e3"; rc=$?
flat "$T/r3"
[ "$rc" = 0 ] && ok || { no "run 3: exit status $rc, want 0"; cat "$T/e3"; }
[ "$(get "$T/r3" failed)" = 0 ] && [ "$(get "$T/r3" errors)" = '{}' ] && within "$T/r3" requests 4 20 \
    && [ "$(get "$T/r3" requests)" = "$(stats count fake-ok)" ] && ok \
    || no "run 3: requests $(get "$T/r3" requests) (server $(stats count fake-ok)), errors $(get "$T/r3" errors)"
within "$T/r3" duration_s 1 5 && [ "$(get "$T/r3" duration_limit_s)" = 1 ] && ok || no "run 3: duration $(get "$T/r3" duration_s) s"
[ "$(stats bad)" = "[]" ] && ok || no "the server refused requests: $(stats bad)"

# 4. nothing listening: connect errors, counted, promptly.
dead=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
timeout 20 "$BIN/frigg-bench" load --url "http://127.0.0.1:$dead" --streams 2 --requests 5 --prompt-tokens 4 \
    --max-tokens 4 > "$T/r4" 2> "$T/e4"; rc=$?
flat "$T/r4"
[ "$rc" = 1 ] && ok || no "run 4: exit status $rc, want 1 (124: it hung)"
[ "$(get "$T/r4" errors)" = '{"connect":5}' ] && [ "$(get "$T/r4" requests)" = 0 ] && [ "$(get "$T/r4" ttft_ms_p50)" = null ] \
    && [ "$(get "$T/r4" model)" = null ] && ok || no "run 4: $(cat "$T/r4") $(cat "$T/e4")"

# 5. usage errors: exit 2.
for args in "load --streams 1 --requests 1 --prompt-tokens 1 --max-tokens 1" \
            "load --url http://127.0.0.1:1 --streams 1 --requests 1 --duration-s 1 --prompt-tokens 1 --max-tokens 1" \
            "load --url http://127.0.0.1:1 --streams 1 --requests 1 --max-tokens 1" \
            "load decode --url http://127.0.0.1:1 --streams 1 --requests 1 --prompt-tokens 1 --max-tokens 1" \
            "load --url ftp://127.0.0.1:1 --streams 1 --requests 1 --prompt-tokens 1 --max-tokens 1" \
            "load --url http://127.0.0.1:1 --endpoint embeddings --streams 1 --requests 1 --prompt-tokens 1 --max-tokens 1" \
            "decode --random-mimir --url http://127.0.0.1:1"; do
    # shellcheck disable=SC2086
    timeout 10 "$BIN/frigg-bench" $args > /dev/null 2>&1; rc=$?
    [ "$rc" = 2 ] && ok || no "frigg-bench $args: exit status $rc, want 2"
done
echo "bench-load: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
