"""Each space's share of the engine's work, for ``/healthz`` (``concierge status`` shows it):
the requests of each space waiting in the queue now (``engine.queue_share`` says how they are
known), those the engine began and how they ended since it started, and each space's
knowledge base with its next scheduled rescrape. The job running now says its space itself
(``engine.health.Running``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel

from broker.protocol import Cancelled, Done, Expired, Failed, Started
from config.spaces import Spaces
from engine.health import OUTCOMES, KnowledgeReport
from engine.queue_share import Waiting
from engine.schedule import RescrapeSchedule

OUTCOME_OF = {Done: "done", Cancelled: "cancelled", Failed: "failed", Expired: "expired"}


class SpacesReport:
    """What ``/healthz`` says of each space:
    ``{name: {waiting, waiting_unknown, started, requests, knowledge_base}}``."""

    def __init__(self, spaces: Spaces, schedule: RescrapeSchedule | None = None) -> None:
        self._started = dict.fromkeys(spaces.names, 0)
        self._ended = {name: dict.fromkeys(OUTCOMES, 0) for name in spaces.names}
        scheduled = schedule.clocks if schedule is not None else {}
        self._knowledge = {
            name: KnowledgeReport(
                spaces.named(name).settings.kb_path,
                partial(schedule.next_rescrape, name) if schedule and name in scheduled else None,
            )
            for name in spaces.names
        }
        self._waiting: Callable[[], Waiting | None] = lambda: None

    def watch_waiting(self, waiting: Callable[[], Waiting | None]) -> None:
        """Read what waits in the queue at each ``read`` (blocking; None: not known now)."""
        self._waiting = waiting

    def record(self, space: str, event: BaseModel) -> None:
        """Count one reply event of a request of ``space``, as ``EngineMetrics.record`` does;
        a space the engine does not serve (the request was refused for it) is not counted."""
        if space not in self._started:
            return
        if isinstance(event, Started):
            self._started[space] += 1
        elif (outcome := OUTCOME_OF.get(type(event))) is not None:
            self._ended[space][outcome] += 1

    def read(self) -> dict[str, dict[str, Any]]:
        """Blocking (the queue's count; each knowledge base's counts, read again only when
        its file changed). ``waiting_unknown``, the same in every space: the requests waiting
        whose space the engine could not see; both are None when the queue cannot be read."""
        waiting = self._waiting()
        return {
            name: {
                "waiting": waiting.by_space[name] if waiting is not None else None,
                "waiting_unknown": waiting.unknown if waiting is not None else None,
                "started": started,
                "requests": dict(self._ended[name]),
                "knowledge_base": self._knowledge[name].read(),
            }
            for name, started in self._started.items()
        }
