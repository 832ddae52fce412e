"""Counting pages as they finish and telling the caller after each one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from .models import Phase, ScrapeProgress

Outcome = Literal["fetched", "unchanged", "failed", "skipped"]


class ProgressReporter:
    """Holds the current counts; every change is passed to ``on_progress`` at once."""

    def __init__(self, on_progress: Callable[[ScrapeProgress], None]) -> None:
        self._on_progress = on_progress
        self.current = ScrapeProgress(phase="discovering")

    def phase(self, phase: Phase, found: int | None = None) -> None:
        found = self.current.found if found is None else found
        self._emit(replace(self.current, phase=phase, found=found))

    def count(self, outcome: Outcome) -> None:
        self._emit(replace(self.current, **{outcome: getattr(self.current, outcome) + 1}))

    def _emit(self, progress: ScrapeProgress) -> None:
        self.current = progress
        self._on_progress(progress)
