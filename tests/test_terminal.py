"""The terminal as a user meets it: ``concierge chat`` and ``concierge up`` in a pseudo-terminal
(its screen kept by a terminal emulator, pyte), ``concierge chat < file``, and ``concierge ask``
with no engine, a busy one, or one that cuts the answer short.

What the engine receives is read by a tap beside the queues (tests/helpers.py's WireTap).
"""

from __future__ import annotations

import asyncio
import getpass
import io
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pexpect
import pyte
import pytest
from rich.console import Console

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.history import CUT_OFF_MARK, STOPPED_MARK
from bots.terminal.text import MarkdownText, PlainText, finished_length
from broker.amqp import Broker
from broker.protocol import HistoryTurn
from config.settings import Settings
from engine.backends.base import Backend
from engine.knowledge.store import NO_ARTICLES_MESSAGE
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import WireTap, wait_for_tokens
from tests.test_cli import ROOT, cli_env, concierge

ROWS, COLS = 40, 100
UP, LEFT, ENTER, CTRL_C, CTRL_D = "\x1b[A", "\x1b[D", "\r", "\x03", "\x04"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"  # rich's "dots": the line that says the question waits
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (INFO|WARNING|ERROR)")


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


async def tap_replies(tap: WireTap, broker: Broker, bot_id: str) -> None:
    """The tap also copies the replies to ``bot_id`` (a terminal's random id, known once its
    first request is seen)."""
    await tap._bind(broker.names.reply_exchange, bot_id, tap._on_event)


# --- the chat at a terminal -------------------------------------------------------------


async def test_the_chat_edits_lines_recalls_questions_and_keeps_the_log_out_of_it(
    settings: Settings, broker: Broker, terminals: Callable[..., Terminal], tmp_path: Path
) -> None:
    """Under ``concierge up`` (the engine in the same process) the log goes to a file; at the
    prompt the arrow keys edit and recall; an empty line is refused; Ctrl+D leaves cleanly."""
    chat = terminals("up", env=cli_env(settings, CONCIERGE_MAX_TOKENS="12"), cwd=tmp_path)
    await chat.shows(r"(?m)^you>")
    assert f"the engine logs to {tmp_path / 'concierge.log'}" in chat.text()
    chat.send(f"Sy hi.{LEFT * 5}a")  # the cursor goes back; the letter lands where it is
    await chat.until(lambda: chat.prompt_line() == "you> Say hi.", "the edited line")
    chat.send(ENTER)
    await chat.shows(r"(?m)^done( ·|$)")
    chat.send(ENTER)
    await chat.shows(r"(?m)^type a question first")
    chat.send(UP)
    await chat.until(lambda: chat.prompt_line() == "you> Say hi.", "the question recalled")
    chat.send(CTRL_C)  # with text at the prompt: clears it, and the chat goes on
    await chat.until(lambda: chat.prompt_line() == "you>", "the line cleared")
    chat.send(f"/new{ENTER}")
    await chat.shows(r"(?m)^new conversation")
    await chat.until(lambda: chat.prompt_line() == "you>", "the prompt")
    chat.send(CTRL_D)
    assert await chat.exit_code() == 0
    lines = [line for line in chat.lines() if line]
    assert lines[lines.index("you> Say hi.") + 1 :][-1] == "you>"  # nothing after the prompt
    assert chat.screen.cursor.x == 0  # the shell's prompt starts on a line of its own
    assert not [line for line in lines if LOG_LINE.search(line)]
    assert "engine engine ready" in (tmp_path / "concierge.log").read_text()


async def test_keys_typed_during_an_answer_wait_for_the_prompt_and_a_stopped_answer_is_history(
    settings: Settings,
    long_engine: RunningEngine,
    broker: Broker,
    terminals: Callable[..., Terminal],
) -> None:
    tap = await WireTap.open(broker, "nobody")
    chat = terminals("chat", env=cli_env(settings))
    await chat.shows(r"(?m)^you>")
    chat.send(f"{LONG_QUESTION}{ENTER}")
    first = await tap.request_from(_user())
    await chat.until(lambda: len(_answer_lines(chat)) >= 2, "the answer streaming")
    chat.send("typed meanwhile")
    chat.send(CTRL_C)
    await chat.shows(r"(?m)^stopped after \d+ tokens")
    await chat.until(lambda: chat.prompt_line() == "you> typed meanwhile", "the typed keys")
    assert [line for line in chat.lines() if "typed meanwhile" in line] == [
        "you> typed meanwhile"
    ]  # never in the answer
    shown = _answer_lines(chat)
    chat.send(ENTER)  # asked as a follow-up
    await tap.until(lambda: len(tap.requests) == 2)
    follow_up = tap.requests[1]
    assert follow_up.question == "typed meanwhile"
    assert [turn.role for turn in follow_up.history] == ["user", "assistant"]
    assert follow_up.history[0].text == first.question
    stopped = follow_up.history[1].text
    assert stopped.endswith(STOPPED_MARK)
    assert _words(stopped.removesuffix(STOPPED_MARK)) == _words(" ".join(shown))
    chat.send(CTRL_C)
    await chat.until(
        lambda: (
            len(re.findall(r"(?m)^(stopped after|removed from)", chat.text())) == 2
            and chat.prompt_line() == "you>"
        ),
        "the follow-up stopped, and the prompt",
    )
    chat.send(CTRL_D)
    assert await chat.exit_code() == 0


