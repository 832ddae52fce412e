"""``concierge bench queue-types``: a classic and a quorum request queue on one node.

Each round declares a queue of one type with the request queue's own arguments (the length
cap raised to the run's count), then publishes requests to it as a bot does: persistent, with
a TTL, publisher-confirmed. The first ``--latency-samples`` go one at a time, each waiting for
its confirm (a bot tells the asker "queued" only then): their p50 and p95 are the publish
latency. The rest follow in concurrent batches, up to ``--messages``. The broker's memory (its
Erlang VM's total, after a garbage collection) and disk (its data folder) are read before the
first publish, after the last confirm and once the queue is purged: what the messages take,
and what is still held for them once they are gone (both scaled to 10,000). Rounds alternate
the types (classic first, then quorum first); each figure is the median of its rounds.

The broker's node is read with ``rabbitmqctl eval`` (``--ctl``, for a node of
``scripts/cluster.sh``: ``"scripts/cluster.sh ctl 1"``), and its data folder on this machine:
run it on a node of its own (docs/reliability.md, "Classic or quorum: measured on one node",
says how), since another client's traffic on the node would count as the queue's.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from broker import messages, topology
from broker.amqp import Broker
from broker.protocol import Names, make_request
from cli.benchmarks.report import to_json
from config.errors import ConciergeError
from config.settings import Settings

PER = 10_000  # memory and disk are given per this many messages
BATCH = 200  # publishes in flight at once while filling
TTL_S = 3600.0  # longer than any run: nothing expires while it is measured
QUESTION = "How long is the warranty on the widget I bought last spring, and does it cover water?"
# One expression: collect garbage everywhere (so that what is counted is what is held), then
# the VM's memory, the node's data folder and the versions.
PROBE = (
    "[erlang:garbage_collect(P) || P <- erlang:processes()], "
    'io:format("~b ~s ~s ~s~n", [erlang:memory(total), rabbit_mnesia:dir(), '
    "rabbit_misc:version(), erlang:system_info(otp_release)]), ok."
)
PROBE_LINE = re.compile(r"^(\d+) (\S+) (\S+) (\S+)$", re.MULTILINE)
TYPES: tuple[topology.QueueType, ...] = ("classic", "quorum")


class ProbeFailed(ConciergeError):
    """The broker's node could not be read (``--ctl`` does not reach it)."""


@dataclass(frozen=True)
class QueueTypesConfig:
    messages: int = 10_000
    latency_samples: int = 500
    repeat: int = 3
    ctl: str = "rabbitmqctl"


@dataclass(frozen=True)
class Probe:
    memory_bytes: int
    data_dir: Path
    rabbitmq: str
    otp: str


