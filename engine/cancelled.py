"""``cancelled_sessions``: the ids the engine was asked to stop, bounded in size and in time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cachetools import TTLCache

# Cancels remembered: far more than ever wait in the queue, each for longer than a request
# may wait (its TTL) and then run.
CANCELLED_SESSIONS_MAX = 10_000
CANCELLED_SESSIONS_TTL_S = 3600.0


class CancelledSessions:
    """A set of session ids whose entries expire after ``ttl_s`` and whose size stays bounded.

    The cancel consumer adds ids on the event loop; the token loop, in the generation thread,
    checks them every token. A lock keeps the two apart (``TTLCache`` is not thread-safe); both
    sides hold it for microseconds. The oldest entries go first when the set is full (the least
    recently looked up, strictly): a cancel older than every queued request can no longer
    matter.
    """

    def __init__(self, max_size: int, ttl_s: float) -> None:
        self.max_size = max_size
        self.ttl_s = ttl_s
        self._received_at: TTLCache[str, float] = TTLCache(max_size, ttl_s, timer=time.monotonic)
        self._lock = threading.Lock()
        self._watchers: dict[str, Callable[[], None]] = {}  # the running answer's, at most

    def add(self, session_id: str) -> None:
        """Remember ``session_id``; a repeated cancel keeps its first arrival time. Whoever
        watches it (``watch``) hears of it at once."""
        with self._lock:
            if session_id not in self._received_at:
                self._received_at[session_id] = time.monotonic()
            watcher = self._watchers.get(session_id)
        if watcher is not None:
            watcher()

    def watch(self, session_id: str, on_cancel: Callable[[], None]) -> None:
        """Call ``on_cancel`` when ``session_id`` is cancelled, until ``unwatch``: the running
        answer stops its computation then, not at its next token."""
        with self._lock:
            self._watchers[session_id] = on_cancel

    def unwatch(self, session_id: str) -> None:
        with self._lock:
            self._watchers.pop(session_id, None)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._received_at

    def received_at(self, session_id: str) -> float | None:
        """When the cancel arrived (``time.monotonic()``), for measuring the time to stop."""
        with self._lock:
            return self._received_at.get(session_id)

    def discard(self, session_id: str) -> None:
        with self._lock:
            self._received_at.pop(session_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._received_at)