def _user() -> str:
    return getpass.getuser()


def _answer_lines(chat: Terminal) -> list[str]:
    """The lines shown after the first question, but its status lines and the next prompt."""
    lines = chat.lines()
    asked = [i for i, line in enumerate(lines) if line.startswith("you> Write")]
    shown: list[str] = []
    for line in lines[asked[0] + 1 :] if asked else []:
        if line.startswith(("you>", "stopped after")):
            break
        if line and line[0] not in SPINNER:
            shown.append(line)
    return shown


def _words(text: str) -> list[str]:
    return text.split()


# --- a file on stdin, and the conversation it makes ---------------------------------------


QUESTIONS = [
    "What is two plus two?",
    "",
    "And three plus three?",
    "And four plus four?",
    "/new",
    "Name a colour.",
]


@pytest.mark.timeout(300)  # four answers, each with the turns before
async def test_chat_reads_a_file_on_stdin_as_one_conversation_until_new(
    settings: Settings, backend: Backend, broker: Broker, tmp_path: Path
) -> None:
    """One answer per line; each question carries the turns before (at most 2 here: the third
    says that only those were used); ``/new`` starts over."""
    engine = await start_engine(settings.model_copy(update={"max_tokens": 16}), backend)
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(QUESTIONS) + "\n")
    tap = await WireTap.open(broker, "nobody")
    with questions.open("rb") as stdin:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cli.main",
            "chat",
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=cli_env(settings, CONCIERGE_HISTORY_MAX_MESSAGES="2"),
            cwd=ROOT,
        )
        stdout, stderr = await asyncio.wait_for(process.communicate(), 240)
    await engine.stop()
    assert process.returncode == 0, stderr.decode()
    assert stderr.decode().count("done ·") == 4  # the blank line is no question
    assert "you> And three plus three?" in stderr.decode()
    first, second, third, fresh = tap.requests
    assert first.history == ()
    [asked, answered] = second.history
    assert asked == HistoryTurn(role="user", text="What is two plus two?")
    assert answered.role == "assistant"
    assert answered.text.endswith(CUT_OFF_MARK)  # at 16 tokens, cut at the token limit
    words = answered.text.removesuffix(CUT_OFF_MARK)
    assert words.strip() and words in stdout.decode()  # the answer as it was shown...
    assert stdout.decode().count(NO_ARTICLES_MESSAGE) == 4  # (one of the engine's notes)
    assert words.endswith(NO_ARTICLES_MESSAGE)  # ...with the engine's note, as a bot sends it
    assert [turn.text for turn in third.history][:1] == ["And three plus three?"]
    assert len(third.history) == 2
    assert stderr.decode().count("only the last 2 messages were used") == 1
    assert fresh.history == ()  # /new


# --- never wait in silence ------------------------------------------------------------------


async def _waiting_ask(
    settings: Settings, client: ConciergeClient, *args: str, **env: str
) -> asyncio.subprocess.Process:
    """``concierge ask`` behind one question already waiting, once it says it waits."""
    await client.ask(Ask("Already waiting?", "someone"))
    process = await concierge("ask", *args, env=cli_env(settings, **env))
    assert process.stderr is not None
    line = await asyncio.wait_for(process.stderr.readline(), 30)
    assert line.decode().startswith("no engine is running; your question waits, 1 ahead")
    return process


async def test_ask_without_an_engine_says_so_at_once_and_ctrl_c_takes_it_back(
    settings: Settings, broker: Broker, client: ConciergeClient
) -> None:
    tap = await WireTap.open(broker, "nobody")
    process = await _waiting_ask(settings, client, "Is anyone there?")
    assert process.returncode is None  # said while the question waits (its TTL is 60 s)
    request = await tap.request_from(_user())
    process.send_signal(signal.SIGINT)
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 130
    assert "removed from the queue" in stderr.decode()
    await tap.until(lambda: [cancel.session_id for cancel in tap.cancels] == [request.session_id])


