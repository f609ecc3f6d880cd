#!/bin/sh
# frigg-serve through real clients: the official openai SDK and prometheus_client's /metrics parser
# (scripts/serve-tests/serve_test.py, the pinned serve set of scripts/pyenv, installed from PyPI on the first run
# and then kept by its stamp). Chat and completions streamed and not, n, stop, max_tokens, include_usage,
# logprobs, seeds under concurrency, tools, the SDK's error types, raw-HTTP statuses, /metrics, disconnects,
# --replicas, --max-queue and the SIGTERM drain; the bundled model on the CPU engine.
# FRIGG_NO_LIVE=1 skips it (a SKIP line) when the serve set is not installed yet, since installing needs PyPI;
# a failed install is a failure. FRIGG_QUICK=1 shortens the long requests.
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
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
exec "$py" "$ROOT/scripts/serve-tests/serve_test.py" --bin "$BIN/frigg-serve" --model "$ROOT/golden/default" $quick
