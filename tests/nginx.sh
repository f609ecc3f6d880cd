#!/bin/sh
# Several frigg-serve hosts behind nginx, with the shipped scripts/deploy/nginx-frigg.conf (only its backend
# addresses, listen port and log directory rewritten). Three frigg-serve processes on the bundled model, each
# in its own network namespace joined to this one by a veth pair (as root, where `ip netns` and veth work;
# else, or with FRIGG_NGINX_NETNS=0, three ports on 127.0.0.1; the line "nginx: backends ..." says which);
# nginx as an unprivileged foreground process under a temporary prefix. All traffic stays on this machine.
# Checked:
#  - the config passes `nginx -t`; /v1/models answers through it; the client's Authorization header reaches
#    the backends (no key: their 401); a body of exactly 4194304 bytes (frigg-serve's default --max-body-bytes)
#    reaches a backend, one byte more is nginx's own 413; /metrics is not served through the balancer;
#  - streaming passes unbuffered: a 100-token stream's first event arrives long before its last, and most
#    events arrive apart, through the shipped server block, and through a copy of it with gzip on for event
#    streams and frigg-serve's "X-Accel-Buffering: no" ignored (so the shipped proxy_buffering off is what
#    keeps it streaming); the same copy with proxy_buffering on must fail that measurement (gzip then holds
#    the stream to its end), or the measurement could not fail;
#  - load: a long stream starts, its backend is found from the backends' /metrics, then 60 requests from 6
#    concurrent clients (chat and completions, streamed and not, 12 to 28 tokens) run, and that backend is
#    SIGKILLed after 20 of them ("after the kill" begins once it refuses connections): every request ends as
#    a whole response (a stream: ending in data: [DONE]), an HTTP error, or a cut stream counted as failed
#    (never as a success), and none hangs (timeouts); the long stream is cut, promptly; every request started
#    after the kill succeeds, on a live backend (nginx's access log); nginx tried the dead backend a few times
#    right after the kill and then at most once per fail_timeout (max_fails); each surviving backend's
#    /metrics count of finished requests equals the access log's count of 200s from it, and nginx keeps idle
#    keepalive connections open to it;
#  - at the end: the survivors and nginx exit 0 on SIGTERM, and no process, namespace or veth is left.
# Takes 10 to 20 s on two cores. FRIGG_QUICK=1 (make sanitize): 30 requests of 4 to 8 tokens, the kill after
# 10, 30-token timing streams, longer timeouts.
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-$(pwd)}
CONF="$ROOT/scripts/deploy/nginx-frigg.conf"
MODEL="$ROOT/golden/default"
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
summary() { echo "nginx: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; }

NGINX=$(command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; })
if [ -z "$NGINX" ]; then
    no "nginx is not installed (Debian package nginx; scripts/install-deps installs it)"
    summary; exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
    no "python3 is not installed (scripts/install-deps installs it)"
    summary; exit 1
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/nginx-test.XXXXXX") || exit 1
chmod 711 "$T"   # nginx's own user must reach $T/ngx; the key file stays 600
PIDS=""          # backends
NGX_PID=""
NETNS=""
VETHS=""
PY_PID=""
cleanup() {
    [ -n "$PY_PID" ] && kill -TERM "$PY_PID" 2>/dev/null && wait "$PY_PID" 2>/dev/null
    PY_PID=""
    if [ -n "$NGX_PID" ]; then
        kids=$(cat /proc/"$NGX_PID"/task/*/children 2>/dev/null)
        kill -TERM "$NGX_PID" 2>/dev/null
        i=0; while kill -0 "$NGX_PID" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.05; i=$((i + 1)); done
        kill -KILL "$NGX_PID" $kids 2>/dev/null
        NGX_PID=""
    fi
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
    PIDS=""
    for n in $NETNS; do ip netns del "$n" 2>/dev/null; done
    for v in $VETHS; do ip link del "$v" 2>/dev/null; done
    NETNS=""; VETHS=""
}
trap 'cleanup; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/key"
chmod 600 "$T/key"

# ---- where the backends live: network namespaces when this machine allows them
tag=$(( $$ % 100000 ))
oct=$(( ($$ % 80) * 3 ))
setup_netns() {
    for i in 1 2 3; do
        ns="frigg-ngx-$tag-$i"; h="fgh$tag$i"; p="fgp$tag$i"; net="10.231.$((oct + i - 1))"
        ip netns add "$ns" 2>>"$T/netns.err" || return 1
        NETNS="$NETNS $ns"
        ip link add "$h" type veth peer name "$p" 2>>"$T/netns.err" || return 1
        VETHS="$VETHS $h"
        ip link set "$p" netns "$ns" 2>>"$T/netns.err" &&
            ip addr add "$net.1/30" dev "$h" 2>>"$T/netns.err" && ip link set "$h" up 2>>"$T/netns.err" &&
            ip netns exec "$ns" ip link set lo up 2>>"$T/netns.err" &&
            ip netns exec "$ns" ip addr add "$net.2/30" dev "$p" 2>>"$T/netns.err" &&
            ip netns exec "$ns" ip link set "$p" up 2>>"$T/netns.err" || return 1
    done
}
mode=loopback
why=""
if [ "${FRIGG_NGINX_NETNS:-1}" = 0 ]; then why="FRIGG_NGINX_NETNS=0"
elif [ "$(id -u)" != 0 ]; then why="not root"
elif ! command -v ip >/dev/null 2>&1; then why="no ip (iproute2)"
elif setup_netns; then mode=netns
else why="ip netns/veth failed: $(tr '\n' ' ' < "$T/netns.err" | cut -c1-160)"; cleanup
fi
if [ $mode = netns ]; then
    echo "nginx: backends in 3 network namespaces (ip netns + veth pairs, 10.231.$oct.0/30 ..)"
else
    echo "nginx: backends on 3 loopback ports of 127.0.0.1 ($why)"
fi

# ---- three backends
ADDRS=""
for i in 1 2 3; do
    if [ $mode = netns ]; then
        a="10.231.$((oct + i - 1)).2"
        ip netns exec "frigg-ngx-$tag-$i" "$BIN/frigg-serve" --model "$MODEL" --host "$a" --port 8000 --threads 1 \
            --api-key-file "$T/key" 2>"$T/b$i.err" &
    else
        "$BIN/frigg-serve" --model "$MODEL" --port 0 --threads 1 --api-key-file "$T/key" 2>"$T/b$i.err" &
    fi
    pid=$!
    PIDS="$PIDS $pid"
    eval "PID$i=$pid"
done
nready=0
for i in 1 2 3; do
    eval "pid=\$PID$i"
    j=0
    while ! grep -q 'frigg-serve: ready' "$T/b$i.err" 2>/dev/null && kill -0 "$pid" 2>/dev/null && [ $j -lt 300 ]; do
        sleep 0.1; j=$((j + 1))
    done
    hp=$(sed -nE 's/.*listening on http:\/\/([0-9.]+:[0-9]+).*/\1/p' "$T/b$i.err" | head -n 1)
    if grep -q 'frigg-serve: ready' "$T/b$i.err" && [ -n "$hp" ]; then
        nready=$((nready + 1))
        ADDRS="$ADDRS $hp=$pid"
        eval "ADDR$i=$hp"
    else
        echo "backend $i did not start:"; cat "$T/b$i.err"
    fi
done
[ $nready = 3 ] && ok || { no "$nready of 3 backends started"; summary; exit 1; }

# ---- the client and the checks (Python's standard library)
cat > "$T/drive.py" <<'PY'
import http.client, json, os, re, signal, socket, sys, threading, time, zlib

KEY = open(os.environ["KEYFILE"]).read().strip()
# FRIGG_QUICK=1 (make sanitize: backends 10 to 20 times slower): fewer and shorter requests, longer timeouts
QUICK = os.environ.get("FRIGG_QUICK") == "1"
TIMEOUT = 90.0 if QUICK else 20.0
def hp(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)

def say(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)

def request(addr, path, body, rid=None, stream=False, key=True, timeout=TIMEOUT, method="POST", gzip=False):
    """One request; r["kind"]: complete | http_error | truncated | timeout | conn_error."""
    r = {"rid": rid, "stream": stream, "path": path, "t0": time.monotonic(), "status": None, "events": []}
    h = {"Content-Type": "application/json"}
    if key: h["Authorization"] = "Bearer " + KEY
    if rid: h["X-Request-Id"] = rid
    if gzip: h["Accept-Encoding"] = "gzip"
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    c = http.client.HTTPConnection(*hp(addr), timeout=timeout)
    try:
        c.request(method, path, data, h)
        resp = c.getresponse()
        r["status"] = resp.status
        r["ctype"] = resp.getheader("Content-Type", "")
        r["server"] = resp.getheader("Server", "")
        if stream and resp.status == 200:
            dec = zlib.decompressobj(16 + zlib.MAX_WBITS) if resp.getheader("Content-Encoding", "") == "gzip" else None
            r["gzip"] = dec is not None
            buf = b""
            while True:  # each event is timed when the read that completes it returns
                if time.monotonic() - r["t0"] > 2 * timeout: raise socket.timeout("stream past its deadline")
                d = resp.read1(65536)
                if not d: break
                now = time.monotonic()
                buf += dec.decompress(d) if dec else d
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.startswith(b"data: "): r["events"].append((now, line[6:].strip()))
            ev = [p for _, p in r["events"]]
            good = bool(ev) and ev[-1] == b"[DONE]" and r["ctype"].startswith("text/event-stream")
            fin = False
            for p in ev[:-1]:
                try: o = json.loads(p)
                except ValueError: good = False; break
                if "error" in o: good = False
                fin = fin or any(ch.get("finish_reason") for ch in o.get("choices", []))
            r["kind"] = "complete" if good and fin else "truncated"
        else:
            r["body"] = resp.read()
            if resp.status != 200:
                r["kind"] = "http_error"
            else:
                try:
                    o = json.loads(r["body"])
                    ch = o["choices"][0]
                    text = ch["message"]["content"] if "message" in ch else ch["text"]
                    r["kind"] = "complete" if ch["finish_reason"] in ("stop", "length") and isinstance(text, str) else "truncated"
                except (ValueError, KeyError, IndexError, TypeError):
                    r["kind"] = "truncated" if path.startswith("/v1/") and method == "POST" else "complete"
    except (socket.timeout, TimeoutError) as e:
        r["kind"] = "timeout"; r["err"] = repr(e)
    except (http.client.IncompleteRead, ConnectionError, http.client.HTTPException, OSError) as e:
        r["kind"] = "truncated" if r["status"] == 200 else ("http_error" if r["status"] else "conn_error")
        r["err"] = repr(e)
    finally:
        c.close()
    r["t1"] = time.monotonic()
    return r

def metrics(addr):
    r = request(addr, "/metrics", None, method="GET", timeout=5)
    if r["status"] != 200: return None
    m = {}
    for line in r["body"].decode().splitlines():
        mm = re.match(r'^(\w+)\{([^}]*)\} (\S+)$', line)
        if mm: m.setdefault(mm.group(1), []).append((mm.group(2), float(mm.group(3))))
    return m

def msum(m, name): return sum(v for _, v in m.get(name, []))

def probe(lb):
    r = request(lb, "/v1/models", None, method="GET")
    try: ids = [d["id"] for d in json.loads(r["body"])["data"]]
    except Exception: ids = None
    say(r["status"] == 200 and ids == ["default"], "GET /v1/models through nginx: %s %s" % (r["status"], ids))
    r = request(lb, "/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": "Hej"}], "max_tokens": 2}, key=False)
    say(r["status"] == 401 and b"invalid_api_key" in r.get("body", b""),
        "no API key: the backend's 401 through nginx (got %s %r)" % (r["status"], r.get("body", b"")[:80]))
    r = request(lb, "/v1/completions", b"x" * 4194304)
    say(r["status"] == 400 and r["ctype"].startswith("application/json"),
        "a body of 4194304 bytes reaches a backend (its JSON 400 for a body that is not JSON): got %s %s" % (r["status"], r["ctype"]))
    r = request(lb, "/v1/completions", b"x" * 4194305)
    say(r["status"] == 413 and b"nginx" in r.get("body", b"") and not r["ctype"].startswith("application/json"),
        "a body of 4194305 bytes: nginx's own 413 (got %s %s %r)" % (r["status"], r["ctype"], r.get("body", b"")[:60]))
    r = request(lb, "/metrics", None, method="GET")
    say(r["status"] == 404 and not r["ctype"].startswith("text/plain"),
        "/metrics is not served through the balancer (got %s %s)" % (r["status"], r["ctype"]))

