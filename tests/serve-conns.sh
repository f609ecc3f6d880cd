#!/bin/sh
# frigg-serve's connections, on raw sockets and http.client (python3's standard library only), two servers on the
# bundled model:
#  A (--max-conns-per-ip 800 --cors-origin https://app.example --verbose --api-key K):
#    - 3,000 idle connections held (750 from each of 127.0.0.2-5, as a client that opens them and sends nothing),
#      and meanwhile /health (its latency printed in a NOTE line) and a completion from 127.0.0.1 are answered,
#      /metrics counts the connections open, and the held connections are still open afterwards;
#    - 60 more from 127.0.0.2: 50 fit under its limit, 10 are refused (closed at once), counted in /metrics, while
#      127.0.0.6 and 127.0.0.1 are still served; the log sums the refusals up in one line, not a line each;
#    - CORS: a preflight (OPTIONS) answers 204 with Access-Control-Allow-Origin/-Methods/-Headers/-Max-Age,
#      without the API key; every response (200, 401, 404, 405, streamed) carries Access-Control-Allow-Origin;
#    - a client that disconnects mid-stream, and one that disconnects while its non-streamed request runs: each
#      request is cancelled, and the log holds no "internal error" line (at most --verbose's line saying the
#      client went away).
#  B (--header-timeout-s 2 --timeout-s 20, no CORS):
#    - a connection that sends nothing, and one that sends a header line every 0.4 s and never ends its headers,
#      are both closed about 2 s after they connected (not 20), counted in /metrics and summed up in the log;
#    - a connection whose first request was answered stays open, idle, past the header timeout, and answers its
#      next request (from then on --timeout-s applies);
#    - OPTIONS is a 405 with Allow, and no response carries Access-Control-Allow-Origin;
#    - clients that leave mid-stream, while a non-streamed request runs, mid-headers or at once: the requests
#      are cancelled, and without --verbose the log has no line for any of them (only the summaries).
# Prints "serve-conns.sh: N passed, N failed".
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
exec python3 - "$BIN/frigg-serve" "$ROOT/golden/default" <<'PY'
import http.client, json, os, re, resource, signal, socket, subprocess, sys, tempfile, threading, time

exe, model = sys.argv[1:3]
passed = failed = 0
ORIGIN = "https://app.example"
KEY = "serve-conns-key"
BODY = {"model": "default", "prompt": [5, 6, 7], "max_tokens": 3}


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)
    return ok


