"""``concierge status``: the queues, the engine and the knowledge base on one screen.

Queue figures come from passive declares (``message_count``, ``consumer_count``), which create
nothing and need no management plugin; the engine's health from its ``/healthz``; the
knowledge base from its file. Exit 0 when an engine is there to answer, 1 otherwise, 69 (from
``main``) when the broker cannot be reached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from rich.console import Console
from rich.table import Table

from broker.amqp import peek_queues
from broker.protocol import Names
from config.settings import Settings
from engine.knowledge import KnowledgeBase

HEALTH_TIMEOUT_S = 3.0
ANY_ADDRESS = {"0.0.0.0", "::", ""}


@dataclass(frozen=True)
class QueueInfo:
    """One queue as a passive declare sees it; ``state`` is ``ok``, ``missing`` or ``exclusive``."""

    role: str
    name: str
    state: str
    messages: int | None = None
    consumers: int | None = None


async def read_queues(
    settings: Settings, engine_names: Sequence[str] = (), bot_names: Sequence[str] = ()
) -> list[QueueInfo]:
    """The shared queues of the prefix, each engine's cancel queue and each named reply queue.

    AMQP cannot list queues: cancel and reply queues are looked up by name (the settings'
    ``engine_name`` and ``bot_name``, plus any given).
    """
    names = Names(settings.prefix)
    wanted = [
        ("request", names.request_queue),
        ("expired", names.expired_queue),
        ("dead", names.dead_queue),
    ]
    for engine in dict.fromkeys([settings.engine_name, *engine_names]):
        wanted.append((f"cancel ({engine})", names.cancel_queue(engine)))
    for bot in dict.fromkeys([settings.bot_name, *bot_names]):
        if bot:
            wanted.append((f"reply ({bot})", names.reply_queue(bot)))
    # ``concierge up`` names each platform's bot <bot_name>-<platform>: shown when they exist
    per_platform = [f"{settings.bot_name}-{p}" for p in ("discord", "slack") if settings.bot_name]
    optional = {names.reply_queue(bot) for bot in per_platform}
    wanted += [(f"reply ({bot})", names.reply_queue(bot)) for bot in per_platform]
    peeks = await peek_queues(settings, [name for _, name in wanted])
    return [
        QueueInfo(role, name, peek.state, peek.messages, peek.consumers)
        for (role, name), peek in zip(wanted, peeks, strict=True)
        if not (name in optional and peek.state == "missing")
    ]


def health_url(settings: Settings) -> str | None:
    """Where this machine reaches the engine's ``/healthz``; None when metrics are off."""
    port = settings.metrics_port
    if not port:
        return None
    host = settings.metrics_host
    host = "127.0.0.1" if host in ANY_ADDRESS else host
    return f"http://{host}:{port}/healthz"


async def read_health(url: str | None) -> dict[str, Any] | None:
    """The engine's own view of itself, or None if it does not answer."""
    if url is None:
        return None
    timeout = aiohttp.ClientTimeout(total=HEALTH_TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(url) as response,
        ):
            health: dict[str, Any] = await response.json(content_type=None)
            return health
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def status_command(
    settings: Settings,
    *,
    engine_names: Sequence[str] = (),
    bot_names: Sequence[str] = (),
    console: Console | None = None,
) -> int:
    """Print the status screen; 0 when an engine is there to answer requests, else 1."""
    url = health_url(settings)
    queues, health = await asyncio.gather(
        read_queues(settings, engine_names, bot_names), read_health(url)
    )
    console = console or Console()
    console.print(_queue_table(settings, queues))
    engine_alive = _engine_alive(queues, health)
    for line in _engine_lines(queues, health, url, engine_alive):
        console.print(line)
    stats = await asyncio.to_thread(KnowledgeBase(settings.kb_path).stats)
    console.print(f"[bold]knowledge base[/] {settings.kb_path}: {stats.text}")
    return 0 if engine_alive else 1


def _queue_table(settings: Settings, queues: list[QueueInfo]) -> Table:
    table = Table("queue", "name", "waiting", "consumers", title=f"prefix {settings.prefix}")
    for queue in queues:
        if queue.state == "ok":
            table.add_row(queue.role, queue.name, str(queue.messages), str(queue.consumers))
        else:
            table.add_row(queue.role, queue.name, f"[yellow]{queue.state}[/]", "-")
    return table


def _engine_alive(queues: list[QueueInfo], health: dict[str, Any] | None) -> bool:
    """An engine consumes its cancel queue for as long as it runs (requests pause during a
    rescrape), so a consumer there, or a healthy ``/healthz``, means one is alive."""
    if health is not None:
        return bool(health.get("ok"))
    return any(q.role.startswith("cancel") and (q.consumers or 0) > 0 for q in queues)


def _engine_lines(
    queues: list[QueueInfo], health: dict[str, Any] | None, url: str | None, alive: bool
) -> list[str]:
    request = next(q for q in queues if q.role == "request")
    workers = request.consumers or 0
    lines = [
        f"[bold]engine[/] {'[green]alive[/]' if alive else '[red]not seen[/]'}; "
        f"{workers} worker(s) taking requests"
    ]
    if url is None:
        lines.append("[bold]health[/] metrics are off (CONCIERGE_METRICS_PORT=0)")
    elif health is None:
        lines.append(f"[bold]health[/] no answer from {url}")
    else:
        lines.append(
            f"[bold]health[/] engine {health.get('engine')}: "
            f"broker connected {_yes(health.get('broker_connected'))}, "
            f"model loaded {_yes(health.get('model_loaded'))}, "
            f"requests {health.get('requests', {})}"
        )
    return lines


def _yes(value: object) -> str:
    return "[green]yes[/]" if value else "[red]no[/]"
