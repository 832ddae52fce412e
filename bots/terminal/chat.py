"""The terminal adapter: ``concierge ask`` (one question), ``concierge rescrape``, and
``concierge chat`` (a conversation: each question carries the ones before and their answers).

Ctrl+C during an answer publishes a cancel (a question still queued is gone at once; a running
answer stops at the engine); Ctrl+C at an empty prompt, or Ctrl+D, leaves the chat.
"""

from __future__ import annotations

import asyncio
import getpass
import re
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from bots.ask import Ask, Kind
from bots.client import AskRefused, ConciergeClient
from bots.history import HISTORY_TURN_MAX_CHARS
from bots.session import Session
from bots.terminal.answer import EXIT_FAILED, EXIT_OK, Outcome, TerminalAnswer
from bots.terminal.prompt import Lines, chat_lines
from bots.terminal.status import TerminalStatus
from bots.terminal.text import answer_text
from broker.history_window import block_start
from broker.protocol import MAX_HISTORY_TURNS, HistoryTurn
from config.settings import Settings
from config.spaces import DEFAULT_SPACE
from config.texts import Locale, t

EXIT_USAGE = 2
COMMAND = re.compile(r"^/[a-z]+$")  # "/new"; "/etc/hosts?" is a question


def one_off(settings: Settings) -> Settings:
    """A terminal client is never a named bot: under the bot's name it would take (and
    acknowledge) that bot's replies, or be refused while the bot runs."""
    return settings.model_copy(update={"bot_name": ""})


def _stderr() -> Console:
    """Status lines; wrapped to a terminal's width, never in a pipe or a file."""
    return Console(stderr=True, highlight=False, soft_wrap=not sys.stderr.isatty())


async def ask(
    settings: Settings,
    question: str,
    *,
    as_json: bool = False,
    kind: Kind = "ask",
    space: str = DEFAULT_SPACE,
) -> int:
    """One question (or a rescrape) in ``space``; the answer on stdout. Exit 0 when done, 130
    when stopped. What it says itself, and the engine's own lines, come in
    ``CONCIERGE_LOCALE``."""
    err = _stderr()
    if kind == "ask" and not question.strip():
        err.print(t("terminal.empty_question", settings.locale))
        return EXIT_USAGE
    async with ConciergeClient(one_off(settings), "terminal") as client:
        asked: list[Session] = []
        stop_pressed = asyncio.Event()  # Ctrl+C while the request is sent: cancel it once sent

        def stop() -> None:
            if asked:
                _in_background(client.cancel(asked[0], asked[0].user_id))
            else:
                stop_pressed.set()

        with _on_sigint(stop):
            try:
                session = await client.ask(Ask(question, getpass.getuser(), kind, space=space))
            except AskRefused as refusal:
                err.print(t("terminal.not_asked", settings.locale, reason=escape(str(refusal))))
                return EXIT_FAILED
            asked.append(session)
            if stop_pressed.is_set():
                stop()
            answer = TerminalAnswer(
                session,
                answer_text(sys.stdout),
                TerminalStatus(err, session.locale),
                json_out=sys.stdout if as_json else None,
            )
            with client.showing(session):
                return (await answer.follow()).code


async def chat(
    settings: Settings,
    *,
    log_file: Path | None = None,
    note: tuple[str, dict[str, object]] | None = None,
    space: str = DEFAULT_SPACE,
) -> int:
    """Question after question, as one conversation, in ``space``; ``log_file``: where the
    engine running in this process logs (``concierge up``), said in the banner; ``note``: a
    line of the catalogue (key, fields) said after it (the sample site's offer)."""
    err = _stderr()
    leave = asyncio.Event()
    lines = chat_lines(err, leave, settings.locale)
    async with ConciergeClient(one_off(settings), "terminal") as client:
        conversation = Chat(client, settings, err, lines, space)
        with _on_sigint(lambda: conversation.interrupt(leave)):
            err.print(f"[bold]Concierge[/] · {_help(settings.locale)}")
            if log_file is not None:
                err.print(t("terminal.log_file", settings.locale, path=escape(str(log_file))))
            if note is not None:
                key, fields = note
                err.print(t(key, settings.locale, **fields), markup=False)
            while (line := await lines.read()) is not None:
                await conversation.take(line)
    return EXIT_OK


