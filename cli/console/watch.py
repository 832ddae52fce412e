"""What copies cannot tell, read as ``concierge status`` reads it: the request queue's counts
(waiting, engine workers taking requests) once a second, and the engine's ``/healthz`` (up for
how long, its backend, its knowledge base; when no engine reports one, the local knowledge base
file) every few seconds; with spaces (docs/spaces.md), each space's knowledge base too, from
``/healthz``'s ``spaces``, else from each space's local file. Whether the engine is answering
the page knows sooner, from the copies of its events; each ``/healthz`` is also work for the
engine's own event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from broker.amqp import Broker
from cli.console.state import ConsoleState
from cli.status import HEALTH_TIMEOUT_S, Health, health_url
from config.settings import Settings
from config.spaces import load_spaces
from engine.health import iso_utc
from engine.knowledge.store import KnowledgeBase

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
HEALTH_EVERY_S = 3.0
POKED_AFTER_S = 0.25  # a new request is counted this soon (the broker has it by then)
LOCAL_KB_EVERY_S = 10.0  # the local file is counted at most this often (a full-table read)
HEALTH_KEYS = ("ok", "engine", "broker_connected", "model_loaded", "uptime_s", "started")


class EngineWatch:
    def __init__(
        self, settings: Settings, broker: Broker, state: ConsoleState, changed: Callable[[], None]
    ) -> None:
        self.settings = settings
        self.broker = broker
        self.state = state
        self.changed = changed
        self.url = health_url(settings)
        self.spaces = load_spaces(settings)  # without a spaces file: default's alone
        named = {name: self.spaces.named(name).settings.kb_path for name in self.spaces.names}
        self.space_kbs = named if len(named) > 1 else {}
        self._local_kb_at = 0.0
        self._health_at = -HEALTH_EVERY_S
        self._http: aiohttp.ClientSession | None = None  # one, kept: a new one each second
        # cost the event loop it shares with the engine more than the rest of the console
        self._poked = asyncio.Event()

    def poke(self) -> None:
        """Read again soon: a request was just copied, so the broker's count changed."""
        self._poked.set()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def run(self) -> None:
        while True:
            await self.once()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(INTERVAL_S):
                    await self._poked.wait()
                await asyncio.sleep(POKED_AFTER_S)
            self._poked.clear()

    async def once(self) -> None:
        now = time.time()
        try:
            counts = await self.broker.request_queue_counts()
        except Exception as error:  # the broker is away; aio-pika reconnects on its own
            log.debug("console: queue counts not read: %s", type(error).__name__)
        else:
            self.state.on_count(counts.messages, counts.consumers, now)
        self.state.drop_expired(now)
        if time.monotonic() - self._health_at >= HEALTH_EVERY_S:
            self._health_at = time.monotonic()
            health = await self._health()
            self.state.health = engine_view(health, self.url)
            self.state.on_answering(_working_on(health), time.time())
            self.state.kb, self.state.kb_spaces = await self.knowledge(health)
        self.changed()

    async def _health(self) -> Health | None:
        """The engine's ``/healthz``, or None if it does not answer (as ``concierge status``)."""
        if self.url is None:
            return None
        if self._http is None:
            timeout = aiohttp.ClientTimeout(total=HEALTH_TIMEOUT_S)
            self._http = aiohttp.ClientSession(timeout=timeout)
        try:
            async with self._http.get(self.url) as response:
                health: Health = await response.json(content_type=None)
                return health
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    async def knowledge(self, health: Health | None) -> tuple[Knowledge, SpacesKnowledge]:
        """``default``'s knowledge base, and with spaces each space's (else None): as the
        engine reports them, else read from the local files at most every few seconds."""
        reported = (health or {}).get("knowledge_base")
        if isinstance(reported, dict):
            return {**reported, "source": "engine"}, reported_spaces(health or {})
        if time.monotonic() - self._local_kb_at < LOCAL_KB_EVERY_S:
            return self.state.kb, self.state.kb_spaces
        self._local_kb_at = time.monotonic()
        kb_paths = {"": self.settings.kb_path, **self.space_kbs}
        read = {name: await asyncio.to_thread(local_kb, path) for name, path in kb_paths.items()}
        default = read.pop("")
        return default, read or None


Knowledge = dict[str, Any] | None
SpacesKnowledge = dict[str, dict[str, Any]] | None


def reported_spaces(health: Health) -> SpacesKnowledge:
    """``/healthz``'s ``spaces``, each one's knowledge base; None for a deployment without
    spaces (the engine reports ``default`` alone) or an engine that does not say."""
    spaces = health.get("spaces")
    if not isinstance(spaces, dict) or len(spaces) < 2:
        return None
    return {
        name: {**(space.get("knowledge_base") or {}), "source": "engine"}
        for name, space in spaces.items()
        if isinstance(space, dict)
    }


def local_kb(kb_path: Path) -> dict[str, Any]:
    """A knowledge base file's counts, read here (no engine reports them). Blocking."""
    path = kb_path.resolve()
    if not path.exists():
        return {"path": str(path), "source": "local", "missing": True}
    stats = KnowledgeBase(path).stats()
    return {
        "path": str(path),
        "source": "local",
        "articles": stats.articles,
        "passages": stats.passages,
        "last_rescrape": iso_utc(stats.last_rescrape_at),
    }


def _working_on(health: Health | None) -> list[str]:
    jobs = [(health or {}).get("answering"), (health or {}).get("rescraping")]
    return [str(job["session_id"]) for job in jobs if isinstance(job, dict) and "session_id" in job]


def engine_view(health: Health | None, url: str | None) -> dict[str, Any]:
    """The part of ``/healthz`` the page shows; ``reachable`` False when it did not answer."""
    if health is None:
        return {"reachable": False, "url": url}
    view: dict[str, Any] = {key: health.get(key) for key in HEALTH_KEYS}
    view |= {"reachable": True, "url": url, "requests": health.get("requests") or {}}
    view["answering"] = health.get("answering")
    view["rescraping"] = health.get("rescraping")
    backend = health.get("backend")
    if isinstance(backend, dict):
        view["backend"] = {k: backend.get(k) for k in ("kind", "model", "url", "server_answering")}
    return view
