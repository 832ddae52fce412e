"""What the terminal tests share: a real pseudo-terminal running concierge, and its fixture."""

from __future__ import annotations

import asyncio
import getpass
import re
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pexpect
import pyte
import pytest

from tests.cli_fixture import ROOT

ROWS, COLS = 40, 100


class Terminal:
    """``concierge <args>`` in a pseudo-terminal; ``lines`` is what its screen shows (the lines
    scrolled off the top included), as a terminal emulator draws it."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        env = {key: value for key, value in env.items() if key not in ("COLUMNS", "LINES")}
        env |= {"TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "PYTHONPATH": str(ROOT)}
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "cli.main", *args],
            env=env,
            cwd=str(cwd),
            dimensions=(ROWS, COLS),
        )
        self.screen = pyte.HistoryScreen(COLS, ROWS, history=5000)
        self.stream = pyte.ByteStream(self.screen)
        self.ended = False

    def lines(self) -> list[str]:
        scrolled = ["".join(line[x].data for x in range(COLS)) for line in self.screen.history.top]
        return [line.rstrip() for line in scrolled + self.screen.display]

    def text(self) -> str:
        return "\n".join(self.lines()).rstrip()

    def prompt_line(self) -> str:
        """The line the cursor is on (the prompt, while one waits)."""
        return self.screen.display[self.screen.cursor.y].rstrip()

    def send(self, keys: str) -> None:
        self.child.send(keys)

    async def until(self, condition: Callable[[], bool], what: str, timeout_s: float = 90) -> None:
        """Read the screen until ``condition`` holds (what a user would wait to see)."""
        await asyncio.to_thread(self._until, condition, what, timeout_s)

    async def shows(self, pattern: str, timeout_s: float = 90) -> None:
        await self.until(lambda: re.search(pattern, self.text()) is not None, pattern, timeout_s)

    def _until(self, condition: Callable[[], bool], what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            left_s = deadline - time.monotonic()
            assert left_s > 0 and not self.ended, f"never shown: {what}\n{self.text()}"
            try:
                self.stream.feed(self.child.read_nonblocking(65536, timeout=min(left_s, 1.0)))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                self.ended = True

    async def exit_code(self, timeout_s: float = 60) -> int:
        await self.until(lambda: self.ended, "the end of the process", timeout_s)
        await asyncio.to_thread(self.child.wait)
        return int(self.child.exitstatus if self.child.exitstatus is not None else -1)

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


@pytest.fixture
async def terminals() -> AsyncIterator[Callable[..., Terminal]]:
    started: list[Terminal] = []

    def start(*args: str, env: dict[str, str], cwd: Path = ROOT) -> Terminal:
        started.append(Terminal(list(args), env, cwd))
        return started[-1]

    yield start
    for terminal in started:
        terminal.close()


def _user() -> str:
    return getpass.getuser()
