"""The latest ``concierge bench cancel`` results, as the demo's chart draws them.

The benchmark prints one JSON document (``--json > cancel.json``, as docs/benchmarks.md runs
it); its ``summary`` has one row per mode and depth. The console reads the file it is given,
else ``cancel.json`` in its working directory, else shows the figures published in
docs/benchmarks.md (shipped beside the page), saying which it shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEFAULT_RESULTS = Path("cancel.json")
PUBLISHED = Path(__file__).parent / "static" / "bench-cancel-2026-11-29.json"


def cancel_results(path: Path | None = None) -> dict[str, Any]:
    """The chart's data: the given file, ``cancel.json``, or the published figures."""
    candidate = path or DEFAULT_RESULTS
    try:
        doc = json.loads(candidate.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = None
    if isinstance(doc, dict) and doc.get("benchmark") == "cancel" and doc.get("summary"):
        return chart_data(doc, str(candidate))
    published: dict[str, Any] = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    if path is not None:  # asked for a file that is not there: say so beside the figures
        published["note"] = f"{path}: no cancel benchmark results there"
    return published


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
