#!/bin/sh
# lm-evaluation-harness (PyPI lm-eval 0.4.13, the pinned lmeval set of scripts/pyenv) through frigg-serve: its own
# gsm8k task (lm_eval/tasks/gsm8k/gsm8k.yaml as installed: prompt, stops, regex filters, exact match), read from
# the committed test split instead of the HF hub, zero-shot, run by its local-completions client against
# frigg-serve on the bundled model (CPU engine), and the same items through frigg-eval gsm8k:
#   - lm-eval finishes, scores both of the task's filters on every item, and every request it made was answered
#     200 and completed (frigg-serve's /metrics), none lost or retried;
#   - its prompt is the task's "Question: ...\nAnswer:" text, which frigg-serve tokenizes as HF's tokenizer of
#     this model does, without a <bos> (TOKENIZER.md: the tokenizer never adds one): one token fewer than
#     frigg-eval's prompt, which puts <bos> first as the model's training sequences begin;
#   - with the task's prompt led by "<bos>" (the literal text, which the tokenizer turns into id 2) and its stop
#     at frigg-eval's "\n\nQuestion:", lm-eval's generations through the server equal frigg-eval's, item by
#     item, byte for byte: frigg-eval's prompts are lm-eval's gsm8k prompts, and greedy decoding is the same in
#     the server and in frigg-eval.
# FRIGG_NO_LIVE=1 skips it (a SKIP line) when the set is not installed yet (installing needs PyPI); without the
# GSM8K data ($FRIGG_SHARED/data/gsm8k/test.jsonl) it is skipped too. FRIGG_LMEVAL_LIMIT items (default 8).
set -u
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
SHARED=${FRIGG_SHARED:-$ROOT/../shared}
DATA=$SHARED/data/gsm8k/test.jsonl
N=${FRIGG_LMEVAL_LIMIT:-8}
if [ ! -f "$DATA" ]; then
    echo "SKIP lm-eval: no $DATA (the GSM8K test split)"
    echo "lm-eval.sh: 0 passed, 0 failed"
    exit 0
fi
if ! "$ROOT/scripts/pyenv" --have lmeval && [ -n "${FRIGG_NO_LIVE:-}" ]; then
    echo "SKIP lm-eval: FRIGG_NO_LIVE is set and the lmeval set of scripts/pyenv is not installed (it needs PyPI)"
    echo "lm-eval.sh: 0 passed, 0 failed"
    exit 0
