"""The terminal as a user meets it: ``concierge ask`` without an engine, Ctrl+C and limits."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from config.settings import Settings
from engine.backends.base import Backend
from tests.cli_fixture import ROOT, cli_env, concierge
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import WireTap, wait_for_tokens
from tests.terminal_fixture import _user


async def tap_replies(tap: WireTap, broker: Broker, bot_id: str) -> None:
    """The tap also copies the replies to ``bot_id`` (a terminal's random id, known once its
    first request is seen)."""
    await tap._bind(broker.names.reply_exchange, bot_id, tap._on_event)


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
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    # Without the cut at the first paragraph, whose place depends on the model's words.
    whole = settings.model_copy(update={"answer_paragraphs": 0})
    running = await start_engine(whole, backend)
    try:
        process = await concierge("ask", LONG_QUESTION, env=cli_env(settings))
        _, stderr = await asyncio.wait_for(process.communicate(), 90)
    finally:
        await running.stop()
    assert process.returncode == 0, stderr.decode()
    assert "done · 48 tokens" in stderr.decode()  # the settings fixture's CONCIERGE_MAX_TOKENS
    assert "cut off at the token limit" in stderr.decode()


async def test_an_empty_question_is_refused(settings: Settings) -> None:
    process = await concierge("ask", "  ", env=cli_env(settings))
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert stderr.decode().strip() == "not asked: the question is empty"


async def test_an_answer_piped_into_a_reader_that_leaves_early_ends_without_a_traceback(
    engine: RunningEngine, settings: Settings
) -> None:
    """``concierge ask ... | head -n 1``: once the reader has gone, the next piece written
    fails (EPIPE); the command ends quietly, as a shell expects (128 + SIGPIPE)."""
    read_end, write_end = os.pipe()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", "ask", LONG_QUESTION,
        stdout=write_end, stderr=asyncio.subprocess.PIPE,
        env=cli_env(settings) | {"PYTHONPATH": str(ROOT)}, cwd=ROOT,
    )  # fmt: skip
    os.close(write_end)
    first = await asyncio.to_thread(os.read, read_end, 1)  # the answer has begun
    os.close(read_end)  # the reader leaves
    _, stderr = await asyncio.wait_for(process.communicate(), 90)

    assert first
    assert "Traceback" not in stderr.decode(), stderr.decode()
    assert process.returncode == 141
