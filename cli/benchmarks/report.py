"""Showing a benchmark's document: a rich table, the JSON itself, or a chart (matplotlib);
and keeping it in a file."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

MODE_LABELS = {
    "fifo": "A: in the request queue (FIFO trap)",
    "cancel_queue": "B: on the cancel queue",
}


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2)


def save(doc: dict[str, Any], path: Path) -> None:
    """Write the document to ``path`` whole or not at all (a new file beside it, then
    ``os.replace``): the console never reads half a file, and a failed write leaves the
    previous results in place. Raises ``OSError``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    # "x": a new file or an error (never another's), with the user's usual permissions
    file = partial.open("x", encoding="utf-8")
    try:
        with file:
            file.write(to_json(doc) + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _s(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pair(stats: dict[str, Any], digits: int = 3) -> str:
    """'median / p95' of a summary."""
    return f"{_s(stats['median'], digits)} / {_s(stats['p95'], digits)}"


def print_report(doc: dict[str, Any], console: Console) -> None:
    tables = {
        "cancel": cancel_tables,
        "stream": stream_tables,
        "queue": queue_tables,
        "conversation": conversation_tables,
    }
    for table in tables[doc["benchmark"]](doc):
        console.print(table)
    env = doc["environment"]
    console.print(
        f"{env['model']}, {env['threads']} thread(s), load {_s(env['load_average_1m'], 2)} "
        f"at start; {doc['duration_s']:.0f} s in all"
    )


def cancel_tables(doc: dict[str, Any]) -> list[Table]:
    phase = doc["config"]["phase"]
    table = Table(title=f"Cancel while the answer is in {phase} (median / p95 over runs)")
    for column in ("Mode", "Depth", "Runs", "Stop s", "Tokens after", "Cancel seen s"):
        table.add_column(column, justify="left" if column == "Mode" else "right")
    table.add_column("Finished before seen", justify="right")
    for row in doc["summary"]:
        table.add_row(
            MODE_LABELS[row["mode"]],
            str(row["depth"]),
            str(row["runs"]),
            _pair(row["stop_s"]),
            _pair(row["tokens_after_cancel"], 0),
            _pair(row["cancel_seen_s"]),
            f"{row['finished_before_seen']} of {row['runs']}",
        )
    tables = [table, _ratio_table(doc)]
    baseline = doc.get("prefill_baseline")
    if baseline is not None:
        extra = Table(title="The long prompt without a cancel")
        extra.add_column("Prompt tokens", justify="right")
        extra.add_column("Full processing s (median / p95)", justify="right")
        extra.add_row(str(baseline["prompt_tokens"]), _pair(baseline["full_prefill_s"]))
        tables.append(extra)
    if "server_after_stop" in doc:
        tables.append(_after_stop_table(doc["server_after_stop"]))
    return tables


def _after_stop_table(after: dict[str, Any]) -> Table:
    """``--backend openai``: the stop on the backend itself, and the server's work after it."""
    table = Table(title="The model server after a stop (median / p95 over runs)")
    for column in ("Phase", "Runs", "Stop s", "Server busy after s", "Slot free after s"):
        table.add_column(column, justify="left" if column == "Phase" else "right")
    for phase in ("decode", "prefill"):
        if phase in after:
            row = after[phase]
            table.add_row(
                phase,
                str(len(row["runs"])),
                _pair(row["stop_s"]),
                _pair(row["busy_after_stop_s"], 2),
                _pair(row["slot_free_after_s"], 2),
            )
    return table


def stop_ratios(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per depth: median stop time in the request queue over median stop on the cancel queue."""
    medians = {(row["mode"], row["depth"]): row["stop_s"]["median"] for row in doc["summary"]}
    ratios = []
    for depth in doc["config"]["depths"]:
        fifo, own = medians.get(("fifo", depth)), medians.get(("cancel_queue", depth))
        ratio = fifo / own if fifo is not None and own else None
        ratios.append({"depth": depth, "fifo_s": fifo, "cancel_queue_s": own, "ratio": ratio})
    return ratios


def _ratio_table(doc: dict[str, Any]) -> Table:
    table = Table(title="Side by side: median stop time, A over B")
    for column in ("Depth", "A s", "B s", "A / B"):
        table.add_column(column, justify="right")
    for row in stop_ratios(doc):
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.0f}x"
        table.add_row(str(row["depth"]), _s(row["fifo_s"]), _s(row["cancel_queue_s"]), ratio)
    return table


def stream_tables(doc: dict[str, Any]) -> list[Table]:
    summary = doc["summary"]
    table = Table(title=f"Streaming, {summary['pairs']} interleaved pairs (median / p95)")
    for column in ("Path", "Tokens/s", "Time to first token s"):
        table.add_column(column, justify="left" if column == "Path" else "right")
    direct = doc["config"].get("direct", "llama.cpp in process")
    table.add_row(direct, *_path_row(summary["in_process"]))
    table.add_row("pipeline, at the client", *_path_row(summary["pipeline"]))
    table.add_row("pipeline, engine-side", _pair(summary["engine_tokens_per_s"], 1), "")
    ratio = summary["ratio"]
    facts = Table(title="What the pipeline costs")
    facts.add_column("Measure")
    facts.add_column("Value", justify="right")
    target = doc["config"]["target_ratio"]
    met = "met" if summary["meets_target"] else "NOT met"
    facts.add_row(
        f"tokens/s ratio, pipeline / {direct} (median, min)",
        f"{_s(ratio['median'])}, {_s(ratio['min'])}  (target >= {target}: {met})",
    )
    facts.add_row("added time to first token s (median / p95)", _pair(summary["added_ttft_s"]))
    facts.add_row(
        "first token's time outside the model s (median / p95)",
        _pair(summary["ttft_outside_model_s"]),
    )
    latency = summary["token_latency_s"]
    facts.add_row(
        "latency per token, model to client ms (median / p95 / max)",
        f"{_s(_ms(latency['median']), 2)} / {_s(_ms(latency['p95']), 2)} / "
        f"{_s(_ms(latency['max']), 2)}",
    )
    facts.add_row("same text both ways", f"{summary['same_text']} of {summary['pairs']}")
    if (cpu := doc.get("client_cpu_s_per_token")) is not None:
        facts.add_row(
            "client CPU per token ms, backend / plain client (median)",
            f"{_s(_ms(cpu['backend']['median']), 2)} / {_s(_ms(cpu['plain']['median']), 2)}",
        )
    return [table, facts]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _path_row(path: dict[str, Any]) -> tuple[str, str]:
    return _pair(path["tokens_per_s"], 1), _pair(path["ttft_s"])


def queue_tables(doc: dict[str, Any]) -> list[Table]:
    requests, cancels, memory = doc["requests"], doc["cancelled_sessions"], doc["memory"]
    table = Table(title=f"{doc['config']['requests']} requests queued at once")
    table.add_column("Measure")
    table.add_column("Value", justify="right")
    outcomes = ", ".join(f"{count} {kind}" for kind, count in sorted(requests["outcomes"].items()))
    table.add_row("outcomes", outcomes or "-")
    table.add_row("lost", str(requests["lost"]))
    table.add_row("served in queue order", "yes" if requests["in_order"] else "NO")
    table.add_row("sessions whose events have no gap", str(requests["sessions_without_gaps"]))
    waited = requests["waited_s"]
    table.add_row("waited s (median / p95 / max)", f"{_pair(waited, 2)} / {_s(waited['max'], 2)}")
    table.add_row("all served in s", _s(requests["total_s"], 1))
    mib = 1024 * 1024
    table.add_row(
        "RSS MiB: before / after requests / after cancels",
        " / ".join(
            f"{memory[key] / mib:.1f}"
            for key in ("rss_before_bytes", "rss_after_requests_bytes", "rss_after_cancels_bytes")
        ),
    )
    table.add_row(
        f"cancelled_sessions after {cancels['published']} published",
        f"{cancels['size_after_published']} (bound {cancels['max_size']})",
    )
    table.add_row(
        f"cancelled_sessions after {cancels['added']} more added",
        f"{cancels['size_after_added']} (bound {cancels['max_size']})",
    )
    table.add_row("cancels taken per s, through the broker", _s(cancels["published_per_s"], 0))
    return [table]


def conversation_tables(doc: dict[str, Any]) -> list[Table]:
    config, summary = doc["config"], doc["summary"]
    table = Table(
        title=f"A conversation of {summary['turns']} turns, {config['interleave']} other "
        f"question(s) before each: time to first token, s ({_runs(summary['runs'])})"
    )
    columns = ("Turn", "History turns", "Prompt tokens", "Of them saved", "Cache", "No cache")
    for column in (*columns, "Ratio"):
        table.add_column(column, justify="right")
    for row in summary["by_turn"]:
        ratio = row["without_over_with"]
        table.add_row(
            str(row["turn"]),
            str(row["history_used"]),
            f"{row['prompt_tokens']:.0f}",
            f"{row['saved_prefix_tokens']:.0f}",
            _s(row["cached"]["median"], 2),
            _s(row["uncached"]["median"], 2),
            "-" if ratio is None else f"{ratio:.1f}x",
        )
    facts = Table(title="The state cache")
    facts.add_column("Measure")
    facts.add_column("Value", justify="right")
    ratios = summary["last_over_first"]
    met = "met" if summary["meets_target"] else "NOT met"
    facts.add_row(
        "last turn / first, with the cache",
        f"{_s(ratios['cached'], 2)}  (target <= {config['target_ratio']}: {met})",
    )
    facts.add_row("last turn / first, without", _s(ratios["uncached"], 2))
    last = doc["turns"][-1]["cache"]
    mib = 1024 * 1024
    facts.add_row(
        "held at the end: states, MiB of the capacity (peak MiB)",
        f"{last['entries']}, {last['bytes'] / mib:.1f} of {last['capacity_bytes'] / mib:.0f} "
        f"({summary['cache_peak_bytes'] / mib:.1f})",
    )
    if last["bytes_per_token"] is not None:
        facts.add_row(
            "one state: KiB per token (the newest: tokens, MiB)",
            f"{last['bytes_per_token'] / 1024:.1f} ({last['newest_entry_tokens']}, "
            f"{last['newest_entry_bytes'] / mib:.1f})",
        )
    return [table, facts]


def _runs(count: int) -> str:
    return "one run" if count == 1 else f"median of {count} runs"


# --- charts ------------------------------------------------------------------------------


def plot(doc: dict[str, Any], path: Path) -> None:
    """Draw the document to ``path`` (PNG); matplotlib is needed only here."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    drawers = {
        "cancel": _plot_cancel,
        "stream": _plot_stream,
        "queue": _plot_queue,
        "conversation": _plot_conversation,
    }
    drawers[doc["benchmark"]](doc, axes)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _plot_cancel(doc: dict[str, Any], axes: Any) -> None:
    depths = doc["config"]["depths"]
    positions = range(len(depths))  # evenly spaced: the depths are few and far apart
    for mode, marker in (("fifo", "o"), ("cancel_queue", "s")):
        rows = {row["depth"]: row["stop_s"] for row in doc["summary"] if row["mode"] == mode}
        medians = [rows[depth]["median"] for depth in depths]
        p95 = [rows[depth]["p95"] for depth in depths]
        line = axes.plot(positions, medians, marker=marker, label=f"{MODE_LABELS[mode]}, median")
        color = line[0].get_color()
        axes.plot(positions, p95, marker=marker, linestyle=":", color=color, alpha=0.5, label="p95")
    baseline = doc.get("prefill_baseline")
    if baseline is not None and baseline["full_prefill_s"]["median"] is not None:
        axes.axhline(
            baseline["full_prefill_s"]["median"],
            color="grey",
            linestyle="--",
            label="the prompt's full processing",
        )
    axes.set_xticks(list(positions), [str(depth) for depth in depths])
    axes.set_yscale("log")
    axes.set_xlabel("requests queued behind the running answer")
    axes.set_ylabel("cancel published to generation stopped, s")
    phase, model = doc["config"]["phase"], doc["environment"]["model"]
    axes.set_title(f"Time to stop an answer ({phase}), {model}")
    axes.legend(fontsize="small")


def _plot_stream(doc: dict[str, Any], axes: Any) -> None:
    pairs = doc["runs"]
    xs = range(len(pairs))
    local = [pair["in_process"]["tokens_per_s"] or 0 for pair in pairs]
    piped = [pair["pipeline"]["tokens_per_s"] or 0 for pair in pairs]
    direct = doc["config"].get("direct", "llama.cpp in process")
    axes.bar([x - 0.2 for x in xs], local, width=0.4, label=direct)
    axes.bar([x + 0.2 for x in xs], piped, width=0.4, label="pipeline, at the client")
    ratio = doc["summary"]["ratio"]["median"]
    axes.set_xlabel("pair (same prompt, run side by side)")
    axes.set_ylabel("tokens per second")
    axes.set_title(f"Streaming: pipeline / in process = {_s(ratio)} (median)")
    axes.legend(fontsize="small")


def _plot_queue(doc: dict[str, Any], axes: Any) -> None:
    waited = doc["requests"]["waited_s_by_position"]
    points = [(index, value) for index, value in enumerate(waited) if value is not None]
    axes.plot([p[0] for p in points], [p[1] for p in points], marker=".", linestyle="")
    axes.set_xlabel("position in the queue")
    axes.set_ylabel("waited before the engine took it, s")
    axes.set_title(f"{doc['config']['requests']} requests queued at once")


def _plot_conversation(doc: dict[str, Any], axes: Any) -> None:
    rows = doc["summary"]["by_turn"]
    turns = [row["turn"] for row in rows]
    for mode, label in (("cached", "with the state cache"), ("uncached", "without")):
        axes.plot(turns, [row[mode]["median"] for row in rows], marker="o", label=label)
    axes.set_xlabel("turn of the conversation")
    axes.set_ylabel("time to first token, s (median)")
    axes.set_title(f"{doc['config']['interleave']} other question(s) before each turn")
    axes.legend()
