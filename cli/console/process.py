"""The console as a process of its own, at a lower priority, beside ``concierge up``'s engine.

In the engine's process the console's work (a copy of every reply event, the page's updates)
ran on the engine's event loop and took the GIL from the generation thread between tokens: a
little CPU, but a measurable share of the tokens/s (docs/console.md, "What it costs the
engine"). As a child process at
``nice +10`` it shares no GIL with the engine and, when the CPU is short, yields it.

The child is ``concierge web --child``, with the parent's environment (so its settings):
- it prints ``ready <url>`` on stdout once it serves; the parent waits for that line, so a port
  in use still stops ``up`` at its start, with the child's own one-line reason;
- it stops when its stdin closes: when the parent stops it, or dies however it dies;
- it runs in a session of its own, so Ctrl+C in the terminal chat is the chat's alone;
- its log lines come through the parent, to wherever the parent's go (the chat's log file).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping
from typing import TextIO

from cli.errors import ConsoleFailed

log = logging.getLogger(__name__)

NICENESS = 10  # added to the console's own: the engine and the bots come first
READY = "ready "  # the child's first line on stdout, then its URL
START_TIMEOUT_S = 60.0  # it imports, connects to the broker and binds its port in this
STOP_TIMEOUT_S = 10.0  # then it is killed
CHUNK_BYTES = 65536
EXIT_UNAVAILABLE = 69  # as ``concierge`` reports a part that does not answer
FAILURE_PREFIX = "concierge: "  # the child's one line, less what the parent prints again


def lower_priority() -> None:
    """Give the CPU to the engine and the bots first when it is short (a no-op where the
    system has no ``nice``, or will not lower it)."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(NICENESS)


def announce_ready(url: str) -> None:
    """The child's side: tell the parent it serves, and where; then whatever else comes to
    stdout (a library's print) goes to stderr, which the parent reads to the end."""
    print(f"{READY}{url}", flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())


async def stop_when_stdin_closes(stop: asyncio.Event) -> None:
    """The child's side: set ``stop`` when the parent closes the pipe or is gone."""
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(4096):  # nothing is sent: only the end matters
        pass
    stop.set()


class ConsoleProcess:
    """``concierge web --child``, started, watched and stopped by ``concierge up``."""

    def __init__(self, log_stream: TextIO, env: Mapping[str, str] | None = None) -> None:
        self.log_stream = log_stream
        self.env = {**os.environ, **(env or {})}
        self.url = ""
        self._process: asyncio.subprocess.Process | None = None
        self._forwarding: asyncio.Task[None] | None = None
        self._watching: asyncio.Task[None] | None = None
        self._last_line = ""
        self._failure = ""  # its one line saying why it did not start
        self._log_failed = False
        self._stopping = False

    @property
    def pid(self) -> int:
        assert self._process is not None, "not started"
        return self._process.pid

    async def start(self) -> str:
        """Start it and wait until it serves; its URL. Raises ``ConsoleFailed``."""
        process = self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cli.main",
            "web",
            "--child",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            start_new_session=True,
        )
        assert process.stdout is not None and process.stderr is not None
        self._forwarding = asyncio.create_task(self._forward(process.stderr))
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                line = (await process.stdout.readline()).decode(errors="replace").strip()
                if not line.startswith(READY):
                    code = await process.wait()
                    await self._forwarding  # its last line says why
                    raise ConsoleFailed(self._reason(code), code if code > 0 else EXIT_UNAVAILABLE)
        except TimeoutError:
            await self.stop()
            raise ConsoleFailed(
                f"the web console did not start within {START_TIMEOUT_S:.0f} s", EXIT_UNAVAILABLE
            ) from None
        except BaseException:  # Ctrl+C meanwhile, say: the child goes too
            await asyncio.shield(self.stop())
            raise
        self.url = line.removeprefix(READY)
        self._watching = asyncio.create_task(self._watch())
        return self.url

    def _reason(self, code: int) -> str:
        if self._failure:
            return self._failure.removeprefix(FAILURE_PREFIX)
        return f"the web console stopped as it started (exit {code}): {self._last_line}".strip()

    async def _forward(self, stderr: asyncio.StreamReader) -> None:
        """The child's log lines, to the parent's log, as they come. Read in chunks (a line
        may be longer than a stream's limit), and a log that cannot be written is said once:
        the child must never block on a full pipe."""
        pending = b""
        while chunk := await stderr.read(CHUNK_BYTES):
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                self._take_line(raw.decode(errors="replace"))
        if pending:
            self._take_line(pending.decode(errors="replace"))

    def _take_line(self, line: str) -> None:
        self._last_line = line.strip() or self._last_line
        if not self.url and line.startswith(FAILURE_PREFIX):
            self._failure = line.strip()  # its reason for not starting: the parent prints it
            return
        try:
            self.log_stream.write(line + "\n")
            self.log_stream.flush()
        except (OSError, ValueError) as error:  # a full disk, a closed terminal
            if not self._log_failed:
                log.warning("the web console's log lines are lost: %s", error)
            self._log_failed = True

    async def _watch(self) -> None:
        """An end nobody asked for is logged: the engine goes on without its console."""
        assert self._process is not None
        code = await self._process.wait()
        if not self._stopping:
            log.warning("the web console stopped (exit %s); the engine goes on without it", code)

    async def stop(self) -> None:
        """Close its stdin (it stops itself), then kill it if it has not in time (its SIGTERM
        would only ask the same again)."""
        self._stopping = True
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await process.wait()
            except TimeoutError:
                log.warning("the web console did not stop within %.0f s: killed", STOP_TIMEOUT_S)
                process.kill()
                await process.wait()
        for task in (self._forwarding, self._watching):
            if task is not None:
                await task