def stream_timing(label, addr, want_unbuffered, want_gzip):
    mt = 30 if QUICK else 100
    body = {"model": "default", "prompt": "Der var engang", "max_tokens": mt, "temperature": 1.5, "seed": 1, "stream": True}
    r = request(addr, "/v1/completions", body, rid="S-" + re.sub(r"\W+", "-", label), stream=True, gzip=True)
    if r.get("gzip", False) != want_gzip:
        say(False, "%s: Content-Encoding gzip %s, want %s" % (label, r.get("gzip"), want_gzip))
        return
    ev = r["events"]
    if r["kind"] != "complete" or len(ev) < mt // 2:
        say(False, "%s: the timing stream did not complete (%s, %d events)" % (label, r["kind"], len(ev)))
        return
    first, last = ev[0][0] - r["t0"], ev[-1][0] - r["t0"]
    apart = sum(1 for a, b in zip(ev, ev[1:]) if b[0] - a[0] >= 0.002) / (len(ev) - 1)
    unbuffered = last - first >= 0.25 and first <= 0.25 * last and apart >= 0.5
    print("nginx: stream via %s: %d events, first at %.3f s, last at %.3f s (first to last %.3f s), %.0f%% arrived >= 2 ms after the one before"
          % (label, len(ev), first, last, last - first, 100 * apart), flush=True)
    if want_unbuffered:
        say(unbuffered, "%s: events pass through unbuffered (first to last >= 0.25 s, first <= 25%% of last, >= 50%% apart)" % label)
    else:
        say(not unbuffered, "%s: the measurement sees the buffering (else it could not fail)" % label)

