"""Does an open console slow the engine? Its tokens/s with a console watching and without.

    python -m cli.benchmarks.console [--pairs 16] [--max-tokens 96] [--console process]
        [--page process] [--json]

An engine runs in this process on a prefix of its own (``cli.benchmarks.rig``, cold KV cache,
temperature 0, so the same prompt costs the same), with its ``/healthz``. Each pair answers
one prompt twice: once with no console, once with a console watching and a page's event
stream open and read by another process (as a browser would be; ``--page in-process`` reads
it here, ``--page none`` opens none, ``--page null`` starts no console on either side: the
measure's own noise). The console is a process of its own at a lower priority, as
``concierge up`` runs it (``--console process``), or runs in this process, on the engine's
event loop (``--console in-process``, as ``concierge up`` ran it before). Which goes first
alternates. The ratio is the engine's own tokens/s (``done``) with the console over without;
the goal is a median of at least 0.97.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from broker.protocol import Done
from cli.benchmarks.rig import BenchError, Rig, running_rig
from cli.benchmarks.stream import PROMPTS
from cli.console.process import ConsoleProcess
from cli.console.server import Console
from config.settings import Settings, load_settings
from engine.metrics import MetricsServer

TARGET_RATIO = 0.97
STEADY_AFTER_DOCUMENTS = 2  # the first at once, the next a heartbeat later: start-up is over
PAIR_ATTEMPTS = 3
OTHER_PROCESS, IN_PROCESS, NO_PAGE = "process", "in-process", "none"
NULL = "null"  # no console on either side: the noise of the measure itself
CHILD, SAME = "process", "in-process"  # where the console runs
PAGE_PROCESS = """
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1]) as stream:
    for line in stream:
        if line.startswith(b"data: "):
            print(len(line), flush=True)
