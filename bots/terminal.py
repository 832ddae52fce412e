"""The terminal adapter: ``concierge ask`` (one question) and ``concierge chat`` (a session).

Tokens are printed as they arrive, not throttled: a terminal has no rate limit. Ctrl+C during
an answer publishes a cancel and waits for the engine to confirm; Ctrl+C at an empty prompt,
or Ctrl+D, leaves the chat.
"""

from __future__ import annotations

import asyncio
import getpass
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TextIO

from rich.console import Console

from bots.ask import Ask, Kind
from bots.client import AskRefused, ConciergeClient
from bots.session import Detached, ReplyTimeout, Session, StopRequested
from broker.protocol import (
    TERMINAL_TYPES,
    Cancelled,
    Done,
    Expired,
    Failed,
    Progress,
    ReplyEvent,
    TokenEvent,
)
from config.settings import Settings

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
STOP_CONFIRM_TIMEOUT_S = 10.0


class TerminalAnswer:
    """Follows one session and prints it: tokens to ``out``, how it ended to ``err``."""

    def __init__(self, session: Session, out: TextIO, err: Console, *, as_json: bool) -> None:
        self.session = session
        self.out = out
        self.err = err
        self.as_json = as_json
        self.printed = ""
        self.stop_requested = False
        self.started = False

    async def follow(self) -> int:
        """Print events until the exchange ends; return the exit code it deserves."""
        while True:
            timeout_s = STOP_CONFIRM_TIMEOUT_S if self.stop_requested else None
            try:
                item = await self.session.next_item(timeout_s)
            except ReplyTimeout as error:
                self.err.print(f"[red]timed out:[/] {error}")
                return EXIT_INTERRUPTED if self.stop_requested else EXIT_FAILED
            if isinstance(item, Detached):  # never sent to this client: it does not detach
                return EXIT_INTERRUPTED
            if isinstance(item, StopRequested):
                self.stop_requested = True
                if not self.started:
                    self.err.print("[yellow]stopped[/] before it started")
                    return EXIT_INTERRUPTED
                continue
            self.started = True
            self._print(item)
            if item.type in TERMINAL_TYPES:
                return self._report_end(item)

    def _print(self, event: ReplyEvent) -> None:
        if self.as_json:
            self.out.write(event.model_dump_json() + "\n")
        elif isinstance(event, Progress):
            self.err.print(f"[dim]{event.text}[/]")
        elif isinstance(event, TokenEvent):
            self.out.write(event.text)
            self.printed += event.text
        elif isinstance(event, Done | Cancelled | Failed) and event.text.startswith(self.printed):
            self.out.write(event.text[len(self.printed) :])  # anything a lost token left out
            self.printed = event.text
        self.out.flush()

    def _report_end(self, event: object) -> int:
        if not self.as_json and self.printed and not self.printed.endswith("\n"):
            self.out.write("\n")
            self.out.flush()
        match event:
            case Done(tokens=tokens, tokens_per_s=rate):
                self.err.print(f"[dim]done · {tokens} tokens · {rate or 0:.1f} tokens/s[/]")
                return EXIT_OK
            case Cancelled(tokens=tokens):
                self.err.print(f"[yellow]stopped[/] after {tokens} tokens")
                return EXIT_INTERRUPTED
            case Failed(reason=reason):
                self.err.print(f"[red]failed:[/] {reason}")
            case Expired(reason=reason):
                self.err.print(f"[red]expired:[/] {reason}")
        return EXIT_FAILED


_background: set[asyncio.Task[None]] = set()


def _in_background(coroutine: Coroutine[object, object, None]) -> None:
    """Run a coroutine from a signal handler, keeping a reference until it is done."""
    task = asyncio.ensure_future(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)


def _on_sigint(callback: Callable[[], None]) -> None:
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, callback)


async def ask(
    settings: Settings,
    question: str,
    *,
    as_json: bool = False,
    kind: Kind = "ask",
) -> int:
    """One question (or a rescrape); the answer on stdout. Exit 0 when done, 130 when stopped."""
    err = Console(stderr=True)
    async with ConciergeClient(one_off(settings), "terminal") as client:
        try:
            session = await client.ask(Ask(question, getpass.getuser(), kind))
        except AskRefused as refusal:
            err.print(f"[red]not asked:[/] {refusal}")
            return EXIT_FAILED
        answer = TerminalAnswer(session, sys.stdout, err, as_json=as_json)
        _on_sigint(lambda: _in_background(client.cancel(session, session.user_id)))
        try:
            return await answer.follow()
        finally:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
            client.forget(session)


def one_off(settings: Settings) -> Settings:
    """A terminal client is never a named bot: under the bot's name it would take (and
    acknowledge) that bot's replies, or be refused while the bot runs."""
    return settings.model_copy(update={"bot_name": ""})


async def chat(settings: Settings) -> int:
    """Question after question; Ctrl+C stops an answer, Ctrl+D or Ctrl+C at the prompt leaves."""
    err = Console(stderr=True)
    lines = await _stdin_lines()
    leave = asyncio.Event()
    async with ConciergeClient(one_off(settings), "terminal") as client:
        current: list[Session] = []

        def interrupt() -> None:
            if current:
                _in_background(client.cancel(current[0], current[0].user_id))
            else:
                leave.set()

        _on_sigint(interrupt)
        err.print("[bold]Concierge[/] · ask anything · Ctrl+C stops an answer · Ctrl+D leaves")
        while (question := await _prompt(lines, leave, err)) is not None:
            if not question:
                continue
            try:
                session = await client.ask(Ask(question, getpass.getuser()))
            except AskRefused as refusal:
                err.print(f"[red]not asked:[/] {refusal}")
                continue
            current.append(session)
            await TerminalAnswer(session, sys.stdout, err, as_json=False).follow()
            current.clear()
            client.forget(session)
    return EXIT_OK


async def _stdin_lines() -> asyncio.StreamReader:
    """Standard input as an asyncio stream, so reading never blocks the loop."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def _prompt(lines: asyncio.StreamReader, leave: asyncio.Event, err: Console) -> str | None:
    """The next question; None on Ctrl+D or Ctrl+C."""
    err.print("[bold cyan]you>[/] ", end="")
    read = asyncio.ensure_future(lines.readline())
    left = asyncio.ensure_future(leave.wait())
    await asyncio.wait({read, left}, return_when=asyncio.FIRST_COMPLETED)
    left.cancel()
    if not read.done():
        read.cancel()
        return None
    line = read.result()
    return line.decode(errors="replace").strip() if line else None