def established(addr):
    """TCP connections in state ESTABLISHED to addr, as this network namespace sees them (/proc/net/tcp)."""
    import struct
    h, port = hp(addr)
    want = "%08X:%04X" % (struct.unpack("<I", socket.inet_aton(h))[0], port)
    n = 0
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[2] == want and f[3] == "01": n += 1
    return n

def dead(pid, addr):
    """The process and all its threads gone (a killed process's leader shows Z while its other threads still hold
    its sockets open, and its listening socket still completes handshakes), and its address refusing connections."""
    try:
        if len(os.listdir("/proc/%d/task" % pid)) > 1: return False
        with open("/proc/%d/stat" % pid) as f:
            if f.read().split(") ")[1][0] not in "ZX": return False
    except OSError:
        pass
    try:
        socket.create_connection(hp(addr), timeout=0.5).close()
        return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False

def load(lb, backends, logfile):
    addrs = [a for a, _ in backends]
    pid_of = dict(backends)
    # 1. a long stream; the backend it runs on is the one to kill
    long_r = {}
    long_body = {"model": "default", "prompt": "Der var engang", "max_tokens": 400, "temperature": 1.5, "seed": 1, "stream": True}
    lt = threading.Thread(target=lambda: long_r.update(request(lb, "/v1/completions", long_body, rid="LONG", stream=True, timeout=3 * TIMEOUT)))
    lt.start()
    victim = None
    t_end = time.monotonic() + 10
    while victim is None and time.monotonic() < t_end:
        running = {a: msum(metrics(a) or {}, "frigg_requests_running") for a in addrs}
        busy = [a for a, v in running.items() if v > 0]
        if len(busy) == 1: victim = busy[0]
        else: time.sleep(0.02)
    say(victim is not None, "the long stream's backend found from /metrics (frigg_requests_running)")
    if victim is None: return
    live = [a for a in addrs if a != victim]
    # 2. the load: 60 requests, 6 clients; SIGKILL the victim after 20 have ended
    N, C, KILL_AT = (30, 6, 10) if QUICK else (60, 6, 20)
    results = [None] * N
    nxt = [0]; done = [0]; lock = threading.Lock()
    def body_of(i):
        mt = 4 + (i % 3) * 2 if QUICK else 12 + (i % 5) * 4
        msg = [{"role": "user", "content": "Fortæl om Danmark, nr. %d" % i}]
        if i % 4 == 0: return "/v1/chat/completions", {"model": "default", "messages": msg, "max_tokens": mt, "temperature": 0.9, "seed": i, "stream": True, "stream_options": {"include_usage": True}}, True
        if i % 4 == 1: return "/v1/chat/completions", {"model": "default", "messages": msg, "max_tokens": mt, "temperature": 0.9, "seed": i}, False
        if i % 4 == 2: return "/v1/completions", {"model": "default", "prompt": "Der var engang %d" % i, "max_tokens": mt, "temperature": 0.9, "seed": i, "stream": True}, True
        return "/v1/completions", {"model": "default", "prompt": "Det var en dag %d" % i, "max_tokens": mt, "temperature": 0.9, "seed": i}, False
    def worker():
        while True:
            with lock:
                i = nxt[0]; nxt[0] += 1
            if i >= N: return
            path, body, st = body_of(i)
            results[i] = request(lb, path, body, rid="L%d" % i, stream=st)
            with lock: done[0] += 1
    t_load = time.monotonic()
    ws = [threading.Thread(target=worker) for _ in range(C)]
    for w in ws: w.start()
    while done[0] < KILL_AT and time.monotonic() - t_load < 3 * TIMEOUT: time.sleep(0.005)
    long_alive = lt.is_alive()
    t_sig = time.monotonic()
    os.kill(pid_of[victim], signal.SIGKILL)
    while not dead(pid_of[victim], victim) and time.monotonic() - t_sig < 5: time.sleep(0.002)
    t_kill = time.monotonic()
    say(t_kill - t_sig < 5, "the killed backend refuses connections %.3f s after the SIGKILL" % (t_kill - t_sig))
    for w in ws: w.join(3 * TIMEOUT)
    lt.join(TIMEOUT)
    t_all = time.monotonic()
    say(not any(w.is_alive() for w in ws) and not lt.is_alive(), "every client thread ended (no hang)")
    print("nginx: killed backend %s (pid %d) after %d of %d requests had ended, %.2f s into the load; it refused connections "
          "%.3f s after the SIGKILL; the load took %.2f s" % (victim, pid_of[victim], KILL_AT, N, t_sig - t_load, t_kill - t_sig, t_all - t_load), flush=True)
    # 3. outcomes
    rs = [r for r in results if r]
    kinds = {}
    for r in rs: kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    errs = sorted(set(r["status"] for r in rs if r["kind"] == "http_error"))
    print("nginx: outcomes: %s; HTTP error statuses %s" % (kinds, errs), flush=True)
    say(len(rs) == N, "all %d requests were made (%d)" % (N, len(rs)))
    say(all(r["kind"] in ("complete", "http_error", "truncated") for r in rs),
        "every request ended as a whole response, an HTTP error or a cut stream counted as failed, none timed out or was refused (%s)" % kinds)
    say(long_alive and long_r.get("status") == 200 and long_r.get("kind") == "truncated" and long_r.get("t1", 1e9) - t_kill < 5,
        "the long stream, running when its backend died, was cut without [DONE], counted as failed, and ended %.2f s after the kill (%s, %s, %d events)"
        % (long_r.get("t1", 0) - t_kill, long_r.get("status"), long_r.get("kind"), len(long_r.get("events", []))))
    post = [r for r in rs if r["t0"] > t_kill]
    pre = [r for r in rs if r["t1"] < t_sig]
    around = len(rs) - len(post) - len(pre)
    bad_post = [(r["rid"], r["kind"], r["status"]) for r in post if r["kind"] != "complete"]
    print("nginx: %d requests ended before the kill, %d were running across it, %d started after it" % (len(pre), around, len(post)), flush=True)
    say(len(post) >= (N - KILL_AT) // 2 and not bad_post, "all %d requests started after the kill succeeded (failed: %s)" % (len(post), bad_post[:5]))
    # 4. nginx's access log: where each request went
    rx = re.compile(r'"(\S+) (\S+) [^"]*" (\d+) \d+ rt=\S+ upstream="([^"]*)" ustatus="([^"]*)" .*rid="([^"]*)"')
    want = set(r["rid"] for r in rs) | {"LONG"}
    log = {}
    for _ in range(30):
        log = {}
        lines = open(logfile).read().splitlines()
        for line in lines:
            m = rx.search(line)
            if m: log.setdefault(m.group(6), []).append(m.groups())
        if want <= set(log): break
        time.sleep(0.1)
    say(want <= set(log) and all(len(log[k]) == 1 for k in want), "every request has one access-log line (%d of %d)" % (len(want & set(log)), len(want)))
    def tried(k): return [a.strip() for a in re.split(r"[,:] (?=\d)", log[k][0][3])] if k in log else []
    def final(k): return tried(k)[-1] if tried(k) else None
    served_pre = set(final(r["rid"]) for r in pre if r["kind"] == "complete")
    say(set(addrs) <= served_pre, "before the kill all three backends served requests (least_conn spreads them): %s" % sorted(served_pre))
    wrong = [(r["rid"], tried(r["rid"])) for r in post if final(r["rid"]) not in live or log[r["rid"]][0][2] != "200"]
    say(not wrong, "after the kill every request was answered 200 by a live backend (%s)" % wrong[:3])
    post_sorted = sorted(post, key=lambda r: r["t0"])
    tries_dead = [(i, r["t0"] - t_kill) for i, r in enumerate(post_sorted) if victim in tried(r["rid"])]
    print("nginx: after the kill nginx tried the dead backend %d times, in requests %s of %d (in start order); those went on to a live one"
          % (len(tries_dead), ["%d at +%.1f s" % t for t in tries_dead], len(post_sorted)), flush=True)
    # max_fails=2 fail_timeout=10s: a few tries at first (the clients running then may all pick it), after that
    # one try per 10 s at most (nginx's probe once fail_timeout has passed)
    early = [t for t in tries_dead if t[0] < 2 * C]
    late = [t for t in tries_dead if t[0] >= 2 * C]
    spaced = all(b[1] - a[1] >= 9 for a, b in zip([early[-1] if early else (0, -1e9)] + late, late))
    say(len(early) <= 2 + C and spaced,
        "nginx stopped trying the dead backend: %d tries among the first %d requests after the kill, later ones 10 s apart (%s)"
        % (len(early), 2 * C, ["+%.1f s" % t[1] for t in late]))
    # 5. the survivors' own counts against the log
    gen = ("/v1/chat/completions", "/v1/completions")
    for a in live:
        m = metrics(a)
        n_m = msum(m, "frigg_request_success_total") if m else -1
        n_log = sum(1 for k, v in log.items() for g in v if g[1] in gen and g[2] == "200" and tried(k) and tried(k)[-1] == a)
        n_post = sum(1 for r in post if final(r["rid"]) == a)
        say(m is not None and n_m == n_log and n_post > 0,
            "backend %s: /metrics counts %d finished requests, the access log %d answered 200 by it (%d after the kill)" % (a, n_m, n_log, n_post))
    # 6. keepalive: nginx holds idle connections to the live backends for the next requests
    est = {a: established(a) for a in live}
    say(all(v >= 1 for v in est.values()), "nginx keeps idle keepalive connections open to the live backends: %s" % est)

if __name__ == "__main__":
    cmd, lb = sys.argv[1], sys.argv[2]
    if cmd == "wait":
        t = time.monotonic() + float(sys.argv[3])
        while time.monotonic() < t:
            try:
                if request(lb, "/health", None, method="GET", timeout=2)["status"] == 200: sys.exit(0)
            except Exception: pass
            time.sleep(0.05)
        sys.exit(1)
    elif cmd == "probe": probe(lb)
    elif cmd == "stream":
        stream_timing("the shipped config", lb, True, False)
        stream_timing("the shipped config + gzip for event streams, X-Accel-Buffering ignored", sys.argv[3], True, True)
        stream_timing("the same with proxy_buffering on (control)", sys.argv[4], False, True)
    elif cmd == "load":
        backends = [(b.split("=")[0], int(b.split("=")[1])) for b in sys.argv[4:]]
        load(lb, backends, sys.argv[3])
PY
export KEYFILE="$T/key"
tally() {  # the checks Python printed
    while IFS= read -r l; do
        case $l in
            "PASS "*) ok ;;
            "FAIL "*) no "${l#FAIL }" ;;
            *) echo "$l" ;;
        esac
    done < "$1"
}

