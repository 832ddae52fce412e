"""Each benchmark's runs check their own preconditions: a run that missed one measures
nothing, so the benchmark makes no summary and says why instead of printing a figure.

A run carries ``missed``: why it measures nothing, or None. The document's ``invalid_runs``
counts the reasons (``{}`` when every run met its precondition).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def count_reasons(reasons: Iterable[str | None]) -> dict[str, int]:
    """Each reason that is not None, with how many runs gave it."""
    counts: dict[str, int] = {}
    for reason in reasons:
        if reason is not None:
            counts[reason] = counts.get(reason, 0) + 1
    return counts


def invalid_runs(runs: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The reasons runs missed their precondition, each with how many did."""
    return count_reasons(run.get("missed") for run in runs)


def run_count(doc: dict[str, Any]) -> int:
    """How many runs the document's preconditions were checked on (``queue``: one burst)."""
    for key in ("runs", "turns"):
        if isinstance(doc.get(key), list):
            return len(doc[key])
    return 1


def refusal(doc: dict[str, Any]) -> str:
    """Why a benchmark prints no figure: its runs that missed their precondition."""
    missed = doc["invalid_runs"]
    reasons = "; ".join(f"{reason} ({count} runs)" for reason, count in missed.items())
    return (
        f"no figures: {sum(missed.values())} of {run_count(doc)} runs missed their "
        f"precondition: {reasons}"
    )
