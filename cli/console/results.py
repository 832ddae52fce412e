"""The latest ``concierge bench cancel`` results, as the demo's chart draws them.

The benchmark saves its JSON document beside the knowledge base (``bench-cancel.json``, see
``cli.benchmarks.cancel.results_path``); its ``summary`` has one row per mode and depth. The
console reads, in this order, the file it is given, that saved file, ``cancel.json`` in its
working directory (the older ``--json > cancel.json``), else shows the figures published in
docs/benchmarks.md (shipped beside the page). The chart data names the file and when its run
was made; a file passed over (missing, or not cancel results) is named in ``note``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.benchmarks.cancel import results_path
from config.errors import ConciergeError

if TYPE_CHECKING:
    from config.settings import Settings

DEFAULT_RESULTS = Path("cancel.json")
PUBLISHED = Path(__file__).parent / "static" / "bench-cancel-2026-11-29.json"


class NotResults(ConciergeError):
    """A file that holds no cancel results; the message says why, in a few words (a note
    beside the chart, never an error of the command)."""


def cancel_results(path: Path | None = None, *, settings: Settings | None = None) -> dict[str, Any]:
    """The chart's data from the first file that holds cancel results, else the published
    figures. ``settings`` locate the file ``concierge bench cancel`` saved."""
    notes: list[str] = []
    for candidate, say_if_missing in _candidates(path, settings):
        try:
            return _with_notes(read_results(candidate), notes)
        except FileNotFoundError:
            if say_if_missing:
                notes.append(f"{candidate}: no results there yet")
        except NotResults as error:
            notes.append(f"{candidate}: not read ({error})")
    published: dict[str, Any] = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    published.update(file=None, made_at=published.get("started_at"))
    return _with_notes(published, notes)


def _candidates(path: Path | None, settings: Settings | None) -> list[tuple[Path, bool]]:
    """Where to look, in order, and whether a missing file is worth a note: the file asked for
    and the saved one are; ``cancel.json`` in the working directory is an old habit."""
    candidates = [] if path is None else [(path, True)]
    if settings is not None:
        candidates.append((results_path(settings), True))
    return [*candidates, (DEFAULT_RESULTS, False)]


def _with_notes(data: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    if notes:
        data["note"] = "; ".join(notes)
    return data


def read_results(path: Path) -> dict[str, Any]:
    """One file's chart data. Raises ``FileNotFoundError``, or ``NotResults`` for a file that
    cannot be read or is not a cancel benchmark's document."""
    try:
        text = path.read_text(encoding="utf-8")
        doc = json.loads(text)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise NotResults(error.strerror or type(error).__name__) from None
    except ValueError:
        raise NotResults("not JSON") from None
    if not isinstance(doc, dict) or doc.get("benchmark") != "cancel":
        raise NotResults("not a bench cancel document")
    try:
        data = chart_data(doc, str(path))
    except (KeyError, TypeError, AttributeError):
        raise NotResults("its summary is not the benchmark's") from None
    if not data["rows"]:
        raise NotResults("no runs in it")
    made_at = data["started_at"] or _modified(path)
    source = str(path) if made_at is None else f"{path}, run {made_at}"
    data.update(file=str(path), made_at=made_at, source=source)
    return data


def _modified(path: Path) -> str | None:
    """When the file was written, for a document without ``started_at``."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(path.stat().st_mtime))
    except OSError:
        return None


def chart_data(doc: dict[str, Any], source: str) -> dict[str, Any]:
    """One row per mode and depth, medians in seconds, from the benchmark's ``summary``."""
    rows = []
    for row in doc["summary"]:
        if not row.get("runs"):
            continue
        rows.append(
            {
                "mode": row["mode"],
                "depth": row["depth"],
                "runs": row["runs"],
                "stop_s": row["stop_s"]["median"],
                "stop_p95_s": row["stop_s"]["p95"],
                "seen_s": row["cancel_seen_s"]["median"],
                "tokens_after": row["tokens_after_cancel"]["median"],
            }
        )
    environment = doc.get("environment") or {}
    return {
        "source": source,
        "started_at": doc.get("started_at"),
        "phase": (doc.get("config") or {}).get("phase", "decode"),
        "model": environment.get("model"),
        "rows": rows,
    }