# ---- nginx: the shipped config with this run's backends, port and logs
ports=$(python3 -c 'import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
set -- $ports
P1=$1; P2=$2; P3=$3
N="$T/ngx"
mkdir -p "$N/logs" "$N/tmp"
awk -v a1="$ADDR1" -v a2="$ADDR2" -v a3="$ADDR3" -v port="$P1" -v logs="$N/logs/" '
    /^[ \t]*server[ \t]+[0-9.]+:[0-9]+[ \t]/ { n++; sub(/[0-9.]+:[0-9]+/, n == 1 ? a1 : n == 2 ? a2 : a3) }
    /^[ \t]*listen 80;/ { l++; sub(/listen 80;/, "listen 127.0.0.1:" port ";") }
    { gsub("/var/log/nginx/", logs); print }
    END { exit !(n == 3 && l == 1) }' "$CONF" > "$N/frigg.conf"
[ $? = 0 ] && ok || no "templating $CONF: want 3 upstream server lines and one 'listen 80;'"
# Two copies of the shipped server block, both with gzip on for event streams (a global gzip_types that
# includes them is an easy mistake) and frigg-serve's X-Accel-Buffering ignored: one keeps the shipped
# proxy_buffering off, and must still stream; the control has proxy_buffering on, and must not (gzip then
# holds the stream to its end), or the measurement could not fail. (With proxy_buffering on but no gzip,
# nginx 1.22 was seen to pass a chunked HTTP/1.1 stream on event by event anyway.)
awk '/^server \{/ { on = 1 } on { print } on && /^\}/ { on = 0 }' "$N/frigg.conf" > "$N/server.block"
z='gzip on; gzip_types text\/event-stream; gzip_min_length 0; proxy_ignore_headers X-Accel-Buffering;'
sed -e "s/listen 127.0.0.1:$P1;/listen 127.0.0.1:$P2;/" -e "s/gzip off;/$z/" "$N/server.block" > "$N/variants.conf"
sed -e "s/listen 127.0.0.1:$P1;/listen 127.0.0.1:$P3;/" -e "s/gzip off;/$z/" \
    -e 's/proxy_buffering off;/proxy_buffering on;/' "$N/server.block" >> "$N/variants.conf"
[ "$(grep -c 'proxy_ignore_headers X-Accel-Buffering' "$N/variants.conf")" = 2 ] && [ "$(grep -c "listen 127.0.0.1:" "$N/variants.conf")" = 2 ] &&
    [ "$(grep -c 'proxy_buffering on;' "$N/variants.conf")" = 1 ] && [ "$(grep -c 'proxy_buffering off;' "$N/variants.conf")" = 1 ] &&
    ok || no "could not make the two server-block variants"
cat > "$N/nginx.conf" <<EOF
worker_processes 2;
pid $N/nginx.pid;
error_log $N/logs/error.log info;
events { worker_connections 512; }
http {
    client_body_temp_path $N/tmp/body;
    proxy_temp_path $N/tmp/proxy;
    fastcgi_temp_path $N/tmp/fastcgi;
    uwsgi_temp_path $N/tmp/uwsgi;
    scgi_temp_path $N/tmp/scgi;
    include $N/frigg.conf;
    include $N/variants.conf;
}
EOF
# As root, nginx runs as nobody (its master too): nothing of it is privileged.
AS=""
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
    chown -R 65534:65534 "$N"
    AS="setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all"
fi
if $AS "$NGINX" -t -p "$N" -c "$N/nginx.conf" -e "$N/logs/error.log" >"$T/nginx-t.out" 2>&1; then ok
else no "nginx -t: $(cat "$T/nginx-t.out")"; summary; exit 1
fi
$AS "$NGINX" -p "$N" -c "$N/nginx.conf" -e "$N/logs/error.log" -g 'daemon off;' 2>"$T/nginx.err" &
NGX_PID=$!
if python3 "$T/drive.py" wait "127.0.0.1:$P1" 15; then ok
else no "nginx did not answer /health on 127.0.0.1:$P1: $(cat "$T/nginx.err" "$N/logs/error.log" 2>/dev/null | tail -5)"; summary; exit 1
fi
ALLP="$PIDS $NGX_PID $(cat /proc/"$NGX_PID"/task/*/children 2>/dev/null)"   # backends, nginx and its workers
echo "nginx: $("$NGINX" -v 2>&1 | sed 's/nginx version: //'), 2 workers as uid $(stat -c %u /proc/$NGX_PID), on 127.0.0.1:$P1 (variants :$P2 :$P3), backends$ADDRS"

# ---- the checks
t0=$(date +%s)
drive() {  # limit, phase, args: one phase of drive.py, in the background so that a signal stops it at once
    lim=$1; ph=$2; shift 2
    timeout "$lim" python3 "$T/drive.py" "$ph" "$@" > "$T/$ph.out" 2>&1 &
    PY_PID=$!
    wait "$PY_PID"; prc=$?
    PY_PID=""
    [ $prc = 0 ] || echo "FAIL drive.py $ph: exit status $prc (124: past its $lim s limit)" >> "$T/$ph.out"
    tally "$T/$ph.out"
}
drive 300 probe "127.0.0.1:$P1"
drive 300 stream "127.0.0.1:$P1" "127.0.0.1:$P2" "127.0.0.1:$P3"
drive 600 load "127.0.0.1:$P1" "$N/logs/frigg-access.log" $ADDRS
t1=$(date +%s)
if [ "$fail" -gt 0 ]; then
    echo "nginx's error log, upstream lines:"
    grep -h 'upstream' "$N/logs/"*error.log 2>/dev/null | tail -n 12
fi

# ---- the end: survivors drain and exit 0 on SIGTERM; nothing is left behind
rcs=""
for p in $PIDS; do
    if kill -0 "$p" 2>/dev/null && [ "$(cut -d' ' -f3 /proc/"$p"/stat 2>/dev/null)" != Z ]; then
        kill -TERM "$p"; wait "$p"; rcs="$rcs $?"
    else
        wait "$p" 2>/dev/null
    fi
done
[ "$rcs" = " 0 0" ] && ok || no "the surviving backends' exit statuses on SIGTERM:$rcs (want 0 0)"
PIDS=""
kill -TERM "$NGX_PID" 2>/dev/null; wait "$NGX_PID"; nrc=$?
NGX_PID=""
[ $nrc = 0 ] && ok || no "nginx exit status $nrc on SIGTERM"
cleanup
left=""
[ $mode = netns ] && left=$(ip netns list 2>/dev/null | grep "frigg-ngx-$tag-"; ip -o link show 2>/dev/null | grep "fgh$tag")
still=""
for p in $ALLP; do
    st=$(cut -d' ' -f3 /proc/"$p"/stat 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ] && still="$still $p"
done
[ -z "$left" ] && [ -z "$still" ] && ok || no "left behind: processes$still; namespaces/veths: $left"
echo "nginx: the checks took $((t1 - t0)) s ($mode)"
summary
