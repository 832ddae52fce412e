"""The chat's input side: a line editor with history at a terminal, plain lines otherwise.

At a terminal, prompt_toolkit reads each question (arrow keys, history, Ctrl+A/E...); while an
answer prints, what the user types is not echoed into it but kept for the next prompt. From a
pipe or a file (``concierge chat < questions.txt``), lines are read as they are, one question
each, and echoed after the prompt so the transcript reads like a chat.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import termios
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Protocol

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import create_output
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.text import Text

from config.texts import Locale, t

PROMPT_STYLE = "bold ansicyan"  # prompt_toolkit's name for rich's "bold cyan"
ECHO_STYLE = "bold cyan"


class Lines(Protocol):
    """Where the chat's questions come from."""

    async def read(self) -> str | None:
        """The next line as typed (untrimmed); None when the user leaves."""
        ...

    def held(self) -> AbstractContextManager[None]:
        """Around an answer: what is typed meanwhile waits for the next prompt."""
        ...


def chat_lines(err: Console, leave: asyncio.Event, locale: Locale) -> Lines:
    """Edited lines at a terminal; else plain lines from the pipe or file on stdin. The prompt
    is in ``locale``."""
    prompt = t("terminal.prompt", locale)
    if sys.stdin.isatty() and sys.stderr.isatty():
        return EditedLines(prompt)
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if stat.S_ISREG(mode):  # a file never blocks, and the loop cannot watch one
        return FileLines(err, prompt)
    return PipeLines(err, prompt, leave)


class EditedLines:
    """prompt_toolkit's line editor on the terminal: history with the arrow keys, Ctrl+C
    clears a line (and leaves at an empty one), Ctrl+D leaves."""

    def __init__(self, prompt: str) -> None:
        self.prompt = FormattedText([(PROMPT_STYLE, prompt)])
        self.session: PromptSession[str] = PromptSession(
            history=InMemoryHistory(),
            key_bindings=_bindings(),
            output=create_output(stdout=sys.stderr),  # beside the other status lines
        )

    async def read(self) -> str | None:
        try:
            with patch_stdout(raw=True):  # anything printed meanwhile goes above the prompt
                return await self.session.prompt_async(self.prompt, handle_sigint=False)
        except (EOFError, KeyboardInterrupt):
            return None

    def held(self) -> AbstractContextManager[None]:
        return typing_held()


def _bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("c-c")
    def _clear_or_leave(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    return bindings


class PlainLines:
    """Lines not typed at a terminal: blank ones are not questions, and each question is
    echoed after the prompt (a terminal did not show it)."""

    def __init__(self, err: Console, prompt: str) -> None:
        self.err = err
        self.prompt = prompt

    async def read(self) -> str | None:
        while (line := await self._next_line()) is not None:
            if line.strip():
                self.err.print(Text.assemble((self.prompt, ECHO_STYLE), line.strip()))
                return line
        return None

    async def _next_line(self) -> str | None:
        raise NotImplementedError

    def held(self) -> AbstractContextManager[None]:
        return nullcontext()


class FileLines(PlainLines):
    """A file on stdin, read line by line."""

    async def _next_line(self) -> str | None:
        return sys.stdin.readline() or None


class PipeLines(PlainLines):
    """A pipe on stdin, read without blocking the loop; ``leave`` (Ctrl+C) ends it."""

    def __init__(self, err: Console, prompt: str, leave: asyncio.Event) -> None:
        super().__init__(err, prompt)
        self.leave = leave
        self._reader: asyncio.StreamReader | None = None

    async def _next_line(self) -> str | None:
        if self._reader is None:
            self._reader = await _stdin_stream()
        read = asyncio.ensure_future(self._reader.readline())
        left = asyncio.ensure_future(self.leave.wait())
        await asyncio.wait({read, left}, return_when=asyncio.FIRST_COMPLETED)
        left.cancel()
        if not read.done():
            read.cancel()
            return None
        return read.result().decode(errors="replace") or None


async def _stdin_stream() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


@contextmanager
def typing_held() -> Iterator[None]:
    """While an answer prints, keys typed at the terminal are not echoed into it: they wait,
    and the next prompt starts with them. Ctrl+C still sends SIGINT (the answer stops)."""
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    quiet = termios.tcgetattr(fd)
    # The local modes: no echo, and each key kept as it is (Ctrl+D too, not read as the end of
    # a line), for the prompt to take in turn; Ctrl+C (stop the answer) keeps them as well.
    quiet[3] &= ~(termios.ECHO | termios.ICANON)
    quiet[3] |= termios.NOFLSH
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)  # not TCSAFLUSH: keep what was typed