"""
QUIET = ("engine", "bots", "broker", "cli", "aio_pika", "aiormq", "aiohttp")


async def run_overhead(
    settings: Settings,
    pairs: int,
    max_tokens: int,
    *,
    page: str = OTHER_PROCESS,
    console: str = CHILD,
) -> dict[str, Any]:
    from cli.benchmarks.running import load_bench_backend

    started = time.time()
    backend = await load_bench_backend(settings, cold=True, filler_tokens=8)
    rows: list[dict[str, Any]] = []
    async with running_rig(settings, backend, max_tokens=max_tokens) as rig:
        assert rig.worker is not None
        async with MetricsServer(rig.worker.metrics, "127.0.0.1", 0) as health:
            watched = rig.settings.model_copy(
                update={"metrics_port": health.port, "web_host": "127.0.0.1", "web_token": None}
            )
            how = Watching(watched, page, console)
            await _answer(rig, how, PROMPTS[0], False)  # warm-up: first loads
            for index in range(pairs):
                runs = await _pair(rig, how, index)
                row = {
                    "pair": index,
                    "without": runs[False].tokens_per_s,
                    "with": runs[True].tokens_per_s,
                    "ratio": runs[True].tokens_per_s / runs[False].tokens_per_s,
                    "cpu_ms_per_token_without": runs[False].cpu_ms_per_token,
                    "cpu_ms_per_token_with": runs[True].cpu_ms_per_token,
                    "loop_cpu_ms_per_token_without": runs[False].loop_cpu_ms_per_token,
                    "loop_cpu_ms_per_token_with": runs[True].loop_cpu_ms_per_token,
                    "console_process_cpu_ms_per_token": runs[True].child_cpu_ms_per_token,
                    "documents": runs[True].documents,
                }
                rows.append(row)
                print(_line(row), file=sys.stderr)
    ratios = [row["ratio"] for row in rows]
    median = statistics.median(ratios)
    cpu_without = statistics.median(row["cpu_ms_per_token_without"] for row in rows)
    cpu_with = statistics.median(row["cpu_ms_per_token_with"] for row in rows)
    loop_without = statistics.median(row["loop_cpu_ms_per_token_without"] for row in rows)
    loop_with = statistics.median(row["loop_cpu_ms_per_token_with"] for row in rows)
    child = statistics.median(row["console_process_cpu_ms_per_token"] for row in rows)
    return {
        "benchmark": "console-overhead",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "max_tokens": max_tokens,
        "page_open": page,
        "console": console,
        "pairs": rows,
        "median_ratio": median,
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "target_ratio": TARGET_RATIO,
        "meets_target": median >= TARGET_RATIO,
        # this process's CPU per token (engine and console): what load on the machine hides
        "cpu_ms_per_token_without": cpu_without,
        "cpu_ms_per_token_with": cpu_with,
        # in this process the console's work runs on the event loop's thread: its CPU per
        # token, with the console less without; in a process of its own, that process's CPU
        "loop_cpu_ms_per_token_without": loop_without,
        "loop_cpu_ms_per_token_with": loop_with,
        "console_process_cpu_ms_per_token": child,
        "console_cpu_share": (loop_with - loop_without + child) / cpu_without,
        "duration_s": time.time() - started,
    }


async def _pair(rig: Rig, how: Watching, index: int) -> dict[bool, Run]:
    """One prompt without the console and with it, in the order ``index`` picks; a pair that an
    interruption spoils (a shared broker restarted by someone else) is measured again."""
    prompt = PROMPTS[index % len(PROMPTS)]
    order = (False, True) if index % 2 == 0 else (True, False)
    for attempt in range(PAIR_ATTEMPTS):
        try:
            return {w: await _answer(rig, how, prompt, w) for w in order}
        except BenchError as error:
            if attempt == PAIR_ATTEMPTS - 1:
                raise
            print(f"pair {index} spoiled ({error}); again", file=sys.stderr)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Run:
    tokens_per_s: float  # the engine's own measure, from ``done``
    cpu_ms_per_token: float  # this process's CPU (all threads) over the answer, per token
    loop_cpu_ms_per_token: float  # the event loop's thread alone: the engine's and the console's
    child_cpu_ms_per_token: float  # the console's process, when it has one
    documents: int  # state updates the page read meanwhile


@dataclass(frozen=True)
class Watching:
    """How the "with" runs watch: the console's settings, who reads its page, where it runs."""

    settings: Settings
    page: str
    console: str


async def _answer(rig: Rig, how: Watching, prompt: str, watching: bool) -> Run:
    """One answer to ``prompt``, with a console (and a page of kind ``how.page`` reading it)."""
    if not watching or how.page == NULL:
        return await _measured(rig, prompt, lambda: 0)
    async with _console(how) as (url, console_cpu):
        if how.page == NO_PAGE:
            return await _measured(rig, prompt, lambda: 0, console_cpu)
        reader = PageReader(f"{url}api/events", in_process=how.page == IN_PROCESS)
        async with reader:
            await reader.steady.wait()
            start = reader.documents
            return await _measured(rig, prompt, lambda: reader.documents - start, console_cpu)


@asynccontextmanager
async def _console(how: Watching) -> AsyncIterator[tuple[str, Callable[[], float]]]:
    """A console watching the rig's engine, serving on a free port; its URL, and the CPU
    seconds its own process has used (none in this process: the event loop's count it)."""
    if how.console == SAME:
        async with Console(how.settings, port=0) as console:
            yield console.url, lambda: 0.0
        return
    child = ConsoleProcess(
        sys.stderr,
        env={
            "CONCIERGE_PREFIX": how.settings.prefix,
            "CONCIERGE_METRICS_PORT": str(how.settings.metrics_port),
            "CONCIERGE_WEB_HOST": "127.0.0.1",
            "CONCIERGE_WEB_PORT": "0",
            "CONCIERGE_WEB_TOKEN": "",
            "CONCIERGE_LOG_LEVEL": "WARNING",
        },
    )
    try:
        url = await child.start()
        yield url, lambda: _cpu_seconds(child.pid)
    finally:
        await child.stop()


