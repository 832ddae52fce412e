"""The Markdown tables of docs/benchmarks.md, made from the benchmarks' JSON documents, so a
run of ``concierge bench all`` can be pasted there as it is (the same columns, the same
rounding). Pure functions of the documents: tested without a model or a broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TIMES = "\u00d7"  # the multiplication sign of the docs' ratios ("146\u00d7")
MIB = 1024 * 1024
GIB = 1024 * MIB


def _s(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pair(stats: dict[str, Any] | None, digits: int = 3) -> str:
    """'median / p95' of a stats object."""
    if stats is None:
        return "-"
    return f"{_s(stats['median'], digits)} / {_s(stats['p95'], digits)}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]], left: int = 0) -> list[str]:
    """A Markdown table, its first ``left`` columns aligned left, the others right."""
    rule = [("---" if index < left else "---:") for index in range(len(header))]
    return [_row(header), "|" + "|".join(rule) + "|", *(_row(row) for row in rows)]


def machine_line(machine: dict[str, Any], environment: dict[str, Any]) -> str:
    """One line: what ran, on what, how loaded the machine was before and after."""

    def load(values: list[float] | None) -> str:
        return "unknown" if not values else " ".join(f"{value:.2f}" for value in values)

    memory = machine.get("memory_bytes")
    size = f", {memory / GIB:.1f} GiB" if memory else ""
    return (
        f"Machine: {machine['cpu_model']}, {machine['cores']} cores "
        f"({machine['usable_cores']} usable){size}, {machine['system']}; load average "
        f"(1, 5, 15 min) {load(machine['load_average_before'])} before, "
        f"{load(machine['load_average_after'])} after. {environment['model']}, "
        f"{environment['threads']} llama.cpp thread{'' if environment['threads'] == 1 else 's'}, "
        f"llama-cpp-python "
        f"{environment['llama_cpp_python']}, Python {environment['python']}."
    )


def cancel_section(doc: dict[str, Any]) -> list[str]:
    config = doc["config"]
    rows: dict[tuple[str, int], dict[str, Any]] = {
        (row["mode"], row["depth"]): row for row in doc["summary"]
    }
    header = ["Depth", "A: request queue, stop s", "A: cancel seen s", "A: tokens after",
              "B: cancel queue, stop s", "B: cancel seen s", "B: tokens after",
              "A / B (medians)"]  # fmt: skip
    table = []
    for depth in config["depths"]:
        fifo, own = rows[("fifo", depth)], rows[("cancel_queue", depth)]
        a, b = fifo["stop_s"]["median"], own["stop_s"]["median"]
        ratio = f"{a / b:.0f}{TIMES}" if a is not None and b else "-"
        a_cells = [_pair(fifo["stop_s"]), _pair(fifo["cancel_seen_s"])]
        b_cells = [_pair(own["stop_s"]), _pair(own["cancel_seen_s"])]
        tokens = [_pair(fifo["tokens_after_cancel"], 0), _pair(own["tokens_after_cancel"], 0)]
        table.append([str(depth), *a_cells, tokens[0], *b_cells, tokens[1], ratio])
    title = f"Cancel during {config['phase']} ({config['repeat']} runs per cell, median / p95)"
    return [f"### {title}", "", *_table(header, table)]


def stream_section(doc: dict[str, Any]) -> list[str]:
    summary = doc["summary"]
    header = ["Path", "Tokens/s", "Time to first token s"]
    rows = [
        ["llama.cpp in process", _pair(summary["in_process"]["tokens_per_s"], 1),
         _pair(summary["in_process"]["ttft_s"])],
        ["pipeline, at the client", _pair(summary["pipeline"]["tokens_per_s"], 1),
         _pair(summary["pipeline"]["ttft_s"])],
        ["pipeline, engine-side (`Done.tokens_per_s`)",
         _pair(summary["engine_tokens_per_s"], 1), ""],
    ]  # fmt: skip
    ratio, latency = summary["ratio"], summary["token_latency_s"]
    met = "met" if summary["meets_target"] else "NOT met"
    added, outside = summary["added_ttft_s"]["median"], summary["ttft_outside_model_s"]["median"]
    notes = [
        f"- Ratio, pipeline ÷ in process: {_s(ratio['median'])} median ({_s(ratio['min'])} "
        f"the lowest pair); the {doc['config']['target_ratio']} target is {met}.",
        f"- Time to first token added: {_s(None if added is None else added * 1000, 0)} ms "
        "(median, against the run in process); outside the model in the same run: "
        f"{_s(None if outside is None else outside * 1000, 1)} ms (median). "
        f"Latency per token, model to client ms: {_ms(latency)} "
        "(median / p95 / max).",
        f"- {summary['same_text']} of {summary['pairs']} pairs produced the same text.",
    ]
    title = f"Streaming ({summary['pairs']} interleaved pairs, median / p95)"
    return [f"### {title}", "", *_table(header, rows, left=1), "", *notes]


def _ms(stats: dict[str, Any]) -> str:
    return " / ".join(
        _s(None if stats[key] is None else stats[key] * 1000, 0) for key in ("median", "p95", "max")
    )


def queue_section(doc: dict[str, Any]) -> list[str]:
    requests, cancels, memory = doc["requests"], doc["cancelled_sessions"], doc["memory"]
    count = doc["config"]["requests"]
    outcomes = ", ".join(f"{n} {kind}" for kind, n in sorted(requests["outcomes"].items()))
    waited = requests["waited_s"]
    rss = " / ".join(
        f"{memory[key] / MIB:.1f}"
        for key in ("rss_before_bytes", "rss_after_requests_bytes", "rss_after_cancels_bytes")
    )
    rows = [
        [f"{count} requests queued at once, each its own asker",
         f"{outcomes or 'none'}, **{requests['lost']} lost**"],
        ["held in the queue at once", f"{requests['depth']} of {count}"],
        ["served in queue order", "yes" if requests["in_order"] else "**no**"],
        ["sessions whose events have no gap", f"{requests['sessions_without_gaps']} of {count}"],
        ["waited before the engine took it s (median / p95 / max)",
         f"{_pair(waited, 1)} / {_s(waited['max'], 1)}"],
        [f"all {count} answered in", f"{_s(requests['total_s'], 1)} s"],
        ["engine RSS MiB: before / after the requests / after the cancels", rss],
        [f"`cancelled_sessions` after {cancels['published']:,} cancels through the broker",
         f"{cancels['size_after_published']:,} (bound {cancels['max_size']:,}); "
         f"{_s(cancels['published_per_s'], 0)} cancels/s taken"],
        [f"`cancelled_sessions` after {cancels['added']:,} more added",
         f"{cancels['size_after_added']:,} (bound {cancels['max_size']:,})"],
    ]  # fmt: skip
    return ["### Queue (one run)", "", *_table(["Measure", "Value"], rows, left=1)]


def conversation_section(doc: dict[str, Any]) -> list[str]:
    summary = doc["summary"]
    header = ["Turn", "History turns", "Prompt tokens", "Of them in the saved state",
              "With the cache s", "Without s", "Without ÷ with"]  # fmt: skip
    rows = []
    for row in summary["by_turn"]:
        ratio = row["without_over_with"]
        rows.append([
            str(row["turn"]), str(row["history_used"]), f"{row['prompt_tokens']:.0f}",
            f"{row['saved_prefix_tokens']:.0f}", _s(row["cached"]["median"], 2),
            _s(row["uncached"]["median"], 2), "-" if ratio is None else f"{ratio:.1f}{TIMES}",
        ])  # fmt: skip
    ratios = summary["last_over_first"]
    met = "met" if summary["meets_target"] else "NOT met"
    note = (
        f"- With the cache, the last turn's time to first token is "
        f"{_s(ratios['cached'], 2)}{TIMES} the first's "
        f"(goal ≤ {doc['config']['target_ratio']}: {met}); "
        f"without it, {_s(ratios['uncached'], 2)}{TIMES}."
    )
    runs = summary["runs"]
    title = f"Conversation ({runs} run{'s' if runs != 1 else ''}, medians)"
    return [f"### {title}", "", *_table(header, rows), "", note]


SECTIONS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "cancel": cancel_section,
    "stream": stream_section,
    "queue": queue_section,
    "conversation": conversation_section,
}


def render(doc: dict[str, Any]) -> str:
    """The whole of ``bench all``'s document as Markdown: the machine, then each benchmark's
    table, or why it has none."""
    lines = [
        f"## concierge bench all, {doc['started_at']} ({doc['duration_s']:.0f} s in all)",
        "",
        machine_line(doc["machine"], doc["environment"]),
    ]
    for name, bench in doc["benchmarks"].items():
        lines.append("")
        if name in doc["failed"]:
            lines.append(f"### {name}: no figures")
            lines += ["", f"**{doc['failed'][name]}**"]
            continue
        lines += SECTIONS[name](bench)
        lines += ["", f"({bench['duration_s']:.0f} s, started {bench['started_at']})"]
    return "\n".join(lines) + "\n"