async def test_ask_without_an_engine_and_nothing_before_it_says_only_that_it_waits(
    settings: Settings, broker: Broker
) -> None:
    process = await concierge("ask", "Anyone?", env=cli_env(settings))
    assert process.stderr is not None
    line = (await asyncio.wait_for(process.stderr.readline(), 30)).decode()
    process.send_signal(signal.SIGINT)
    await asyncio.wait_for(process.communicate(), 30)
    assert line.startswith("no engine is running; your question waits (it expires in "), line
    assert "ahead" not in line


async def test_ask_without_an_engine_expires_at_its_ttl(
    settings: Settings, broker: Broker, client: ConciergeClient
) -> None:
    asked_at = time.monotonic()
    process = await _waiting_ask(settings, client, "Hello?", CONCIERGE_REQUEST_TTL_S="2")
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 1
    assert "expired: no engine took it within its time to live (2 s)" in stderr.decode()
    assert time.monotonic() - asked_at < 20  # the TTL and a short grace, not the reply timeout


async def test_ctrl_c_on_a_question_queued_behind_a_long_answer_removes_it(
    settings: Settings, long_engine: RunningEngine, broker: Broker, client: ConciergeClient
) -> None:
    running = await client.ask(Ask(LONG_QUESTION, "someone"))
    await wait_for_tokens(running, 1)
    tap = await WireTap.open(broker, "nobody")
    process = await concierge("ask", "Say hi.", env=cli_env(settings))
    queued = await tap.request_from(_user())
    await tap_replies(tap, broker, queued.reply_to)
    process.send_signal(signal.SIGINT)
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 130
    assert "removed from the queue" in stderr.decode()
    await client.cancel(running, "someone")  # the engine moves on to the removed question
    [ending] = (await tap.ending(queued.session_id))[-1:]
    assert [event.type for event in tap.events[queued.session_id]] == ["cancelled"]
    assert ending.tokens == 0  # type: ignore[union-attr]


async def test_an_answer_cut_at_the_token_limit_says_so(
    engine: RunningEngine, settings: Settings
) -> None:
    process = await concierge("ask", LONG_QUESTION, env=cli_env(settings))
    _, stderr = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, stderr.decode()
    assert "done · 48 tokens" in stderr.decode()  # the settings fixture's CONCIERGE_MAX_TOKENS
    assert "cut off at the token limit" in stderr.decode()


async def test_an_empty_question_is_refused(settings: Settings) -> None:
    process = await concierge("ask", "  ", env=cli_env(settings))
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert stderr.decode().strip() == "not asked: the question is empty"


# --- how the text is shown ------------------------------------------------------------------

ANSWER = "Some **bold** and _slanted_ words.\n\n- one\n- two\n\n```\nx = 1\n\n```\nEnd.\n\n"


def _rendered(pieces: list[str], final: str) -> list[str]:
    """What a terminal shows once ``pieces`` streamed into a ``MarkdownText`` and ended."""
    screen = pyte.HistoryScreen(COLS, ROWS, history=100)
    stream = pyte.Stream(screen)
    buffer = io.StringIO()
    text = MarkdownText(
        Console(file=buffer, force_terminal=True, width=COLS, height=ROWS, color_system=None)
    )
    for piece in pieces:
        text.add(piece)
        stream.feed(buffer.getvalue().replace("\n", "\r\n"))
        buffer.seek(0)
        buffer.truncate()
    text.finish(final)
    stream.feed(buffer.getvalue().replace("\n", "\r\n"))
    return [line.rstrip() for line in screen.display if line.strip()]


def test_markdown_is_rendered_for_a_terminal_block_by_block() -> None:
    pieces = [ANSWER[i : i + 3] for i in range(0, len(ANSWER), 3)]
    shown = _rendered(pieces, ANSWER + "Sources:\n- A page <https://example.com/a>")
    assert shown[0] == "Some bold and slanted words."
    assert shown[1:3] == [" • one", " • two"]
    assert "x = 1" in shown[3]
    assert shown[4:] == ["End.", "Sources:", " • A page https://example.com/a"]
    assert not [line for line in shown if "**" in line or "_s" in line or "```" in line]


def test_text_a_lost_piece_left_out_is_shown_at_the_end() -> None:
    shown = _rendered(["One ", "two "], "One two three.")
    assert shown == ["One two three."]
    piped = io.StringIO()
    plain = PlainText(piped)
    plain.add("One _two_ ")
    plain.finish("One _two_ three.")
    assert piped.getvalue() == "One _two_ three.\n"  # a pipe gets the text as written


def test_a_block_ends_at_a_blank_line_outside_a_code_fence() -> None:
    assert finished_length("Para one.\n\nPara") == len("Para one.\n\n")
    assert finished_length("```\ncode\n\nmore") == 0
    assert finished_length("Para one.\n") == 0
