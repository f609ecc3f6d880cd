#!/bin/sh
# frigg-serve against malformed HTTP on raw sockets: a truncated request line, garbage, oversized headers, a
# body shorter than its Content-Length, a slow body, a request cut off mid-body. For each the server answers
# or closes (within the connection timeout), never hangs or crashes, and meanwhile and afterwards keeps
# serving others (/health and a completion).
# Framing (RFC 9112's request-smuggling advice): Content-Length with Transfer-Encoding: chunked, and two
# Content-Lengths, are a 400 and the connection closed, so a request hidden in the body is never answered; a
# transfer coding other than chunked is a 501. Content-Encoding: gzip, x-gzip, deflate (zlib's format and raw) and
# identity bodies are decoded and answered; a gzip bomb (inflating past --max-body-bytes) is a 413, a corrupt or
# truncated body a 400, br, a list of codings or an unknown coding a 415 with Accept-Encoding.
# Prints "http-malformed.sh: N passed, N failed".
set -u
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
"$BIN/frigg-serve" --model "$ROOT/golden/default" --port 0 --threads 1 --slots 2 --timeout-s 3 --header-timeout-s 3 \
    --max-body-bytes 65536 \
    2>"$tmp/serve.log" &
pid=$!
port=""
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/serve.log")
    [ -n "$port" ] && grep -q "ready" "$tmp/serve.log" && break
    sleep 0.1
done
if [ -z "$port" ]; then
    cat "$tmp/serve.log"; echo "http-malformed.sh: 0 passed, 1 failed"; exit 1
fi
python3 - "$port" "$pid" <<'PY'
import gzip, json, os, socket, sys, threading, time, zlib
port, pid = int(sys.argv[1]), int(sys.argv[2])
passed = failed = 0
def check(ok, what):
    global passed, failed
    if ok: passed += 1
    else:
        failed += 1
        print("FAIL:", what)
