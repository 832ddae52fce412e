"""``concierge bench all`` without running a benchmark: the machine it reports, the Markdown
made from given documents, and a benchmark that gave no figure failing the command by name.

The four benchmarks themselves are tried, small, in tests/test_benchmarks.py and
tests/test_bench_preconditions.py; nothing here loads the model or reaches the broker.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from cli.benchmarks import markdown, suite
from cli.benchmarks.cancel import summarize_runs
from cli.benchmarks.command import add_bench_parser, bench_command
from cli.benchmarks.conversation import summarize_turns
from cli.benchmarks.rig import SCHEMA_VERSION, summarize
from cli.benchmarks.stream import summarize_pairs
from cli.benchmarks.validity import refusal
from config.settings import load_settings

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
processor\t: 1
model name\t: AMD EPYC 7B13
"""


def _envelope(benchmark: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "schema_version": SCHEMA_VERSION,
        "started_at": "2026-12-02T10:00:00Z",
        "environment": {"model": "m.gguf", "threads": 2, "load_average_1m": 0.5},
        "config": config,
        "duration_s": 12.0,
        "invalid_runs": {},
    }


def cancel_doc() -> dict[str, Any]:
    runs = [
        {"mode": mode, "depth": depth, "missed": None, "stop_s": stop, "cancel_seen_s": stop,
         "tokens_after_cancel": 150 if mode == "fifo" else 0, "finished_before_seen": False}
        for depth in (0, 5) for mode, stop in (("fifo", 1.0), ("cancel_queue", 0.01))
    ]  # fmt: skip
    doc = _envelope("cancel", {"phase": "decode", "depths": [0, 5], "repeat": 1})
    return {**doc, "runs": runs, "summary": summarize_runs(runs, (0, 5))}


def stream_doc() -> dict[str, Any]:
    side = {"tokens": 128, "ttft_s": 0.1, "tokens_per_s": 80.0}
    pipeline = {
        **side, "engine_tokens_per_s": 79.0, "token_latency_s": [0.02, 0.03],
        "ttft_outside_model_s": 0.004,
    }  # fmt: skip
    pairs = [{"in_process": side, "pipeline": pipeline, "ratio": 1.0, "same_text": True}]
    doc = _envelope("stream", {"target_ratio": 0.97})
    return {**doc, "runs": pairs, "summary": summarize_pairs(pairs)}


def queue_doc() -> dict[str, Any]:
    doc = _envelope("queue", {"requests": 200})
    doc["requests"] = {
        "outcomes": {"done": 200}, "lost": 0, "depth": 200, "in_order": True,
        "sessions_without_gaps": 200, "waited_s": summarize([1.0, 2.0]), "total_s": 27.7,
        "missed": None,
    }  # fmt: skip
    doc["cancelled_sessions"] = {
        "published": 5000, "max_size": 10000, "size_after_published": 5000,
        "published_per_s": 4000.0, "added": 100000, "size_after_added": 10000,
    }  # fmt: skip
    doc["memory"] = {key: 256 * 1024 * 1024 for key in (
        "rss_before_bytes", "rss_after_requests_bytes", "rss_after_cancels_bytes")}  # fmt: skip
    return doc


def conversation_doc() -> dict[str, Any]:
    def side(ttft: float, turn: int) -> dict[str, Any]:
        return {"ttft_s": ttft, "history_used": 2 * (turn - 1), "prompt_tokens": 400 + turn,
                "saved_prefix_tokens": 0}  # fmt: skip

    turns = [
        {"turn": turn, "cached": side(2.0, turn), "uncached": side(2.0 * turn, turn),
         "cache": {"bytes": 1000}, "missed": None}
        for turn in (1, 2)
    ]  # fmt: skip
    doc = _envelope("conversation", {"target_ratio": 1.5})
    return {**doc, "turns": turns, "summary": summarize_turns(turns)}


def all_docs() -> dict[str, dict[str, Any]]:
    return {
        "cancel": cancel_doc(),
        "stream": stream_doc(),
        "queue": queue_doc(),
        "conversation": conversation_doc(),
    }


def test_the_cpu_is_named_from_cpuinfo_and_the_machine_says_its_load() -> None:
    assert suite.cpu_model(CPUINFO) == "AMD EPYC 7B13"
    assert suite.cpu_model("Hardware\t: BCM2835\n") == "BCM2835"
    assert suite.cpu_model("")  # whatever Python knows, never empty
    machine = suite.machine_info([0.5, 0.4, 0.3], [2.0, 1.0, 0.5])
    assert machine["cores"] >= machine["usable_cores"] >= 1
    assert (machine["load_average_before"], machine["load_average_after"]) == (
        [0.5, 0.4, 0.3],
        [2.0, 1.0, 0.5],
    )
    assert machine["cpu_model"] and machine["system"]
    load = suite.load_average()
    assert load is not None and len(load) == 3


