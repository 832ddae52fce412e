"""``cancelled_sessions``: the ids the engine was asked to stop, bounded in size and in time."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict


class CancelledSessions:
    """A set of session ids whose entries expire after ``ttl_s`` and whose size stays bounded.

    The cancel consumer adds ids on the event loop; the token loop, in the generation thread,
    checks them every token. A lock keeps the two apart; both sides hold it for microseconds.
    The oldest entries go first when the set is full: a cancel older than every queued request
    can no longer matter.
    """

    def __init__(self, max_size: int, ttl_s: float) -> None:
        self.max_size = max_size
        self.ttl_s = ttl_s
        self._received_at: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, session_id: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._received_at.setdefault(session_id, now)
            self._drop_stale(now)

    def __contains__(self, session_id: object) -> bool:
        if not isinstance(session_id, str):
            return False
        with self._lock:
            received_at = self._received_at.get(session_id)
        return received_at is not None and time.monotonic() - received_at < self.ttl_s

    def received_at(self, session_id: str) -> float | None:
        """When the cancel arrived (``time.monotonic()``), for measuring the time to stop."""
        with self._lock:
            return self._received_at.get(session_id)

    def discard(self, session_id: str) -> None:
        with self._lock:
            self._received_at.pop(session_id, None)

    def __len__(self) -> int:
        with self._lock:
            self._drop_stale(time.monotonic())
            return len(self._received_at)

    def _drop_stale(self, now: float) -> None:
        while len(self._received_at) > self.max_size:
            self._received_at.popitem(last=False)
        while self._received_at:
            oldest_id, received_at = next(iter(self._received_at.items()))
            if now - received_at < self.ttl_s:
                break
            del self._received_at[oldest_id]