def raw(data, read_timeout=6.0, close_write=True, pause=0.0, more=b""):
    """Send bytes, optionally pause and send more; return (response bytes, seconds until the server answered or closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    t0 = time.time()
    s.sendall(data)
    if pause:
        time.sleep(pause)
        try: s.sendall(more)
        except OSError: pass
    if close_write:
        try: s.shutdown(socket.SHUT_WR)
        except OSError: pass
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            out += b
    except socket.timeout:
        out += b"<<timeout>>"
    except OSError:
        pass
    s.close()
    return out, time.time() - t0
def alive(what):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    out = b""
    while True:
        b = s.recv(65536)
        if not b: break
        out += b
    s.close()
    check(out.startswith(b"HTTP/1.1 200") and b'"ok"' in out, f"{what}: /health afterwards: {out[:80]!r}")
def completion(what):
    body = json.dumps({"model": "default", "prompt": [5, 6, 7], "max_tokens": 3}).encode()
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    out, _ = raw(req, close_write=False)
    check(out.startswith(b"HTTP/1.1 200") and b'"text_completion"' in out, f"{what}: a completion afterwards: {out[:120]!r}")
def still_running(what):
    try:
        os.kill(pid, 0)
        check(True, what)
    except OSError:
        check(False, f"{what}: the server process is gone")

cases = [
    ("truncated request line", b"GET /hea"),
    ("garbage", bytes(range(256)) * 4),
    ("no HTTP version", b"GET /health\r\n\r\n"),
    ("bad method token", b"G\x00T /health HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("oversized header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n"),
    ("many headers", b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(5000)) + b"\r\n"),
    ("body shorter than Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"model\":"),
    ("negative Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"),
    ("huge Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n{}"),
    ("body over the limit", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b" " * 100000),
    ("bad chunked encoding", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"),
]
for what, data in cases:
    out, dt = raw(data)
    check(b"<<timeout>>" not in out, f"{what}: the server neither answered nor closed within 6 s ({dt:.1f} s)")
    still_running(f"{what}: process alive")
check(b"413" in raw(cases[9][1])[0][:20], "body over the limit: not a 413")

# A slow body (a few bytes, then silence) holds one connection; others are served meanwhile, and the slow
# one is closed by the connection timeout (3 s here).
res = {}
def slow():
    res["slow"] = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n{\"mo", close_write=False,
                      read_timeout=15)
t = threading.Thread(target=slow)
t.start()
time.sleep(0.5)
t0 = time.time()
alive("during a slow body")
check(time.time() - t0 < 2, "during a slow body: /health took more than 2 s")
t.join()
out, dt = res["slow"]
check(b"<<timeout>>" not in out and dt < 12, f"slow body: not closed by the 3 s connection timeout ({dt:.1f} s, {out[:60]!r})")

# Framing: Content-Length beside Transfer-Encoding (a proxy framing by one and the server by the other would let
# the body's second request through), two Content-Lengths, a transfer coding the server does not implement.
hidden = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
smuggle = [
    ("Content-Length and Transfer-Encoding: chunked", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden, 400, b"Content-Length and Transfer-Encoding"),
    ("Transfer-Encoding: chunked and Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + hidden, 400, b"Content-Length and Transfer-Encoding"),
    ("two Content-Lengths", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: "
     + str(len(hidden)).encode() + b"\r\n\r\n" + hidden, 400, b"more than one Content-Length"),
    ("Transfer-Encoding: gzip", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"
     + hidden, 501, b"only chunked"),
    ("Transfer-Encoding: gzip, chunked", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked"
     b"\r\n\r\n0\r\n\r\n" + hidden, 501, b"only chunked"),
]
for what, data, status, says in smuggle:
    out, dt = raw(data, close_write=False)
    check(out.startswith(b"HTTP/1.1 %d" % status) and says in out, f"{what}: not a {status} naming it: {out[:160]!r}")
    check(out.count(b"HTTP/1.1 ") == 1, f"{what}: the request inside the body was answered too: {out[-120:]!r}")
    check(b"<<timeout>>" not in out, f"{what}: the connection was not closed after the refusal")

# Content-Encoding of a request body.
def post_encoded(body, encoding):
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
           + (b"Content-Encoding: " + encoding + b"\r\n" if encoding is not None else b"")
           + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return raw(req, close_write=False)[0]
plain = json.dumps({"model": "default", "prompt": [5, 6, 7], "max_tokens": 3}).encode()
def raw_deflate(b):
    c = zlib.compressobj(wbits=-15)
    return c.compress(b) + c.flush()
for enc, body in [(b"gzip", gzip.compress(plain)), (b"x-gzip", gzip.compress(plain)), (b"GZIP", gzip.compress(plain)),
                  (b"deflate", zlib.compress(plain)), (b"deflate", raw_deflate(plain)), (b"identity", plain),
                  (b"gzip", gzip.compress(plain[:20]) + gzip.compress(plain[20:]))]:
    out = post_encoded(body, enc)
    check(out.startswith(b"HTTP/1.1 200") and b'"text_completion"' in out,
          f"Content-Encoding {enc.decode()} ({len(body)} bytes): not answered: {out[:160]!r}")
bomb = gzip.compress(b"{" + b" " * (8 << 20) + b"}")  # 8 MiB of JSON whitespace in ~8 KB, the limit 64 KiB
out = post_encoded(bomb, b"gzip")
check(out.startswith(b"HTTP/1.1 413") and b"decoded request body is larger" in out,
      f"a gzip bomb ({len(bomb)} bytes, 8 MiB decoded): not a 413: {out[:160]!r}")
for what, body, enc in [("corrupt gzip", b"\x1f\x8b\x08\x00garbage-garbage", b"gzip"),
                        ("truncated gzip", gzip.compress(plain)[:-12], b"gzip"),
                        ("gzip with bytes after its end", zlib.compress(plain) + b"xyz", b"deflate")]:
    out = post_encoded(body, enc)
    check(out.startswith(b"HTTP/1.1 400") and b"does not decode" in out, f"{what}: not a 400 saying so: {out[:160]!r}")
for enc in (b"br", b"gzip, deflate", b"compress", b"zstd", b"gzip" + b" " * 40 + b"br"):
    out = post_encoded(plain, enc)
    check(out.startswith(b"HTTP/1.1 415") and b"Accept-Encoding: gzip, deflate" in out,
          f"Content-Encoding {enc.decode()}: not a 415 with Accept-Encoding: {out[:200]!r}")
still_running("after the encoded bodies")

# A request cut off mid-body by the client closing.
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n{\"model\":\"default\",")
s.close()
time.sleep(0.3)
still_running("a request cut off mid-body")
alive("after everything")
completion("after everything")
print(f"http-malformed.sh: {passed} passed, {failed} failed")
PY