def test_the_markdown_has_the_machine_and_every_table_of_docs_benchmarks() -> None:
    settings = load_settings()
    machine = suite.machine_info([0.5, 0.4, 0.3], [2.0, 1.0, 0.5])
    doc = suite.suite_document(settings, 0.0, machine, all_docs())
    assert doc["benchmark"] == "all" and doc["schema_version"] == SCHEMA_VERSION
    assert doc["failed"] == {}
    assert json.loads(json.dumps(doc)) == doc  # one plain JSON document
    text = doc["markdown"]
    assert f"Machine: {machine['cpu_model']}, {machine['cores']} cores" in text
    assert "0.50 0.40 0.30 before, 2.00 1.00 0.50 after" in text
    assert "| 5 | 1.000 / 1.000 | 1.000 / 1.000 | 150 / 150 | 0.010 / 0.010 |" in text
    assert f"100{markdown.TIMES}" in text  # A / B, the medians
    assert "| llama.cpp in process | 80.0 / 80.0 | 0.100 / 0.100 |" in text
    assert "| held in the queue at once | 200 of 200 |" in text
    assert f"| 2 | 2 | 402 | 0 | 2.00 | 4.00 | 2.0{markdown.TIMES} |" in text
    for line in text.splitlines():  # every table row has its header's columns
        if line.startswith("|"):
            assert line.endswith("|")


def test_a_benchmark_without_figures_is_named_and_shows_no_table() -> None:
    docs = all_docs()
    docs["stream"]["invalid_runs"] = {"fewer than two tokens on both sides: no rate": 1}
    docs["stream"]["summary"] = None
    docs["queue"] = {"benchmark": "queue", "error": "BenchError: an answer was lost"}
    failed = suite.failures(docs)
    assert failed == {
        "stream": refusal(docs["stream"]),
        "queue": "failed: BenchError: an answer was lost",
    }
    assert failed["stream"].startswith("no figures: 1 of 1 runs missed their precondition")
    doc = suite.suite_document(load_settings(), 0.0, suite.machine_info(None, None), docs)
    text = doc["markdown"]
    assert "### stream: no figures" in text and "Tokens/s" not in text
    assert "### queue: no figures" in text and "**failed: BenchError" in text
    assert "### Cancel during decode" in text and "### Conversation (1 run, medians)" in text
    assert "load average (1, 5, 15 min) unknown before" in text


async def test_bench_all_exits_1_naming_the_benchmark_that_missed_its_precondition(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's own path, with canned documents for the four: no model, no broker."""
    docs = all_docs()
    docs["conversation"]["invalid_runs"] = {"with the cache, no saved state was loaded": 2}
    docs["conversation"]["summary"] = None

    async def no_model(*_args: Any, **_kwargs: Any) -> Any:
        return argparse.Namespace(inner=None)

    def canned(*_args: Any) -> dict[str, suite.Runner]:
        async def give(name: str) -> dict[str, Any]:
            return docs[name]

        return {name: (lambda name=name: give(name)) for name in suite.ORDER}

    monkeypatch.setattr("cli.benchmarks.running.load_bench_backend", no_model)
    monkeypatch.setattr(suite, "runners", canned)
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "all.json"
    args = parser.parse_args(["bench", "all", "--json", "--out", str(out)])

    assert await bench_command(args, load_settings()) == 1

    printed, err = capsys.readouterr()
    doc = json.loads(printed)
    assert json.loads(out.read_text(encoding="utf-8")) == doc
    assert list(doc["benchmarks"]) == list(suite.ORDER)
    assert list(doc["failed"]) == ["conversation"]
    assert "bench conversation: no figures: 2 of 2 runs missed their precondition" in err
    assert "### conversation: no figures" in doc["markdown"]


def test_the_suites_settings_are_the_documented_ones() -> None:
    configs = suite.suite_configs()
    assert list(configs) == list(suite.ORDER)
    assert configs["conversation"].repeat == 1 and configs["cancel"].phase == "decode"
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "all", "--threads", "2"])
    assert (args.benchmark, args.threads, args.json, args.out) == ("all", 2, False, None)
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "all", "--threads", "0"])
    assert markdown.SECTIONS.keys() == set(suite.ORDER)
