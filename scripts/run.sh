#!/usr/bin/env bash
# Set up (once) and run Concierge: the engine plus every configured adapter (`concierge up`).
# Other subcommands work too: scripts/run.sh chat, scripts/run.sh ask "question", ...
source "$(dirname "$0")/bootstrap.sh"
bootstrap_venv ""
ensure_rabbitmq
cd "$ROOT"
exec "$VENV/bin/concierge" "${@:-up}"
