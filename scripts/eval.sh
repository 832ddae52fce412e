#!/usr/bin/env bash
# Measure answer quality in one command: serve the site beside the questions file (its folder's
# site/: eval/site for the test site, eval/realdocs/site for the real documentation) on a
# free local port, start an engine on a throwaway knowledge base and broker prefix,
# rescrape, then run `concierge eval` on the questions file. Everything it started is
# stopped when it ends.
#
#   scripts/eval.sh                         # eval/questions.jsonl, as a table
#   scripts/eval.sh eval/heldout.jsonl --json
#   scripts/eval.sh eval/realdocs/questions.jsonl
#
# The engine and the eval read the same CONCIERGE_* settings from the environment (the model,
# CONCIERGE_TEMPERATURE, CONCIERGE_MAX_TOKENS, ...), so set them once, before this script.
# RabbitMQ must be running (CONCIERGE_BROKER_URL, default the local one).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
file=${1:-$root/eval/questions.jsonl}
shift || true
site="$(cd "$(dirname "$file")" && pwd)/site"
[ -f "$site/sitemap.xml" ] || { echo "eval.sh: no site/sitemap.xml beside $file" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/concierge-eval.XXXXXX")
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export CONCIERGE_PREFIX="eval-$$"
export CONCIERGE_KB_PATH="$work/kb.sqlite3"
export CONCIERGE_METRICS_PORT=0
export CONCIERGE_SITE_SITEMAP_URL="http://127.0.0.1:$port/sitemap.xml"
export CONCIERGE_SCRAPE_DELAY_S=0

pids=()
stop() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    delete_topology >/dev/null 2>&1 || true
    rm -rf "$work"
}

# The run's queues and exchanges, under its own prefix, go with it.
delete_topology() {
    "$python" - <<'PY'
import asyncio

from broker.amqp import Broker
from config.settings import load_settings


async def main() -> None:
    settings = load_settings()
    async with Broker(settings) as broker:
        channel = await broker.connection.channel()
        await channel.queue_delete(broker.names.cancel_queue(settings.engine_name))
        await broker.delete_all()


asyncio.run(main())
PY
}
trap stop EXIT

"$python" -m http.server "$port" --bind 127.0.0.1 --directory "$site" \
    >"$work/site.log" 2>&1 &
pids+=($!)
"$python" -m cli.main engine 2>"$work/engine.log" &
pids+=($!)

# The engine logs "engine <name> ready" once the model is loaded and it takes requests.
for _ in $(seq 1200); do
    grep -q " ready" "$work/engine.log" && break
    if ! kill -0 "${pids[1]}" 2>/dev/null; then
        echo "eval.sh: the engine did not start:" >&2
        cat "$work/engine.log" >&2
        exit 1
    fi
    sleep 0.1
done
grep -q " ready" "$work/engine.log" || { echo "eval.sh: the engine is not ready after 120 s" >&2; exit 1; }

"$python" -m cli.main rescrape >/dev/null
"$python" -m cli.main eval "$file" "$@"
