"""The terminal as a user meets it: ``concierge chat`` editing, recalling and reading stdin."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bots.history import CUT_OFF_MARK, STOPPED_MARK
from broker.amqp import Broker
from broker.protocol import HistoryTurn
from config.settings import Settings
from engine.backends.base import Backend
from engine.knowledge.store import NO_ARTICLES_MESSAGE
from tests.cli_fixture import ROOT, cli_env
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import WireTap
from tests.terminal_fixture import (
    Terminal,
    _user,
    terminals,  # noqa: F401  # the fixture
)

UP, LEFT, ENTER, CTRL_C, CTRL_D = "\x1b[A", "\x1b[D", "\r", "\x03", "\x04"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"  # rich's "dots": the line that says the question waits
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (INFO|WARNING|ERROR)")


# --- the chat at a terminal -------------------------------------------------------------


async def test_the_chat_edits_lines_recalls_questions_and_keeps_the_log_out_of_it(
    settings: Settings,
    broker: Broker,
    terminals: Callable[..., Terminal],  # noqa: F811  # the fixture imported above
    tmp_path: Path,
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
    terminals: Callable[..., Terminal],  # noqa: F811  # the fixture imported above
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
