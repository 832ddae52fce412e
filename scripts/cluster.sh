#!/usr/bin/env bash
# A local three-node RabbitMQ cluster on this machine, for trying quorum queues and failover
# (docs/reliability.md, "A RabbitMQ cluster"). Each node has its own name, ports and data
# folder; the three share an Erlang cookie of their own. The RabbitMQ already running here
# (rabbit@..., 5672) is never touched: its cookie, config and data stay as they are.
#
#   scripts/cluster.sh start       # three nodes, joined (node 1 first; 2 and 3 join it)
#   scripts/cluster.sh start 2     # node 2 alone (after `stop 2`: it rejoins the cluster)
#   scripts/cluster.sh stop 2      # node 2 alone; its data is kept for `start 2`
#   scripts/cluster.sh stop        # every node, then the data folder is deleted
#   scripts/cluster.sh status      # which nodes run, and the cluster as node 1 sees it
#   scripts/cluster.sh ctl 1 list_queues name type   # rabbitmqctl against node 1
#   scripts/cluster.sh urls        # the AMQP URLs, comma-separated (CONCIERGE_BROKER_URL)
#
# Settings (environment):
#   CONCIERGE_CLUSTER_DIR   the data folder (default ${TMPDIR:-/tmp}/concierge-cluster)
#   CONCIERGE_CLUSTER_PORT  node 1's AMQP port (default 5681; nodes 2 and 3 take the next two,
#                           and each node's Erlang distribution port is its AMQP port + 20000)
#   CONCIERGE_CLUSTER_NAME  the nodes' names, <name>-1@localhost... (default concierge)
set -euo pipefail

DIR="${CONCIERGE_CLUSTER_DIR:-${TMPDIR:-/tmp}/concierge-cluster}"
BASE_PORT="${CONCIERGE_CLUSTER_PORT:-5681}"
NAME="${CONCIERGE_CLUSTER_NAME:-concierge}"
NODES=(1 2 3)
START_TIMEOUT_S=120
STOP_TIMEOUT_S=60
# The real scripts, not Debian's wrapper in /usr/sbin (which runs them as the rabbitmq user,
# from /var/lib/rabbitmq, with that node's cookie).
if command -v rabbitmq-server >/dev/null 2>&1; then
    BIN="$(dirname "$(readlink -f "$(command -v rabbitmq-server)")")"
else
    BIN=""
fi

node_name() { echo "$NAME-$1@localhost"; }
amqp_port() { echo $((BASE_PORT + $1 - 1)); }
dist_port() { echo $((BASE_PORT + $1 - 1 + 20000)); }
node_dir() { echo "$DIR/node-$1"; }
pid_of() { cat "$(node_dir "$1")/script.pid" 2>/dev/null || true; }

