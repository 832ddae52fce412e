"""Counting pages as they finish, and telling the caller at most once a second.

One event per page made 10,004 progress lines for a 10,000-page site, each one a chat edit;
a phase change, and the last counts before it (``flush``), always go out at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from engine.knowledge.models import Outcome, Phase, ScrapeProgress

PROGRESS_INTERVAL_S = 1.0


class ProgressReporter:
    """Holds the current counts; passes them to ``on_progress`` on a phase change, and for a
    count only when ``interval_s`` has passed since the last report."""

    def __init__(
        self,
        on_progress: Callable[[ScrapeProgress], None],
        interval_s: float = PROGRESS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_progress = on_progress
        self._interval_s = interval_s
        self._clock = clock
        self.current = ScrapeProgress(phase="discovering")
        self._reported: ScrapeProgress | None = None
        self._reported_at = 0.0

    def phase(self, phase: Phase, found: int | None = None, articles: int = 0) -> None:
        self.flush()
        found = self.current.found if found is None else found
        self.current = replace(self.current, phase=phase, found=found, articles=articles)
        self._report()

    def found(self, found: int) -> None:
        """More pages to read (a crawl finds them as it goes): shown with the next report."""
        self.current = replace(self.current, found=found)

    def count(self, outcome: Outcome) -> None:
        self.current = replace(self.current, **{outcome: getattr(self.current, outcome) + 1})
        if self._clock() - self._reported_at >= self._interval_s:
            self._report()

    def flush(self) -> None:
        """Report the counts if they changed since the last report (the final state)."""
        if self._reported is not None and self.current != self._reported:
            self._report()

    def _report(self) -> None:
        self._reported, self._reported_at = self.current, self._clock()
        self._on_progress(self.current)
