# Sourced by scripts/eval.sh and scripts/eval-spaces.sh: a throwaway engine for one eval run.
# `eval_engine_setup` makes a work folder, a broker prefix and a knowledge base of the run's
# own (so nothing of a real deployment is read or written), and arranges that everything
# started is stopped, and the run's queues and exchanges deleted, when the script ends;
# `eval_engine_start` starts the engine and waits until it takes requests.
# Needs: $root (the repository), $python.

pids=()

eval_engine_setup() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/concierge-eval.XXXXXX")
    export CONCIERGE_PREFIX="eval-$$"
    export CONCIERGE_KB_PATH="$work/kb.sqlite3"  # a space's beside it: kb.<space>.sqlite3
    export CONCIERGE_METRICS_PORT=0
    export CONCIERGE_SCRAPE_DELAY_S=0
    trap eval_engine_stop EXIT
}

free_port() {
    "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

eval_engine_stop() {
    engine_memory || true  # never in the way of the cleanup below
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    delete_topology >/dev/null 2>&1 || true
    rm -rf "$work"
}

# The engine's memory, to stderr: its peak over the whole run (the model's load, the rescrape
# with its embeddings, every answer) and what it holds at the end. Issue 26's budget is 600 MB
# with the default model (docs/quality.md, "Memory").
engine_memory() {
    local status=/proc/${engine_pid:-0}/status
    # the engine's own process still (an exited one's number may be another's by now)
    grep -q "cli.main" "/proc/${engine_pid:-0}/cmdline" 2>/dev/null || return 0
    awk '/^VmHWM:/ {peak = $2} /^VmRSS:/ {now = $2}
         END {printf "engine memory: peak %d MiB (%d MB), at the end %d MiB (VmHWM, VmRSS)\n",
              peak / 1024, peak * 1.024 / 1000, now / 1024}' "$status" >&2
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

# The engine logs "engine <name> ready" once the model is loaded and it takes requests.
eval_engine_start() {
    "$python" -m cli.main engine 2>"$work/engine.log" &
    engine_pid=$!
    local engine=$engine_pid
    pids+=("$engine")
    for _ in $(seq 1200); do
        grep -q " ready" "$work/engine.log" && return 0
        if ! kill -0 "$engine" 2>/dev/null; then
            echo "$(basename "$0"): the engine did not start:" >&2
            cat "$work/engine.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "$(basename "$0"): the engine is not ready after 120 s" >&2
    exit 1
}

# Run a command (the rescrape, the eval) while the engine runs: if the engine dies first, say so
# with the end of its log and stop the command, which would otherwise wait for an answer that no
# engine will give (its request waits in the queue for the next engine).
while_engine_runs() {
    "$@" &
    local command=$! ended=""
    pids+=("$command")
    wait -n -p ended "$command" "$engine_pid" && true
    local status=$?
    if [ "$ended" = "$engine_pid" ]; then
        if ! exited "$command"; then
            echo "$(basename "$0"): the engine died (exit $status) during the ${4:-command}" >&2
            tail -n 5 "$work/engine.log" >&2
            kill "$command" 2>/dev/null || true
            exit 1
        fi
        wait "$command" && true  # both ended: the command's own status
        status=$?
    fi
    return "$status"
}

# Whether a child process has ended (a zombie not waited for yet counts).
exited() {
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
    [ -z "$state" ] || [ "$state" = Z ]
}
