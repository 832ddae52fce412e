"""What ``/healthz`` says beyond the counters: the job running now, and the knowledge base the
engine answers from (``concierge status`` shows both, from wherever it runs)."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from config.spaces import DEFAULT_SPACE
from engine.knowledge.models import KbStats
from engine.knowledge.store import KnowledgeBase

log = logging.getLogger(__name__)

FileIdentity = tuple[int, int, int]  # (inode, mtime in ns, size)
OUTCOMES = ("done", "cancelled", "failed", "expired")  # how a request ended, as /healthz says
NextRescrape = Callable[[], datetime | None]  # the schedule's next; None while one is open


@dataclass(frozen=True)
class Running:
    """A job in progress: the answer being generated, or a rescrape; and its space."""

    session_id: str
    space: str = DEFAULT_SPACE
    since: float = field(default_factory=time.monotonic)

    def report(self) -> dict[str, Any]:
        running_s = round(time.monotonic() - self.since, 2)
        return {"session_id": self.session_id, "space": self.space, "running_s": running_s}


def running_report(running: Running | None) -> dict[str, Any] | None:
    return None if running is None else running.report()


class KnowledgeReport:
    """The engine's knowledge base as ``/healthz`` reports it.

    Counting the passages reads the whole full-text table, so the counts are kept until the
    file changes: a rescrape replaces it whole (``os.replace``), which changes its inode. With
    a schedule (``CONCIERGE_RESCRAPE_EVERY``), when the next rescrape is due.
    """

    def __init__(self, kb_path: Path, next_rescrape: NextRescrape | None = None) -> None:
        self.path = kb_path.resolve()  # the engine's, whatever directory status runs from
        self.next_rescrape = next_rescrape
        self._counted: tuple[FileIdentity | None, dict[str, Any]] | None = None

    def read(self) -> dict[str, Any]:
        """Blocking (SQLite): call it in a thread."""
        identity = _identity(self.path)
        if self._counted is None or self._counted[0] != identity:
            self._counted = (identity, self._count())
        if self.next_rescrape is None:
            return self._counted[1]
        return self._counted[1] | {"next_rescrape": iso_utc(self.next_rescrape())}

    def _count(self) -> dict[str, Any]:
        report: dict[str, Any] = {"path": str(self.path)}
        try:
            stats = KnowledgeBase(self.path).stats()
        except sqlite3.Error as error:  # a damaged file: say so, the engine still answers
            log.warning("knowledge base not readable: %s", error)
            stats = KbStats(0, 0, None, 0)
            report["error"] = f"not readable: {error}"
        return report | {
            "articles": stats.articles,
            "passages": stats.passages,
            "last_rescrape": iso_utc(stats.last_rescrape_at),
        }


def iso_utc(moment: datetime | None) -> str | None:
    """``2026-11-30T13:02:35Z``; a time stored without a zone was stored in UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _identity(path: Path) -> FileIdentity | None:
    try:
        stat = path.stat()
    except OSError:  # no knowledge base yet
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