def _cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user and system), from ``/proc`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PageReader:
    """A page's event stream, read to the end: by another process, as a browser would be
    (``in_process``: by this one, which then pays for the reading too)."""

    def __init__(self, url: str, *, in_process: bool) -> None:
        self.url, self.in_process = url, in_process
        self.documents = 0
        self.steady = asyncio.Event()  # the first updates came: the console's start is over
        self._task: asyncio.Task[None] | None = None
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> PageReader:
        self._task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def _count(self) -> None:
        self.documents += 1
        if self.documents >= STEADY_AFTER_DOCUMENTS:
            self.steady.set()

    async def _read(self) -> None:
        if self.in_process:
            async with aiohttp.ClientSession() as http, http.get(self.url) as response:
                async for line in response.content:
                    if line.startswith(b"data: "):
                        self._count()
            return
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PAGE_PROCESS, self.url, stdout=asyncio.subprocess.PIPE
        )
        assert self._process.stdout is not None
        async for _ in self._process.stdout:  # one line per document it read
            self._count()


async def _measured(
    rig: Rig,
    prompt: str,
    documents: Callable[[], int],
    console_cpu: Callable[[], float] = lambda: 0.0,
) -> Run:
    cpu_before, loop_before = time.process_time(), time.thread_time()  # this is the loop's
    child_before = console_cpu()
    end = await (await rig.ask(prompt, "overhead")).end()
    cpu_s, loop_s = time.process_time() - cpu_before, time.thread_time() - loop_before
    child_s = console_cpu() - child_before
    if not isinstance(end, Done) or not end.tokens_per_s or not end.tokens:
        reason = getattr(end, "reason", "")
        raise BenchError(f"an answer ended with {end.type}, not done {reason}".strip())
    per_token = 1000 / end.tokens
    return Run(
        end.tokens_per_s, cpu_s * per_token, loop_s * per_token, child_s * per_token, documents()
    )


def _line(row: dict[str, Any]) -> str:
    return (
        f"pair {row['pair']}: {row['without']:.1f} tokens/s without, {row['with']:.1f} with "
        f"({row['documents']} updates read): ratio {row['ratio']:.3f}; event loop CPU "
        f"{row['loop_cpu_ms_per_token_without']:.2f} / {row['loop_cpu_ms_per_token_with']:.2f} "
        "ms a token"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.benchmarks.console", description=__doc__)
    parser.add_argument("--pairs", type=int, default=16, help="answers with and without (16)")
    parser.add_argument("--max-tokens", type=int, default=96, help="each answer's limit (96)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--page",
        choices=(OTHER_PROCESS, IN_PROCESS, NO_PAGE, NULL),
        default=OTHER_PROCESS,
        help="who reads the console's events: another process (a browser; default), this "
        "process, or no one; null: no console at all on either side (the measure's own noise)",
    )
    parser.add_argument(
        "--console",
        choices=(CHILD, SAME),
        default=CHILD,
        help="where the console runs: a process of its own at a lower priority, as `concierge "
        "up` runs it (default), or this process, on the engine's event loop",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    settings = load_settings()
    doc = asyncio.run(
        run_overhead(settings, args.pairs, args.max_tokens, page=args.page, console=args.console)
    )
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(
            f"median ratio {doc['median_ratio']:.3f} (lowest {doc['min_ratio']:.3f}, highest "
            f"{doc['max_ratio']:.3f}) over {len(doc['pairs'])} pairs; goal >= {TARGET_RATIO}; "
            f"event loop CPU {doc['loop_cpu_ms_per_token_without']:.2f} ms a token without "
            f"the console, {doc['loop_cpu_ms_per_token_with']:.2f} with, of "
            f"{doc['cpu_ms_per_token_without']:.2f} in all; the console's own process "
            f"{doc['console_process_cpu_ms_per_token']:.2f}: the console's share "
            f"{100 * doc['console_cpu_share']:.1f} %"
        )
    return 0 if doc["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