async def probe(ctl: str) -> Probe:
    process = await asyncio.create_subprocess_exec(
        *shlex.split(ctl),
        "-q",
        "eval",
        PROBE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    found = PROBE_LINE.search(out.decode())
    if process.returncode != 0 or found is None:
        reason = (err.decode().strip().splitlines() or ["no output"])[-1]
        raise ProbeFailed(f"--ctl {ctl!r} did not read the broker's node: {reason}")
    return Probe(int(found[1]), Path(found[2]), found[3], found[4])


def disk_bytes(folder: Path) -> int:
    """What the folder's files take on disk (allocated blocks, as ``du`` counts)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:  # a segment rolled over meanwhile
                continue
    return total


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered)) - 1))]


def median(values: list[float]) -> float:
    ordered, middle = sorted(values), len(values) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


async def one_round(
    broker: Broker, queue_type: topology.QueueType, config: QueueTypesConfig
) -> dict[str, float]:
    """One queue of ``queue_type``: filled, measured, deleted."""
    channel = await broker.connection.channel(publisher_confirms=True)
    names = Names(f"{broker.names.prefix}.{queue_type}-{uuid.uuid4().hex[:6]}")
    both, quorum = topology.request_queue_arguments(names)
    cap = {"x-max-length": config.messages}  # the real one refuses past 1,000
    queue = await topology.declare_queue(
        channel, names.request_queue, queue_type, both | cap, quorum=quorum | cap
    )

    async def publish(index: int) -> None:
        request = make_request(
            reply_to="bench-queue-types", user_id=f"u{index}", question=QUESTION, ttl_s=TTL_S
        )
        message = messages.bot_message(request, TTL_S)
        await channel.default_exchange.publish(message, routing_key=names.request_queue)

    try:
        before = await probe(config.ctl)
        disk_before = disk_bytes(before.data_dir)
        latencies = []
        for index in range(config.latency_samples):  # one at a time, as a bot publishes
            began = time.perf_counter()
            await publish(index)
            latencies.append(time.perf_counter() - began)
        for start in range(config.latency_samples, config.messages, BATCH):
            stop = min(start + BATCH, config.messages)
            await asyncio.gather(*(publish(index) for index in range(start, stop)))
        after = await probe(config.ctl)
        disk_after = disk_bytes(before.data_dir)
        await queue.purge()
        emptied = await probe(config.ctl)
    finally:
        await channel.queue_delete(names.request_queue)
        await channel.close()
    scale = PER / config.messages
    return {
        "publish_p50_s": percentile(latencies, 0.5),
        "publish_p95_s": percentile(latencies, 0.95),
        "memory_bytes_per_10k": (after.memory_bytes - before.memory_bytes) * scale,
        "disk_bytes_per_10k": (disk_after - disk_before) * scale,
        "memory_bytes_emptied_per_10k": (emptied.memory_bytes - before.memory_bytes) * scale,
    }


async def run_queue_types(
    settings: Settings, config: QueueTypesConfig, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Both types, ``config.repeat`` rounds each, alternating which goes first."""
    started = time.time()
    node = await probe(config.ctl)
    bench = settings.model_copy(update={"prefix": f"bench-{uuid.uuid4().hex[:12]}"})
    rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in TYPES}
    async with Broker(bench) as broker:
        try:
            for repeat in range(config.repeat):
                order = TYPES if repeat % 2 == 0 else TYPES[::-1]
                for queue_type in order:
                    result = await one_round(broker, queue_type, config)
                    rounds[queue_type].append(result)
                    progress(f"round {repeat + 1} {queue_type}: {_line(result)}")
        finally:
            await broker.delete_all()
    return {
        "benchmark": "queue-types",
        "schema_version": 1,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "environment": {
            "rabbitmq": node.rabbitmq,
            "otp": node.otp,
            "cpu_count": os.cpu_count(),
            "load_average_1m": os.getloadavg()[0],
        },
        "config": asdict(config),
        "rounds": rounds,
        "medians": {
            kind: {key: median([r[key] for r in results]) for key in results[0]}
            for kind, results in rounds.items()
        },
        "duration_s": time.time() - started,
    }


def _line(result: dict[str, float]) -> str:
    return (
        f"p50 {result['publish_p50_s'] * 1000:.2f} ms, p95 {result['publish_p95_s'] * 1000:.2f}"
        f" ms, memory {result['memory_bytes_per_10k'] / 2**20:.1f} MiB, disk "
        f"{result['disk_bytes_per_10k'] / 2**20:.1f} MiB per 10k"
    )


def table(doc: dict[str, Any]) -> str:
    """The medians as a Markdown table (the one docs/reliability.md shows)."""
    medians = doc["medians"]
    rows = [
        ("confirmed publish p50, ms", "publish_p50_s", 1000, 2),
        ("confirmed publish p95, ms", "publish_p95_s", 1000, 2),
        ("broker memory per 10k messages, MiB", "memory_bytes_per_10k", 2**-20, 1),
        ("broker disk per 10k messages, MiB", "disk_bytes_per_10k", 2**-20, 1),
        (
            "broker memory still held once they are purged, MiB",
            "memory_bytes_emptied_per_10k",
            2**-20,
            1,
        ),
    ]
    lines = ["| measure | classic | quorum |", "|---|---:|---:|"]
    for label, key, unit, digits in rows:
        cells = [f"{round(medians[kind][key] * unit, digits) + 0.0:.{digits}f}" for kind in TYPES]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def print_report(doc: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(to_json(doc))
        return
    env, config = doc["environment"], doc["config"]
    print(
        f"RabbitMQ {env['rabbitmq']} (OTP {env['otp']}), {config['messages']:,} messages a round,"
        f" the first {config['latency_samples']} one at a time; medians of {config['repeat']}"
        f" rounds per type"
    )
    print(table(doc))
