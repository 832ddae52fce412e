#!/usr/bin/env bash
# Set up (once) and run every check: ruff, then the test suite against the real RabbitMQ and
# the real llama.cpp with SmolLM2 (and Debian's chromium for the console). Extra arguments
# go to pytest.
source "$(dirname "$0")/bootstrap.sh"
bootstrap_venv "[test]"
ensure_rabbitmq
ensure_chromium
cd "$ROOT"
"$VENV/bin/ruff" check bots broker engine config cli tests
"$VENV/bin/mypy"
"$VENV/bin/python" -m pytest --durations=12 "$@"