alive() {  # the node's process group runs (started here, its leader's pid noted)
    local pid
    pid="$(pid_of "$1")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# as_node N COMMAND ARGS...: COMMAND in the cluster's own environment. Its HOME holds the
# cluster's cookie (rabbitmqctl reads it there too); its own env file, config file and plugin
# list replace the system's (/etc/rabbitmq).
as_node() {
    local n="$1" dir
    dir="$(node_dir "$n")"
    shift
    (
        export HOME="$DIR/home"
        export RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf"
        export RABBITMQ_NODENAME="$(node_name "$n")"
        export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
        export RABBITMQ_NODE_PORT="$(amqp_port "$n")"
        export RABBITMQ_DIST_PORT="$(dist_port "$n")"
        export RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf"
        export RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config"
        export RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins"
        export RABBITMQ_MNESIA_BASE="$dir/mnesia"
        export RABBITMQ_LOG_BASE="$dir/log"
        export RABBITMQ_PID_FILE="$dir/rabbitmq.pid"
        export ERL_EPMD_ADDRESS=127.0.0.1
        export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
        exec "$@"
    )
}

ctl() {  # ctl N ARGS...: rabbitmqctl against node N
    local n="$1"
    shift
    as_node "$n" "$BIN/rabbitmqctl" -n "$(node_name "$n")" "$@"
}

random_hex() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

prepare() {
    mkdir -p "$DIR/home"
    if [ ! -f "$DIR/home/.erlang.cookie" ]; then
        (umask 077 && random_hex >"$DIR/home/.erlang.cookie")
        chmod 400 "$DIR/home/.erlang.cookie"
    fi
    : >"$DIR/rabbitmq-env.conf"       # nothing from /etc/rabbitmq/rabbitmq-env.conf
    echo "[]." >"$DIR/enabled_plugins" # no management plugin: no port 15672 to clash
    if ! epmd -names >/dev/null 2>&1; then
        touch "$DIR/epmd-started-here" # the first node starts it; the last stop ends it
    fi
    local n peer
    for n in "${NODES[@]}"; do
        mkdir -p "$(node_dir "$n")/log"
        {
            # Node 1 boots alone; a new node 2 or 3 finds it and joins (classic config peer
            # discovery: only for a node with no data yet, so a restarted one rejoins).
            if [ "$n" != 1 ]; then
                echo "cluster_formation.peer_discovery_backend = classic_config"
                for peer in "${NODES[@]}"; do
                    echo "cluster_formation.classic_config.nodes.$peer = $(node_name "$peer")"
                done
            fi
            # as compose's cluster: quorum queues hold their log in memory until it rolls over
            echo "raft.wal_max_size_bytes = 67108864"
            echo "log.file.level = warning"
        } >"$(node_dir "$n")/rabbitmq.conf"
    done
}

start_node() {
    local n="$1"
    if alive "$n"; then
        echo "node $n ($(node_name "$n")) runs already"
        return 0
    fi
    # In the background rather than -detached, as a process group of its own (set -m): the
    # whole group is then known, to stop it for sure.
    set -m
    as_node "$n" "$BIN/rabbitmq-server" >"$(node_dir "$n")/log/startup.log" 2>&1 </dev/null &
    echo "$!" >"$(node_dir "$n")/script.pid"
    set +m
}

await_node() {
    local n="$1"
    # `wait` waits for the pid file, then for the node to have booted
    if ! ctl "$n" -q wait --timeout "$START_TIMEOUT_S" "$(node_dir "$n")/rabbitmq.pid" \
        >/dev/null 2>&1 || ! alive "$n"; then
        echo "node $n did not start within ${START_TIMEOUT_S} s; see $(node_dir "$n")/log" >&2
        return 1
    fi
    echo "node $n: $(node_name "$n") on 127.0.0.1:$(amqp_port "$n")"
}

join_if_alone() {  # peer discovery joins a new node; this covers one that booted alone
    local n="$1"
    if ctl 1 -q cluster_status 2>/dev/null | grep -q "$(node_name "$n")"; then
        return 0
    fi
    ctl "$n" -q stop_app >/dev/null
    ctl "$n" -q reset >/dev/null
    ctl "$n" -q join_cluster "$(node_name 1)" >/dev/null
    ctl "$n" -q start_app >/dev/null
}

stop_node() {
    local n="$1" pid
    pid="$(pid_of "$n")"
    if ! alive "$n"; then
        rm -f "$(node_dir "$n")/script.pid"
        return 0
    fi
    ctl "$n" -q stop >/dev/null 2>&1 || true
    for _ in $(seq $((STOP_TIMEOUT_S * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then # it did not stop: its whole process group goes
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$(node_dir "$n")/script.pid"
    echo "node $n stopped"
}

stop_epmd_if_ours() {  # only an epmd this script started, and only once no node is left on it
    if [ -f "$DIR/epmd-started-here" ] && ! epmd -names 2>/dev/null | grep -q "^name "; then
        epmd -kill >/dev/null 2>&1 || true
    fi
}

urls() {
    local n out=""
    for n in "${NODES[@]}"; do
        out="${out:+$out,}amqp://guest:guest@127.0.0.1:$(amqp_port "$n")/"
    done
    echo "$out"
}

require_rabbitmq() {
    if [ -z "$BIN" ]; then
        echo "RabbitMQ is not installed here (no rabbitmq-server on PATH)" >&2
        exit 69
    fi
}

check_node() {
    case "${1:-}" in
        1 | 2 | 3) ;;
        *) echo "no node '${1:-}': 1, 2 or 3" >&2; exit 2 ;;
    esac
}

command="${1:-}"
shift || true
case "$command" in
    start)
        require_rabbitmq
        prepare
        if [ -n "${1:-}" ]; then
            check_node "$1"
            start_node "$1"
            await_node "$1"
            exit 0
        fi
        start_node 1
        await_node 1
        start_node 2
        start_node 3
        await_node 2
        await_node 3
        join_if_alone 2
        join_if_alone 3
        echo "CONCIERGE_BROKER_URL=$(urls)"
        ;;
    stop)
        if [ -n "${1:-}" ]; then
            check_node "$1"
            stop_node "$1"
            exit 0
        fi
        for n in 3 2 1; do
            stop_node "$n"
        done
        stop_epmd_if_ours
        rm -rf "$DIR"
        ;;
    status)
        require_rabbitmq
        for n in "${NODES[@]}"; do
            if alive "$n"; then
                echo "node $n: running, $(node_name "$n") on 127.0.0.1:$(amqp_port "$n")"
            else
                echo "node $n: stopped"
            fi
        done
        for n in "${NODES[@]}"; do
            if alive "$n"; then
                ctl "$n" -q cluster_status 2>/dev/null \
                    | sed -n '/Running Nodes/,/Versions/{/Versions/d;p}'
                break
            fi
        done
        ;;
    ctl)
        require_rabbitmq
        check_node "${1:-}"
        ctl "$@"
        ;;
    urls)
        urls
        ;;
    *)
        echo "usage: $0 start [N] | stop [N] | status | ctl N ARGS... | urls" >&2
        exit 2
        ;;
esac
