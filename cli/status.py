"""``concierge status``: the queues, the engine and the knowledge base on one screen.

Queue figures come from passive declares (``message_count``, ``consumer_count``), which create
nothing and need no management plugin; the engine's health from its ``/healthz``: whether it
is answering, its counts, and its knowledge base (``answering`` and ``knowledge_base``). An
engine that does not report its knowledge base leaves the local ``CONCIERGE_KB_PATH`` file to
show, labelled as local. With spaces (docs/spaces.md), a table of each space's requests
waiting in the queue now and since the engine started, and its knowledge base. An engine that
runs but cannot answer (its model server down, with ``CONCIERGE_BACKEND=openai``) is shown
running, with what it waits for. Exit 0 when an engine is there to answer, 1 otherwise, 69
(from ``main``) when the broker cannot be reached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from rich.console import Console
from rich.table import Table

from broker.peek import peek_queues
from broker.protocol import Names
from config.settings import Settings
from config.urls import masked_url
from engine.health import OUTCOMES
from engine.knowledge.store import KnowledgeBase

Health = dict[str, Any]  # the JSON of /healthz

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
    """The shared queues of the prefix (request, expired, dead, feedback), each engine's cancel
    queue and each named reply queue.

    AMQP cannot list queues: cancel and reply queues are looked up by name (the settings'
    ``engine_name`` and ``bot_name``, plus any given).
    """
    names = Names(settings.prefix)
    wanted = [
        ("request", names.request_queue),
        ("expired", names.expired_queue),
        ("dead", names.dead_queue),
        ("feedback", names.feedback_queue),  # votes, waiting for an engine to store them
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


async def read_health(url: str | None) -> Health | None:
    """The engine's own view of itself, or None if it does not answer."""
    if url is None:
        return None
    timeout = aiohttp.ClientTimeout(total=HEALTH_TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(url) as response,
        ):
            health: Health = await response.json(content_type=None)
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
    """Print the status screen; 0 when an engine is there to answer requests, else 1 (none
    runs, or the one that runs cannot answer now: the screen says which)."""
    url = health_url(settings)
    queues, health = await asyncio.gather(
        read_queues(settings, engine_names, bot_names), read_health(url)
    )
    console = console or Console(soft_wrap=True)  # long paths: the terminal wraps, not rich
    console.print(_queue_table(settings, queues))
    state = engine_state(queues, health)
    console.print(engine_line(queues, state))
    if health is None:
        console.print(_no_health_line(url))
    else:
        console.print(health_table(health, url))
        console.print(requests_table(health))
        if (by_space := spaces_table(health)) is not None:
            console.print(by_space)
    console.print(await knowledge_line(settings, health))
    return 0 if state.answers else 1


def _queue_table(settings: Settings, queues: list[QueueInfo]) -> Table:
    table = Table("queue", "name", "waiting", "consumers", title=f"prefix {settings.prefix}")
    for queue in queues:
        if queue.state == "ok":
            table.add_row(queue.role, queue.name, str(queue.messages), str(queue.consumers))
        else:
            table.add_row(queue.role, queue.name, f"[yellow]{queue.state}[/]", "-")
    return table


@dataclass(frozen=True)
class EngineState:
    """Whether an engine runs, and whether it can answer now; ``why_not``: what stops it."""

    running: bool
    answers: bool
    why_not: tuple[str, ...] = ()


def engine_state(queues: list[QueueInfo], health: Health | None) -> EngineState:
    """An engine consumes its cancel queue for as long as it runs (a rescrape included), and
    answers ``/healthz`` from its own event loop: either means it runs. Its ``ok`` says whether
    it can answer now; when it cannot (a model server down, the broker lost, the model still
    loading), it still runs, and ``why_not`` says what it waits for."""
    consuming = any(q.role.startswith("cancel") and (q.consumers or 0) > 0 for q in queues)
    if health is None:
        return EngineState(running=consuming, answers=consuming)
    if health.get("ok"):
        return EngineState(running=True, answers=True)
    return EngineState(running=True, answers=False, why_not=tuple(_why_not(health)))


def _why_not(health: Health) -> list[str]:
    reasons = []
    if not health.get("broker_connected", True):
        reasons.append("it is not connected to the broker")
    if not health.get("model_loaded", True):
        reasons.append("the model is still loading")
    backend = health.get("backend")
    if isinstance(backend, dict) and backend.get("server_answering") is False:
        where = f" at {masked_url(str(backend['url']))}" if backend.get("url") else ""
        reasons.append(f"the model server{where} does not answer")
    return reasons or ["its /healthz says it is not ok"]


def engine_line(queues: list[QueueInfo], state: EngineState) -> str:
    request = next(q for q in queues if q.role == "request")
    if state.answers:
        shown = "[green]alive[/]"
    elif state.running:
        shown = f"[yellow]running, not answering[/]: {'; '.join(state.why_not)}"
    else:
        shown = "[red]not seen[/]"
    return f"[bold]engine[/] {shown}; {plural(request.consumers or 0, 'worker')} taking requests"


def _no_health_line(url: str | None) -> str:
    if url is None:
        return "[bold]health[/] metrics are off (CONCIERGE_METRICS_PORT=0)"
    return f"[bold]health[/] no answer from {url}"