fi
py=$("$ROOT/scripts/pyenv" --lmeval) || {
    echo "FAIL: scripts/pyenv --lmeval could not install scripts/py/requirements-lmeval.txt (PyPI unreachable?);"
    echo "      FRIGG_NO_LIVE=1 skips this test"
    echo "lm-eval.sh: 0 passed, 1 failed"
    exit 1
}
T=$(mktemp -d "${TMPDIR:-/tmp}/lm-eval.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; [ -n "$pid" ] && wait $pid 2>/dev/null; rm -rf "$T"' EXIT
"$BIN/frigg-serve" --model "$ROOT/golden/default" --backend cpu --threads 1 --port 0 --slots 4 \
    --served-model-name default 2> "$T/serve.log" &
pid=$!
port=""
for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$T/serve.log")
    [ -n "$port" ] && grep -q "ready" "$T/serve.log" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
done
if [ -z "$port" ] || ! grep -q "ready" "$T/serve.log"; then
    cat "$T/serve.log"; echo "FAIL: frigg-serve did not start"; echo "lm-eval.sh: 0 passed, 1 failed"; exit 1
fi

# The task as lm-eval ships it, data from the committed file (the split is the same 1,319 items, byte for byte:
# ../shared/data/gsm8k/README.md), and the variant whose prompt and stop are frigg-eval's.
gsm=$("$py" -c 'import lm_eval, os; print(os.path.join(os.path.dirname(lm_eval.__file__), "tasks", "gsm8k", "gsm8k.yaml"))')
mkdir -p "$T/tasks"
cat > "$T/tasks/frigg_gsm8k.yaml" <<EOF
include: $gsm
task: frigg_gsm8k_plain
dataset_path: json
dataset_name: null
dataset_kwargs:
  data_files:
    test: $DATA
training_split: null
fewshot_split: null
test_split: test
EOF
cat > "$T/tasks/frigg_gsm8k_bos.yaml" <<EOF
include: $T/tasks/frigg_gsm8k.yaml
task: frigg_gsm8k_bos
doc_to_text: "<bos>Question: {{question}}\nAnswer:"
generation_kwargs:
  until:
    - "\n\nQuestion:"
  do_sample: false
  temperature: 0.0
EOF
t0=$(date +%s)
HF_HOME="$T/hf" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 timeout 900 "$(dirname "$py")/lm_eval" \
    --model local-completions \
    --model_args "model=default,base_url=http://127.0.0.1:$port/v1/completions,tokenizer_backend=None,tokenized_requests=False,num_concurrent=4" \
    --include_path "$T/tasks" --tasks frigg_gsm8k_plain,frigg_gsm8k_bos --num_fewshot 0 --limit "$N" \
    --log_samples --output_path "$T/out" > "$T/lm.log" 2>&1
lrc=$?
echo "lm-eval: exit $lrc in $(( $(date +%s) - t0 )) s"
"$BIN/frigg-eval" gsm8k --model "$ROOT/golden/default" --backend cpu --threads 1 --limit "$N" --shots 0 \
    --data "$DATA" > "$T/fe.jsonl" 2> "$T/fe.err"
erc=$?

"$py" - "$T" "$N" "$lrc" "$erc" "$port" "$DATA" <<'PY'
import glob, json, os, sys, urllib.request
T, n, lrc, erc, port, data = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: lm-eval:", what, flush=True)


def show(path, lines=40):
    try:
        print("".join(open(path, errors="replace").readlines()[-lines:]), end="")
    except OSError:
        pass


check(lrc == 0, "lm_eval exited %d" % lrc)
if lrc:
    show(os.path.join(T, "lm.log"))
check(erc == 0, "frigg-eval gsm8k exited %d" % erc)
if erc:
    show(os.path.join(T, "fe.err"))
items = [json.loads(l) for l in open(data)][:n]

results = {}
for p in glob.glob(os.path.join(T, "out", "**", "results_*.json"), recursive=True):
    results.update(json.load(open(p)).get("results", {}))
samples = {}
for task in ("frigg_gsm8k_plain", "frigg_gsm8k_bos"):
    r = results.get(task, {})
    for f in ("strict-match", "flexible-extract"):
        v = r.get("exact_match," + f)
        check(isinstance(v, (int, float)) and 0 <= v <= 1, "%s: no exact_match for the %s filter: %r" % (task, f, r))
    got = {}
    for p in glob.glob(os.path.join(T, "out", "**", "samples_%s_*.jsonl" % task), recursive=True):
        for line in open(p):
            s = json.loads(line)
            got.setdefault(s["doc_id"], []).append(s)
    check(sorted(got) == list(range(n)), "%s: samples of docs %s, want 0..%d" % (task, sorted(got), n - 1))
    samples[task] = got

# The prompts lm-eval sent: the task's text of the committed items.
for d, ss in sorted(samples.get("frigg_gsm8k_plain", {}).items()):
    want = "Question: " + items[d]["question"] + "\nAnswer:"
    check(all(s["arguments"]["gen_args_0"]["arg_0"] == want for s in ss), "doc %d: lm-eval's prompt is not the task's text" % d)
    check(all(isinstance(s["resps"][0][0], str) for s in ss), "doc %d: no generation" % d)

# Everything lm-eval asked was answered and completed: one request per item and task, no other status.
metrics = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=30).read().decode()
done = sum(float(l.split()[-1]) for l in metrics.splitlines() if l.startswith("frigg_request_success_total{"))
codes = {l.split('code="')[1].split('"')[0]: float(l.split()[-1]) for l in metrics.splitlines()
         if l.startswith("frigg_http_responses_total{")}
check(done == 2 * n, "frigg-serve completed %g requests, want %d (one per item and task)" % (done, 2 * n))
check(set(codes) == {"200"} and codes["200"] == 2 * n, "frigg-serve's responses by status: %r, want %d x 200" % (codes, 2 * n))

# frigg-eval: one line per item, then its summary.
fe = [json.loads(l) for l in open(os.path.join(T, "fe.jsonl")) if l.strip()]
rows = {r["id"]: r for r in fe if "id" in r}
check(sorted(rows) == list(range(n)) and "summary" in fe[-1], "frigg-eval's lines: ids %s" % sorted(rows))


def complete(prompt):
    body = {"model": "default", "prompt": prompt, "max_tokens": 1, "temperature": 0}
    req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))


# The server's prompt is frigg-eval's without its <bos>; with the literal "<bos>" it is frigg-eval's.
for d in range(min(n, 3)):
    if d not in rows:
        continue
    text = "Question: " + items[d]["question"] + "\nAnswer:"
    plain, led = complete(text)["usage"]["prompt_tokens"], complete("<bos>" + text)["usage"]["prompt_tokens"]
    check(plain == rows[d]["prompt_tokens"] - 1 and led == rows[d]["prompt_tokens"],
          "doc %d: the server's prompt is %d tokens, %d with <bos>; frigg-eval's %d" % (d, plain, led, rows[d]["prompt_tokens"]))

# Led by <bos> and stopped where frigg-eval stops, lm-eval's generations are frigg-eval's.
same = 0
for d, ss in sorted(samples.get("frigg_gsm8k_bos", {}).items()):
    if d not in rows:
        continue
    a, b = ss[0]["resps"][0][0], rows[d].get("output")
    same += a == b
    check(a == b, "doc %d: lm-eval's generation through frigg-serve differs from frigg-eval's:\n  %r\n  %r" % (d, a, b))
    want = "<bos>Question: " + items[d]["question"] + "\nAnswer:"
    check(ss[0]["arguments"]["gen_args_0"]["arg_0"] == want, "doc %d: the <bos> variant's prompt" % d)
print("lm-eval: %d of %d generations the same as frigg-eval's; lm-eval's exact match %s" % (
    same, n, {t: {k.split(",")[1]: v for k, v in r.items() if k.startswith("exact_match,")} for t, r in sorted(results.items())}))
print("lm-eval.sh: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
