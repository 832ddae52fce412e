"""The console's chart data: the results ``concierge bench cancel`` saved come first, and a
file that is missing or not cancel results is passed over with a note. (A real benchmark run
saving its file is in tests/test_benchmarks.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cli.benchmarks import report
from cli.benchmarks.cancel import results_path
from cli.console.results import cancel_results
from config.settings import Settings, load_settings

STATS = {"median": 0.5, "p95": 0.6, "min": 0.4, "max": 0.6, "n": 2}


def _doc(depth: int, started_at: str = "2026-12-01T10:00:00Z") -> dict[str, Any]:
    """A cancel benchmark's document, as the benchmark writes it (one row is enough)."""
    row = {"runs": 2, "stop_s": STATS, "tokens_after_cancel": STATS, "cancel_seen_s": STATS}
    return {
        "benchmark": "cancel",
        "started_at": started_at,
        "environment": {"model": "tiny.gguf"},
        "config": {"phase": "decode"},
        "summary": [{"mode": "fifo", "depth": depth, **row}],
    }


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The knowledge base in data/, the console's working directory in work/."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return load_settings(kb_path=tmp_path / "data" / "kb.sqlite3")


def test_the_saved_results_come_first_and_say_which_file_and_when(
    settings: Settings, tmp_path: Path
) -> None:
    saved = results_path(settings)
    assert saved == tmp_path / "data" / "bench-cancel.json"
    assert results_path(settings, "prefill").name == "bench-cancel-prefill.json"
    report.save(_doc(depth=5), saved)
    (tmp_path / "work" / "cancel.json").write_text(json.dumps(_doc(depth=1)))
    chart = cancel_results(settings=settings)
    assert [row["depth"] for row in chart["rows"]] == [5]
    assert (chart["file"], chart["made_at"]) == (str(saved), "2026-12-01T10:00:00Z")
    assert chart["source"] == f"{saved}, run 2026-12-01T10:00:00Z"
    assert chart["model"] == "tiny.gguf" and "note" not in chart
    asked = tmp_path / "asked.json"  # a file the console is given outranks the saved one
    asked.write_text(json.dumps(_doc(depth=50)))
    assert cancel_results(asked, settings=settings)["rows"][0]["depth"] == 50


def test_a_missing_saved_file_falls_back_to_cancel_json_then_the_published_figures(
    settings: Settings, tmp_path: Path
) -> None:
    saved = results_path(settings)
    published = cancel_results(settings=settings)
    assert published["file"] is None and "docs/benchmarks.md" in published["source"]
    assert published["note"] == f"{saved}: no results there yet"
    assert published["made_at"] == published["started_at"]
    (tmp_path / "work" / "cancel.json").write_text(json.dumps(_doc(depth=1)))
    chart = cancel_results(settings=settings)
    assert chart["file"] == "cancel.json" and chart["rows"][0]["depth"] == 1
    assert chart["note"] == f"{saved}: no results there yet"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"benchmark": "cancel", "summ', "not JSON"),
        (json.dumps({"benchmark": "stream", "summary": {}}), "not a bench cancel document"),
        (json.dumps({**_doc(0), "summary": [{"runs": 2}]}), "its summary is not the"),
        (json.dumps({**_doc(0), "summary": []}), "no runs in it"),
    ],
)
def test_a_corrupt_saved_file_is_passed_over_with_a_note(
    settings: Settings, tmp_path: Path, content: str, reason: str
) -> None:
    saved = results_path(settings)
    saved.parent.mkdir()
    saved.write_text(content)
    chart = cancel_results(settings=settings)
    assert "docs/benchmarks.md" in chart["source"]
    assert chart["note"].startswith(f"{saved}: not read ({reason}")


def test_a_document_without_its_start_time_is_dated_by_the_file(
    settings: Settings, tmp_path: Path
) -> None:
    doc = _doc(depth=0)
    del doc["started_at"]
    saved = results_path(settings)
    report.save(doc, saved)
    os.utime(saved, (1_780_000_000, 1_780_000_000))
    chart = cancel_results(settings=settings)
    assert chart["made_at"] == "2026-05-28T20:26:40Z"
    assert chart["source"] == f"{saved}, run 2026-05-28T20:26:40Z"