def health_table(health: Health, url: str | None) -> Table:
    """The engine's own view of itself, one row per fact."""
    table = Table(show_header=False, title=f"engine {health.get('engine')!r} ({url})")
    table.add_row("broker connected", _yes(health.get("broker_connected")))
    table.add_row("model loaded", _yes(health.get("model_loaded")))
    if isinstance(backend := health.get("backend"), dict):  # older engines leave it out
        table.add_row("backend", backend_text(backend))
        if "server_answering" in backend:
            table.add_row("model server answers", _yes(backend["server_answering"]))
    if isinstance(uptime := health.get("uptime_s"), int | float):
        table.add_row("up for", duration(uptime))
    if "answering" in health:  # an engine too old to say leaves the row out
        table.add_row("answering", _answering(health["answering"]))
    if "rescraping" in health:
        table.add_row("rescraping", _answering(health["rescraping"], idle="no"))
    return table


def backend_text(backend: Health) -> str:
    """``openai: <model> at <url>`` for a model server, ``llama: <file>`` in process."""
    kind, model = backend.get("kind", "?"), backend.get("model")
    where = f" at {masked_url(str(backend['url']))}" if backend.get("url") else ""
    return f"{kind}: {model or 'its default model'}{where}"


def _answering(answering: object, idle: str = "no (idle)") -> str:
    if not isinstance(answering, dict):
        return idle
    running_s = answering.get("running_s")
    took = f" for {duration(running_s)}" if isinstance(running_s, int | float) else ""
    return f"[green]yes[/]: session {answering.get('session_id')}{took}"


def requests_table(health: Health) -> Table:
    """Requests since the engine started: how many began, and how each ended."""
    outcomes = health.get("requests")
    counts = dict(outcomes) if isinstance(outcomes, dict) else {}
    if "started" in health:
        counts = {"started": health["started"], **counts}
    table = Table(*counts, title="requests since the engine started")
    table.add_row(*(str(count) for count in counts.values()))
    return table


def spaces_table(health: Health) -> Table | None:
    """Each space's share of the engine's work: what runs in it now, its requests waiting in
    the queue now, those the engine began since it started and how they ended, and its
    knowledge base; None with one space (the tables above are its) or an engine too old to
    say. The caption says how many wait whose space the engine could not see."""
    spaces = health.get("spaces")
    if not isinstance(spaces, dict) or len(spaces) < 2:
        return None
    now: dict[str, list[str]] = {}
    for job in ("answering", "rescraping"):
        if isinstance(running := health.get(job), dict):
            now.setdefault(str(running.get("space")), []).append(job)
    table = Table(
        "space",
        "now",
        "waiting",
        "started",
        *OUTCOMES,
        "knowledge base",
        title="spaces: waiting now, and requests since the engine started",
        caption=waiting_caption(spaces),
    )
    for name, space in spaces.items():
        requests = space.get("requests") or {}
        kb = space.get("knowledge_base")
        waiting = space.get("waiting")
        table.add_row(
            name,
            ", ".join(now.get(name, [])) or "-",
            str(waiting) if isinstance(waiting, int) else "-",
            str(space.get("started", 0)),
            *(str(requests.get(outcome, 0)) for outcome in OUTCOMES),
            kb_text(kb) if isinstance(kb, dict) else "-",
        )
    return table


def waiting_caption(spaces: dict[str, Any]) -> str:
    """What the ``waiting`` column counts; ``waiting_unknown`` is the same in every space."""
    first: dict[str, Any] = next(iter(spaces.values()), {})
    if "waiting" not in first:
        return "waiting: not counted by space by this engine (too old to say)"
    if first.get("waiting") is None:
        return "waiting: the engine could not read the queue just now"
    unknown = first.get("waiting_unknown") or 0
    text = "waiting: in the queue now, neither cancelled nor past their deadline"
    if unknown:
        text += (
            f"; {plural(unknown, 'more request')} of a space the engine could not see "
            "(queued before it started, or while its connection was down)"
        )
    return text


async def knowledge_line(settings: Settings, health: Health | None) -> str:
    """The engine's knowledge base when it reports one; else the local file, said to be local
    (a relative CONCIERGE_KB_PATH read from another directory is another file)."""
    reported = (health or {}).get("knowledge_base")
    if isinstance(reported, dict):
        return f"[bold]knowledge base[/] (the engine's) {reported.get('path')}: " + kb_text(
            reported
        )
    path = settings.kb_path.resolve()
    label = f"[bold]knowledge base[/] (local file, the engine's may differ) {path}"
    if not path.exists():
        return f"{label}: no such file (CONCIERGE_KB_PATH; run status where the engine runs)"
    stats = await asyncio.to_thread(KnowledgeBase(path).stats)
    return f"{label}: {stats.text}"


def kb_text(reported: Health) -> str:
    """``4 articles, 20 passages, last rescrape 2026-11-30T13:02:35Z`` from ``/healthz``."""
    articles, passages = reported.get("articles", 0), reported.get("passages", 0)
    text = (
        f"{plural(articles, 'article')}, {plural(passages, 'passage')}, "
        f"last rescrape {reported.get('last_rescrape') or 'never'}"
    )
    if "next_rescrape" not in reported:  # no CONCIERGE_RESCRAPE_EVERY
        return text
    return f"{text}, next scheduled rescrape {reported['next_rescrape'] or 'now (queued)'}"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def duration(seconds: float) -> str:
    """``12.3 s``, ``4 min 05 s``, ``2 h 03 min``: as precise as a glance needs."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _yes(value: object) -> str:
    return "[green]yes[/]" if value else "[red]no[/]"
