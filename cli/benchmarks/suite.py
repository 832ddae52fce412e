"""``concierge bench all``: cancel, stream, queue and conversation, one after another, with
settings that fit in ten minutes on two cores; one JSON document with the machine they ran on
(CPU, cores, load average before and after) and the Markdown tables of docs/benchmarks.md.

They run in this process, on one model loaded once: each benchmark still gets its own wrapper
over it (cold or as deployed), its own broker prefix and engine, as when run alone. A
benchmark that fails, or whose runs missed their precondition, gives no figure; the others
still run, and the exit status (1) and stderr name it.

Kept light to import (argparse only at the top): ``cli.benchmarks.command`` builds its parser
from here.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cli.benchmarks.rig import BenchBackend, Progress
    from config.settings import Settings

ORDER = ("cancel", "stream", "queue", "conversation")
FILLER_TOKENS = 8  # the cancel benchmark's queued requests (its default)
Runner = Callable[[], Awaitable[dict[str, Any]]]


def add_all_parser(kinds: Any, positive: Callable[[str], int]) -> None:
    """``bench all`` and its few options: the settings of each benchmark are fixed (below),
    so two runs compare."""
    parser = kinds.add_parser("all", help="cancel, stream, queue, conversation: one document")
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the configured model)")
    parser.add_argument("--threads", type=positive, help="llama.cpp threads (default: settings)")
    parser.add_argument("--json", action="store_true", help="print the JSON document instead")
    parser.add_argument("--out", type=Path, metavar="FILE.json", help="also save the document")
    parser.add_argument("--verbose", action="store_true", help="keep the engine's logs")
    parser.set_defaults(backend=None, plot=None)  # the in-process model: conversation needs it


def suite_configs() -> dict[str, Any]:
    """Each benchmark's settings: their defaults, which together fit ten minutes on two cores
    with room for a shared machine (docs/benchmarks.md, "All figures in one command")."""
    from cli.benchmarks.cancel import CancelConfig
    from cli.benchmarks.conversation import ConversationConfig
    from cli.benchmarks.queue import QueueConfig
    from cli.benchmarks.stream import StreamConfig

    return {
        "cancel": CancelConfig(),  # decode, depths 0,1,5,10,50, 3 runs each, 160 tokens
        "stream": StreamConfig(),  # 3 prompts x 3 pairs, 128 tokens
        "queue": QueueConfig(),  # 200 requests of 8 tokens; 5,000 + 100,000 cancels
        "conversation": ConversationConfig(),  # 8 turns, 2 others before each, one run
    }


def runners(settings: Settings, shared: BenchBackend, progress: Progress) -> dict[str, Runner]:
    """One coroutine per benchmark, each with the backend wrapper it runs with alone."""
    from cli.benchmarks import cancel, conversation, queue, stream
    from cli.benchmarks.rig import BenchBackend

    def wrapper(cold: bool) -> BenchBackend:
        return BenchBackend(shared.inner, filler_max_tokens=FILLER_TOKENS, cold=cold)

    def tagged(name: str) -> Progress:
        return lambda line: progress(f"{name}: {line}")

    configs = suite_configs()
    return {
        "cancel": lambda: cancel.run_cancel(
            settings, wrapper(True), configs["cancel"], tagged("cancel")
        ),
        "stream": lambda: stream.run_stream(
            settings, wrapper(True), configs["stream"], tagged("stream")
        ),
        "queue": lambda: queue.run_queue(
            settings, wrapper(False), configs["queue"], tagged("queue")
        ),
        "conversation": lambda: conversation.run_conversation(
            settings, wrapper(False), configs["conversation"], tagged("conversation")
        ),
    }


async def run_each(jobs: dict[str, Runner], progress: Progress) -> dict[str, dict[str, Any]]:
    """Every benchmark, in order; one that fails is noted (``error``) and the next runs."""
    from config.errors import ConciergeError

    docs: dict[str, dict[str, Any]] = {}
    for name, job in jobs.items():
        progress(f"bench {name}: starting")
        began = time.time()
        try:
            docs[name] = await job()
        except ConciergeError as error:  # a BenchError, a ConfigError: this one measured nothing
            docs[name] = {"benchmark": name, "error": f"{type(error).__name__}: {error}"}
        progress(f"bench {name}: {time.time() - began:.0f} s")
    return docs


def failures(docs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The benchmarks that gave no figure, each with why."""
    from cli.benchmarks.validity import refusal

    failed: dict[str, str] = {}
    for name, doc in docs.items():
        if "error" in doc:
            failed[name] = f"failed: {doc['error']}"
        elif doc.get("invalid_runs"):
            failed[name] = refusal(doc)
    return failed


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages, or None where the system has none."""
    if not hasattr(os, "getloadavg"):
        return None
    return [round(value, 2) for value in os.getloadavg()]


def cpu_model(cpuinfo: str) -> str:
    """The processor's name from ``/proc/cpuinfo``'s text (x86 ``model name``, some ARM
    ``Hardware`` or ``Processor``), else what Python knows."""
    for key in ("model name", "Hardware", "Processor"):
        for line in cpuinfo.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return ""


def _memory_bytes(meminfo: str) -> int | None:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def machine_info(load_before: list[float] | None, load_after: list[float] | None) -> dict[str, Any]:
    """The machine the figures belong to: on a shared host, the load says how far to trust
    them."""
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return {
        "cpu_model": cpu_model(_read("/proc/cpuinfo")),
        "cores": cores,
        "usable_cores": usable,
        "memory_bytes": _memory_bytes(_read("/proc/meminfo")),
        "system": f"{platform.system()} {platform.release()}",
        "load_average_before": load_before,
        "load_average_after": load_after,
    }


def suite_document(
    settings: Settings,
    started: float,
    machine: dict[str, Any],
    docs: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The one document: the envelope every benchmark has, the machine, each benchmark's own
    document, which gave no figure and why, and the Markdown."""
    from cli.benchmarks import markdown
    from cli.benchmarks.rig import document

    doc = document("all", settings, {"benchmarks": list(docs)}, started)
    doc["duration_s"] = time.time() - started
    doc["machine"] = machine
    doc["benchmarks"] = docs
    doc["failed"] = failures(docs)
    doc["markdown"] = markdown.render(doc)
    return doc


async def all_command(args: argparse.Namespace, settings: Settings) -> int:
    """Run the four; print the Markdown (or ``--json``), save ``--out``; exit 1 naming any
    benchmark that gave no figure."""
    from cli.benchmarks import report
    from cli.benchmarks.running import (
        load_bench_backend,
        progress_printer,
        quiet,
        save_results,
        with_options,
    )

    settings = with_options(args, settings)
    progress = progress_printer()
    started, load_before = time.time(), load_average()
    with quiet(args.verbose):
        shared = await load_bench_backend(settings, cold=True, filler_tokens=FILLER_TOKENS)
        docs = await run_each(runners(settings, shared, progress), progress)
    doc = suite_document(settings, started, machine_info(load_before, load_average()), docs)
    print(report.to_json(doc) if args.json else doc["markdown"].rstrip("\n"))
    if args.out is not None:
        save_results(doc, args.out)
    for name, reason in doc["failed"].items():
        print(f"bench {name}: {reason}", file=sys.stderr)
    return 1 if doc["failed"] else 0