class Chat:
    """One ``concierge chat`` run: its conversation, and the question being answered."""

    def __init__(
        self,
        client: ConciergeClient,
        settings: Settings,
        err: Console,
        lines: Lines,
        space: str = DEFAULT_SPACE,
    ) -> None:
        self.client = client
        self.space = space
        self.err = err
        self.lines = lines
        self.locale = settings.locale
        self.turns = Turns(settings.history_max_messages, HISTORY_TURN_MAX_CHARS)
        self.current: Session | None = None

    async def take(self, line: str) -> None:
        """A line typed at the prompt: a question, a command, or nothing."""
        question = line.strip()
        if not question:
            self._say("terminal.no_question", keys=self._keys())
        elif COMMAND.match(question):
            await self._command(question)
        else:
            ask = Ask(
                question,
                getpass.getuser(),
                history=self.turns.history(),
                history_cut=self.turns.cut,
                space=self.space,
            )
            if (outcome := await self._follow(ask)) is not None:
                self.turns.add(question, outcome)

    async def _command(self, command: str) -> None:
        if command == "/new":
            self.turns.clear()
            self._say("terminal.new_conversation")
        elif command == "/help":
            self.err.print(_help(self.locale))
        elif command == "/rescrape":  # whoever runs the chat may run `concierge rescrape` too
            await self._follow(Ask("", getpass.getuser(), "rescrape", space=self.space))
        else:
            self._say("terminal.no_command", command=escape(command), keys=self._keys())

    async def _follow(self, ask: Ask) -> Outcome | None:
        """Send ``ask`` and show its reply as it comes; None when it was refused."""
        try:
            session = await self.client.ask(ask)
        except AskRefused as refusal:
            self._say("terminal.not_asked", reason=escape(str(refusal)))
            return None
        status = TerminalStatus(self.err, session.locale)
        answer = TerminalAnswer(session, answer_text(sys.stdout), status)
        self.current = session
        try:
            with self.lines.held(), self.client.showing(session):
                return await answer.follow()
        finally:
            self.current = None

    def interrupt(self, leave: asyncio.Event) -> None:
        """Ctrl+C: stop the answer, or (between answers) leave."""
        if self.current is not None:
            _in_background(self.client.cancel(self.current, self.current.user_id))
        else:
            leave.set()

    def _say(self, key: str, **fields: object) -> None:
        """The catalogue's line ``key`` in the chat's locale (fields escaped by the caller)."""
        self.err.print(t(key, self.locale, **fields))

    def _keys(self) -> str:
        return t("terminal.keys", self.locale)


def _help(locale: Locale) -> str:
    """What the chat takes: its first line, and the answer to ``/help``."""
    return t("terminal.help", locale, keys=t("terminal.keys", locale))


class Turns:
    """The conversation so far as the request's ``history``: each question with the model's
    answer as it was shown (marked when it did not run to its end). The client sends at most
    ``max_turns`` of them, cut on the engine's grid (``bots.history.last_turns``), and flags
    the cut (the answer then says so); none when it is 0.

    Past the protocol's 50 turns the oldest go here too, on the same grid (a block of 16):
    the smaller window's block divides it, so the client's cut of what is kept is the one it
    would make of the whole conversation, and the turns sent keep their start as it grows."""

    def __init__(self, max_turns: int, max_chars: int) -> None:
        self.max_turns = MAX_HISTORY_TURNS if max_turns else 0
        self.max_chars = max_chars
        self._turns: list[HistoryTurn] = []
        self.cut = False  # the oldest turns went here: the answer says only the last were used

    def history(self) -> tuple[HistoryTurn, ...]:
        return tuple(self._turns)

    def add(self, question: str, outcome: Outcome) -> None:
        """A question and how it was answered; one never answered is left out."""
        if outcome.reply is None:
            return
        self._turns += [
            HistoryTurn(role="user", text=_capped(question, "", self.max_chars)),
            HistoryTurn(
                role="assistant", text=_capped(outcome.reply, outcome.mark, self.max_chars)
            ),
        ]
        dropped = block_start(len(self._turns), self.max_turns)
        del self._turns[:dropped]
        self.cut = self.cut or (dropped > 0 and self.max_turns > 0)  # 0: conversations off

    def clear(self) -> None:
        self._turns.clear()
        self.cut = False


def _capped(text: str, mark: str, max_chars: int) -> str:
    """``text`` then ``mark``, in at most ``max_chars`` (a longer text keeps its start)."""
    room = max(0, max_chars - len(mark))
    return text[:room] + mark if len(text) > room else text + mark


_background: set[asyncio.Task[None]] = set()


def _in_background(coroutine: Coroutine[object, object, None]) -> None:
    """Run a coroutine from a signal handler, keeping a reference until it is done."""
    task = asyncio.ensure_future(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)


@contextmanager
def _on_sigint(callback: Callable[[], None]) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, callback)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)