def finish():
    for srv in SERVERS:  # the logs stay (their paths printed) when something failed
        if srv.proc.poll() is None:  # one left running by a failure (stop() was not reached)
            srv.proc.kill()
            srv.proc.wait()
        if failed:
            print(f"NOTE: the server's log: {srv.log.name}")
        else:
            os.unlink(srv.log.name)
    print(f"serve-conns.sh: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


SERVERS = []


class Server:
    def __init__(self, tag, *args):
        self.log = tempfile.NamedTemporaryFile(prefix=f"serve-conns-{tag}.", suffix=".log", delete=False)
        SERVERS.append(self)
        self.proc = subprocess.Popen([exe, "--model", model, "--port", "0", "--threads", "1", "--slots", "2", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        self.key = args[args.index("--api-key") + 1] if "--api-key" in args else None
        self.port = None
        t0 = time.time()
        while time.time() - t0 < 30 and self.proc.poll() is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.stderr())
            if m and "ready" in self.stderr():
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        if not self.port:
            print(self.stderr())
            check(False, f"server {tag} ({' '.join(args)}) did not start")
            finish()

    def stderr(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def http(self, method, path, body=None, headers=None, src="127.0.0.1", timeout=20, auth=True):
        """(status, headers with lower-case names, body) over a fresh connection from address src, with the
        server's API key unless auth is False."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout, source_address=(src, 0))
        h = dict(headers or {})
        if auth and self.key:
            h["Authorization"] = "Bearer " + self.key
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        except (OSError, http.client.HTTPException) as e:  # refused, reset, closed: a failed check, not a crash
            return None, {}, repr(e).encode()
        finally:
            c.close()

    def metric(self, name):
        st, _, body = self.http("GET", "/metrics")
        m = re.search(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), body.decode(), re.M)
        return float(m.group(1)) if st == 200 and m else None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "hung"
        check(rc == 0, f"the server exits 0 on SIGTERM (rc {rc})")
        return self.stderr()


def is_open(s):
    """True when the server has not closed the socket (nothing to read, no end, no reset)."""
    s.setblocking(False)
    try:
        s.recv(1)  # the end (b""), or a byte, which an idle connection is never sent either
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def hold(src, n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind((src, 0))
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", A.port))
            socks.append(s)
        except OSError:
            s.close()
    return socks


def wait_for(pred, secs):
    t0 = time.time()
    while time.time() - t0 < secs:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


# This process holds the 3,060 client sockets, the server (which raises its own soft limit to the hard one) their
# other ends: both need the soft open-files limit (ulimit -n, often 1024) raised, which the hard one must allow.
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
NEED = 3300
if hard != resource.RLIM_INFINITY and hard < NEED:
    print(f"SKIP serve-conns: the open-files hard limit (ulimit -Hn) is {hard}: 3,000 connections need {NEED}")
    finish()
if soft != resource.RLIM_INFINITY and soft < NEED:
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
    except (ValueError, OSError) as e:
        print(f"SKIP serve-conns: the open-files soft limit (ulimit -n) {soft} cannot be raised to {NEED}: {e}")
        finish()

A = Server("A", "--max-conns-per-ip", "800", "--cors-origin", ORIGIN, "--verbose", "--api-key", KEY)
B = Server("B", "--header-timeout-s", "2", "--timeout-s", "20")

# ---- B's header timeout, in the background while A is tested
res = {}


def closed_after(sock, t0):
    sock.settimeout(10)
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass
    return time.time() - t0


def silent():
    s = socket.create_connection(("127.0.0.1", B.port))
    res["silent"] = closed_after(s, time.time())


def slowloris():
    s = socket.create_connection(("127.0.0.1", B.port))
    t0 = time.time()
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    s.settimeout(0.4)
    for i in range(30):  # 12 s of header lines unless the server closes first
        try:
            s.sendall(b"X-Slow-%d: y\r\n" % i)
            if s.recv(4096) == b"":
                break
        except socket.timeout:
            continue
        except OSError:
            break
    res["slowloris"] = time.time() - t0


def keepalive():
    c = http.client.HTTPConnection("127.0.0.1", B.port, timeout=20)
    c.request("GET", "/health")
    r1 = c.getresponse()
    r1.read()
    time.sleep(3.5)  # past the 2 s header timeout
    try:
        c.request("GET", "/health")
        r2 = c.getresponse()
        r2.read()
        res["keepalive"] = (r1.status, r2.status)
    except (OSError, http.client.HTTPException) as e:
        res["keepalive"] = (r1.status, repr(e))


bg = [threading.Thread(target=f) for f in (silent, slowloris, keepalive)]
for t in bg:
    t.start()

# ---- A: 3,000 idle connections from four addresses, then /health and a completion from a fifth
t0 = time.time()
held = []
for i in range(2, 6):
    held += hold(f"127.0.0.{i}", 750)
check(len(held) == 3000, f"3000 idle connections opened, {len(held)} connected ({time.time() - t0:.1f} s)")
opened = wait_for(lambda: (A.metric("frigg_http_connections_open") or 0) >= 3000, 10)
check(opened, f"frigg_http_connections_open is {A.metric('frigg_http_connections_open')}, want >= 3000")
lat = []
for _ in range(5):
    t1 = time.time()
    st, _, body = A.http("GET", "/health", timeout=5)
    lat.append(time.time() - t1)
    check(st == 200 and b'"ok"' in body, f"/health while 3000 connections are held: {st} {body[:80]!r}")
st, hd, body = A.http("POST", "/v1/completions", BODY)
check(st == 200 and b"text_completion" in body, f"a completion while 3000 connections are held: {st} {body[:120]!r}")
if opened:
    print(f"NOTE: /health while 3000 idle connections are held: median {sorted(lat)[2] * 1e3:.1f} ms, "
          f"max {max(lat) * 1e3:.1f} ms", flush=True)

# ---- the per-address limit: 127.0.0.2 holds 750 of its 800
extra = hold("127.0.0.2", 60)
time.sleep(1.0)
alive = sum(is_open(s) for s in extra)
check(len(extra) == 60 and alive == 50, f"60 more from 127.0.0.2 (750 held, limit 800): {alive} stayed open, want 50")
check(A.metric("frigg_http_connections_refused_total") == 10,
      f"frigg_http_connections_refused_total {A.metric('frigg_http_connections_refused_total')}, want 10")
for src in ("127.0.0.6", "127.0.0.1"):
    st, _, _ = A.http("GET", "/health", src=src)
    check(st == 200, f"/health from {src} while 127.0.0.2 is at its limit: {st}")
still = sum(is_open(s) for s in held)
check(still == 3000, f"held connections still open after the checks: {still} of 3000")
for s in held + extra:
    s.close()

# ---- CORS on A
st, hd, body = A.http("OPTIONS", "/v1/chat/completions", auth=False, headers={
    "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type"})
check(st == 204 and hd.get("access-control-allow-origin") == ORIGIN and "POST" in hd.get("access-control-allow-methods", "")
      and "authorization" in hd.get("access-control-allow-headers", "").lower()
      and "content-type" in hd.get("access-control-allow-headers", "").lower()
      and hd.get("access-control-max-age", "").isdigit() and body == b"",
      f"CORS preflight: {st} {hd}")
st, hd, _ = A.http("OPTIONS", "/health", auth=False, headers={"Origin": ORIGIN})
check(st == 204 and "GET" in hd.get("access-control-allow-methods", ""), f"CORS preflight of a GET route: {st} {hd}")
for what, (method, path, body) in {"200": ("GET", "/health", None), "404": ("GET", "/nope", None),
                                   "405": ("GET", "/v1/completions", None),
                                   "completion": ("POST", "/v1/completions", BODY), "401": ("GET", "/metrics", None),
                                   "stream": ("POST", "/v1/completions", dict(BODY, stream=True))}.items():
    st, hd, _ = A.http(method, path, body, headers={"Origin": ORIGIN}, auth=what != "401")
    check(st == {"404": 404, "405": 405, "401": 401}.get(what, 200), f"CORS: the {what} request answered {st}")
    check(hd.get("access-control-allow-origin") == ORIGIN, f"CORS: the {what} response ({st}) has no "
          f"Access-Control-Allow-Origin: {hd}")

# ---- disconnects on A: mid-stream, and during a non-streamed generation
LONG = {"model": "default", "prompt": "<bos>Der var engang", "max_tokens": 480, "temperature": 0,
        "logit_bias": {"1": -100, "106": -100}}


def raw_post(srv, body):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
    data = json.dumps(body).encode()
    key = b"Authorization: Bearer " + srv.key.encode() + b"\r\n" if srv.key else b""
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + key + b"Content-Type: application/json\r\nContent-Length: "
              + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


CANCELLED = 'frigg_request_success_total{replica="cpu:0",finish_reason="cancelled"}'


def leave_twice(srv):
    """A client that leaves mid-stream, then one that leaves while its non-streamed request runs: both cancelled."""
    cancelled0 = srv.metric(CANCELLED) or 0
    s = raw_post(srv, dict(LONG, stream=True))
    buf = b""
    while buf.count(b"data: ") < 3:
        b = s.recv(4096)
        if not b:
            break
        buf += b
    check(buf.startswith(b"HTTP/1.1 200") and b"[DONE]" not in buf, f"a long stream began: {buf[:80]!r}")
    s.close()
    s = raw_post(srv, LONG)
    wait_for(lambda: (srv.metric('frigg_slots_in_use{replica="cpu:0"}') or 0) > 0, 5)
    time.sleep(0.2)
    s.close()
    done = wait_for(lambda: srv.metric(CANCELLED) == cancelled0 + 2
                    and srv.metric('frigg_slots_in_use{replica="cpu:0"}') == 0, 10)
    check(done, "the stream and the non-streamed request whose clients left were not both cancelled within 10 s")


leave_twice(A)

for t in bg:
    t.join()

# ---- B: the header timeout, keep-alive past it, no CORS
check(1.5 < res.get("silent", 0) < 5, f"a silent connection closed after {res.get('silent', 0):.1f} s, want about 2 s")
check(1.5 < res.get("slowloris", 0) < 5,
      f"a connection sending a header line every 0.4 s closed after {res.get('slowloris', 0):.1f} s, want about 2 s")
check(res.get("keepalive") == (200, 200), f"a kept-alive connection idle past the header timeout: {res.get('keepalive')}")
check((B.metric("frigg_http_header_timeouts_total") or 0) >= 2,
      f"frigg_http_header_timeouts_total {B.metric('frigg_http_header_timeouts_total')}, want >= 2")
st, hd, _ = B.http("OPTIONS", "/v1/chat/completions", headers={"Origin": ORIGIN})
check(st == 405 and hd.get("allow") == "POST" and "access-control-allow-origin" not in hd,
      f"OPTIONS without --cors-origin: {st} {hd}")
st, hd, _ = B.http("GET", "/health", headers={"Origin": ORIGIN})
check(st == 200 and "access-control-allow-origin" not in hd, f"no CORS header without --cors-origin: {hd}")

# ---- B, without --verbose: clients that leave (mid-stream, mid-request, mid-headers, at once) print nothing
leave_twice(B)
for data in (b"GET /hea", b""):
    s = socket.create_connection(("127.0.0.1", B.port))
    s.sendall(data)
    s.close()
time.sleep(0.3)

# ---- the logs
la, lb = A.stop(), B.stop()
SUMMARY = r"frigg-serve: http: \d+ connection\(s\) closed in the last 10 s: no request headers within --header-timeout-s 2"
noisy = [l for l in lb.splitlines() if not l.startswith("frigg-serve: ") or "internal error" in l.lower()
         or (l.startswith("frigg-serve: http: ") and not re.fullmatch(SUMMARY, l))]
check(not noisy, "B's log (no --verbose) has a line for a single connection: " + " | ".join(noisy)[:400])
check("internal error" not in la.lower(), "A's log has an \"internal error\" line: " +
      " | ".join(l for l in la.splitlines() if "internal error" in l.lower())[:300])
check(not re.search(r"Server reached connection limit", la) and
      re.search(r"http: 10 connection\(s\) refused", la), "A's log does not sum the 10 refusals up in one line:\n" + la[-800:])
check(re.search(r"http: [2-9]\d* connection\(s\) closed .*no request headers within --header-timeout-s 2", lb),
      "B's log does not sum the header timeouts up:\n" + lb[-800:])
finish()
PY
