"""Smoke tests of ``concierge bench``: tiny runs against the real broker and model.

Benchmarks are not timed tests: these check the document's shape and invariants that hold on
any machine (nothing lost, the order kept, the bound on ``cancelled_sessions`` respected, the
cancel queue never letting an answer finish), never a speed.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

import aiormq
import pytest
from rich.console import Console

from broker.amqp import Broker
from cli.benchmarks import report
from cli.benchmarks.cancel import CANCEL_QUEUE, FIFO, CancelConfig, run_cancel
from cli.benchmarks.command import add_bench_parser, bench_command, save_results
from cli.benchmarks.queue import QueueConfig, run_queue
from cli.benchmarks.rig import SCHEMA_VERSION, BenchBackend, summarize
from cli.benchmarks.stream import IN_PROCESS, PIPELINE, StreamConfig, run_stream
from cli.console.results import cancel_results
from config.settings import Settings, load_settings
from engine.backends.base import Backend

STATS_KEYS = {"median", "p95", "min", "max", "n"}


def _quiet(_line: str) -> None:
    pass


@pytest.fixture
def bench_backend(backend: Backend) -> BenchBackend:
    return BenchBackend(backend, filler_max_tokens=1, cold=True)


def _check_envelope(doc: dict[str, Any], benchmark: str) -> None:
    assert doc["benchmark"] == benchmark
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["environment"]["model"].endswith(".gguf")
    assert doc["duration_s"] > 0
    assert json.loads(json.dumps(doc)) == doc  # one plain JSON document
    text = io.StringIO()
    report.print_report(doc, Console(file=text, width=160))
    assert text.getvalue().strip()


async def _check_topology_deleted(settings: Settings, prefix: str) -> None:
    async with Broker(settings.model_copy(update={"prefix": "bench-probe"})) as broker:
        channel = await broker.connection.channel()
        with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
            await channel.declare_queue(f"{prefix}.request", passive=True)
        await broker.delete_all()


def test_summarize_takes_the_median_and_the_nearest_rank_p95() -> None:
    assert summarize([3.0, 1.0, None, 2.0]) == {
        "median": 2.0,
        "p95": 3.0,
        "min": 1.0,
        "max": 3.0,
        "n": 3,
    }
    assert summarize([None])["median"] is None


def test_the_parser_takes_every_benchmark_and_its_options() -> None:
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "cancel", "--depths", "0,5", "--repeat", "2", "--json"])
    assert (args.benchmark, args.depths, args.repeat, args.json) == ("cancel", (0, 5), 2, True)
    args = parser.parse_args(["bench", "cancel", "--phase", "prefill", "--plot", "x.png"])
    assert args.phase == "prefill" and args.plot == Path("x.png")
    assert parser.parse_args(["bench", "stream", "--max-tokens", "9"]).max_tokens == 9
    assert parser.parse_args(["bench", "queue", "-n", "7"]).requests == 7
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "cancel", "--depths", "a,b"])


@pytest.mark.broker  # the bench rig connects on a prefix of its own
async def test_bench_cancel_in_decode(bench_backend: BenchBackend, tmp_path: Path) -> None:
    settings = load_settings()
    config = CancelConfig(
        depths=(0, 2), repeat=1, max_tokens=64, tokens_before_cancel=2, filler_max_tokens=1
    )
    doc = await run_cancel(settings, bench_backend, config, _quiet)
    _check_envelope(doc, "cancel")
    assert len(doc["runs"]) == 4
    assert {(row["mode"], row["depth"]) for row in doc["summary"]} == {
        (mode, depth) for mode in (FIFO, CANCEL_QUEUE) for depth in (0, 2)
    }
    for row in doc["summary"]:
        assert row["runs"] == 1 and set(row["stop_s"]) == STATS_KEYS
    for run in doc["runs"]:
        assert run["stop_s"] >= 0 and run["cancel_seen_s"] is not None
        assert sum(run["fillers"].values()) == run["depth"]
        if run["mode"] == CANCEL_QUEUE:  # the design: stopped, never run to its end
            assert run["outcome"] == "cancelled" and not run["finished_before_seen"]
        elif run["depth"] > 0:  # the trap: seen only after every request queued before it
            assert run["cancel_seen_s"] >= run["stop_s"]
            assert run["fillers"] == {"done": run["depth"]}
    report.plot(doc, tmp_path / "cancel.png")
    assert (tmp_path / "cancel.png").stat().st_size > 0
    await _check_topology_deleted(settings, doc["broker_prefix"])


@pytest.mark.broker  # the bench rig connects on a prefix of its own
async def test_bench_cancel_in_prefill(bench_backend: BenchBackend) -> None:
    config = CancelConfig(
        phase="prefill", depths=(0,), repeat=1, max_tokens=2, prompt_tokens=150,
        cancel_after_s=0.02,
    )  # fmt: skip
    doc = await run_cancel(load_settings(), bench_backend, config, _quiet)
    _check_envelope(doc, "cancel")
    baseline = doc["prefill_baseline"]
    assert baseline["prompt_tokens"] >= 150
    assert baseline["full_prefill_s"]["median"] > 0
    for run in doc["runs"]:
        assert run["missed"] is None  # each prompt new to every cache: read from its start
        if run["mode"] == FIFO:
            assert run["outcome"] == "done"  # a prompt is read to its end before it is reached
        elif run["in_prefill_at_cancel"]:
            # "in prefill" means no token had reached the client when the cancel was published;
            # the prompt may end while the cancel is in flight (a few ms), so the model can
            # yield one token before the engine sees it, never a stream of them.
            assert run["outcome"] == "cancelled" and run["tokens_after_cancel"] <= 1


@pytest.mark.broker  # the bench rig connects on a prefix of its own
async def test_bench_stream(bench_backend: BenchBackend) -> None:
    config = StreamConfig(repeat=1, max_tokens=4, prompts=2)
    doc = await run_stream(load_settings(), bench_backend, config, _quiet)
    _check_envelope(doc, "stream")
    assert len(doc["runs"]) == 2
    assert {doc["runs"][0]["first"], doc["runs"][1]["first"]} == {IN_PROCESS, PIPELINE}
    for pair in doc["runs"]:
        assert pair[IN_PROCESS]["tokens"] == pair[PIPELINE]["tokens"] > 1
        assert pair["ratio"] > 0
        assert pair[PIPELINE]["token_latency_s"]["min"] >= 0  # a token arrives after it is made
        assert 0 < pair[PIPELINE]["ttft_outside_model_s"] < pair[PIPELINE]["ttft_s"]
    assert doc["invalid_runs"] == {} and [pair["missed"] for pair in doc["runs"]] == [None] * 2
    summary = doc["summary"]
    assert summary["same_text"] == 2  # temperature 0, cold cache: the same answer both ways
    assert summary["token_latency_s"]["n"] == sum(p[PIPELINE]["tokens"] for p in doc["runs"])
    assert isinstance(summary["meets_target"], bool)


@pytest.mark.broker  # the bench rig connects on a prefix of its own
async def test_bench_queue(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.worker.CANCELLED_SESSIONS_MAX", 100)
    settings = load_settings()
    config = QueueConfig(requests=5, max_tokens=2, bots=2, cancels_published=40, cancels_added=500)
    doc = await run_queue(settings, BenchBackend(backend, cold=False), config, _quiet)
    _check_envelope(doc, "queue")
    requests = doc["requests"]
    assert requests["depth"] == 5 and doc["invalid_runs"] == {}  # all five queued at once
    assert requests["lost"] == 0 and requests["in_order"]
    assert requests["answered_or_expired"] == 5 == requests["sessions_without_gaps"]
    assert requests["waited_s"]["n"] == 5 and requests["waited_s"]["min"] >= 0
    cancels = doc["cancelled_sessions"]
    assert cancels["size_after_published"] == 40
    assert cancels["size_after_added"] == cancels["max_size"] == 100
    assert doc["memory"]["rss_after_cancels_bytes"] > 0


@pytest.mark.broker  # the bench rig connects on a prefix of its own
@pytest.mark.model  # and loads the model itself
async def test_bench_command_prints_one_json_document_and_draws(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    plot = tmp_path / "queue.png"
    args = parser.parse_args(
        ["bench", "queue", "-n", "2", "--max-tokens", "2", "--bots", "1",
         "--cancels-published", "5", "--cancels-added", "10", "--json", "--plot", str(plot)]
    )  # fmt: skip
    assert await bench_command(args, load_settings()) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["benchmark"] == "queue" and doc["requests"]["lost"] == 0
    assert plot.stat().st_size > 0


@pytest.mark.broker  # the bench rig connects on a prefix of its own
@pytest.mark.model  # and loads the model itself
async def test_bench_cancel_saves_its_document_where_the_console_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_settings(kb_path=tmp_path / "data" / "kb.sqlite3")  # data/: not made yet
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["bench", "cancel", "--depths", "0", "--repeat", "1", "--max-tokens", "16",
         "--tokens-before-cancel", "2", "--filler-tokens", "1", "--json"]
    )  # fmt: skip
    assert await bench_command(args, settings) == 0
    printed, err = capsys.readouterr()
    saved = tmp_path / "data" / "bench-cancel.json"
    doc = json.loads(printed)  # stdout is still one JSON document: the line goes to stderr
    assert json.loads(saved.read_text(encoding="utf-8")) == doc
    assert f"results saved to {saved}\n" in err
    chart = cancel_results(settings=settings)
    assert (chart["file"], chart["made_at"]) == (str(saved), doc["started_at"])
    assert {row["mode"] for row in chart["rows"]} == {FIFO, CANCEL_QUEUE}
    assert "note" not in chart


@pytest.mark.broker  # the bench rig connects on a prefix of its own
@pytest.mark.model  # and loads the model itself
async def test_runs_that_missed_their_precondition_give_no_figure_and_say_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cancel after 50 tokens of a 2-token answer: every cancel comes after the answer ended,
    so the stop it would report (0 s) measures nothing."""
    settings = load_settings(kb_path=tmp_path / "kb.sqlite3")
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["bench", "cancel", "--depths", "0", "--repeat", "1", "--max-tokens", "2",
         "--tokens-before-cancel", "50", "--json"]
    )  # fmt: skip

    assert await bench_command(args, settings) == 1

    printed, err = capsys.readouterr()
    doc = json.loads(printed)
    assert doc["summary"] == []
    assert doc["invalid_runs"] == {"the answer had ended before the cancel was sent": 2}
    assert "\nno figures: 2 of 2 runs missed their precondition: the answer had ended" in err
    assert "invalid: the answer had ended before the cancel was sent" in err
    assert "stop 0.000" not in err
    assert not (tmp_path / "bench-cancel.json").exists()  # the console's chart keeps its figures


def test_a_failed_save_is_one_line_and_keeps_the_previous_file_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    assert not save_results({"benchmark": "cancel"}, blocker / "bench-cancel.json")
    err = capsys.readouterr().err
    saved, reason = blocker / "bench-cancel.json", f"cannot make the directory {blocker}"
    assert err == f"results not saved to {saved}: {reason} (File exists)\n"
    path = tmp_path / "bench-cancel.json"
    report.save({"benchmark": "cancel", "n": 1}, path)
    with pytest.raises(TypeError):  # fails after the new file was opened
        report.save({"benchmark": "cancel", "n": object()}, path)
    assert json.loads(path.read_text(encoding="utf-8")) == {"benchmark": "cancel", "n": 1}
    assert sorted(child.name for child in tmp_path.iterdir()) == [path.name, blocker.name]


def test_plot_without_matplotlib_fails_at_once_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main
    from config.errors import EXIT_CONFIG

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    assert main(["bench", "stream", "--plot", str(tmp_path / "stream.png")]) == EXIT_CONFIG
    assert "concierge[plot]" in capsys.readouterr().err
    assert not (tmp_path / "stream.png").exists()
