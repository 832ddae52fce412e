"""Slack's own features for AI apps, through the real Bolt app, the fake Web API, the real broker
and the real model: the thread status while an answer waits, streamed answers (and the fallback
to ``chat.update``), Slack's stop control, the feedback buttons, and a Japanese-speaking asker.

The fake offers streaming only where a test turns it on (``fake.streaming``), as a workspace
may or may not; the apps run with ``process_before_response=True`` (see
``tests/slack_fixture.py``), so a delivery's answer means its listener has finished.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.renderer import MessageContent, Status, split_text
from bots.slack.format import FOOTER_SEPARATOR, asked_line, message_text, section_blocks
from bots.slack.markdown import JOINER, plain_markdown, stream_markdown
from bots.slack.people import SlackPeople
from bots.slack.sink import Native, SlackSink
from bots.slack.status import ThreadStatus
from bots.slack.stream import Feature
from bots.slack.votes import VOTE_ACTION, read_vote
from broker.amqp import Broker
from broker.messages import Envelope
from broker.protocol import Feedback
from config.settings import Settings
from config.texts import t
from engine.backends.base import Backend
from tests import slack_fixture
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.fake_slack import TEAM_ID, FakeSlack, Message
from tests.helpers import WireTap, collect
from tests.slack_fixture import ASKER, CHANNEL, STRANGER, Bot, mention, slack_bot
from tests.test_secrets import log_output
from tests.test_slack import (
    DONE,
    STOPPED,
    as_slack_shows,
    direct_answer,
    parts,
    shown,
    wait_until_shown,
)

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake, bot = slack_fixture.settings, slack_fixture.fake, slack_fixture.bot

VOTER = "U0VOTER01"


@pytest.fixture
async def web(fake: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    """A Web API client of the fake's, for a sink or a thread status on its own."""
    client = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    yield client
    if client.session is not None:
        await client.session.close()


async def streamed_to_its_end(fake: FakeSlack, thread_ts: str) -> Message:
    """The first message streamed in ``thread_ts``, once its stream is over and it has ended."""

    def ended() -> Message | None:
        streamed = [m for m in fake.thread(CHANNEL, thread_ts) if m.streamed]
        done = streamed and not streamed[0].streaming and parts(streamed[0].text)[1]
        return streamed[0] if done and parts(streamed[0].text)[1][0] in "✅🛑⚠⌛⏱" else None

    found = await fake.wait_for(ended, 60)
    assert found is not None
    return found


def vote_values(blocks: list[dict[str, Any]]) -> list[str]:
    """The values of the feedback buttons in ``blocks``, positive first."""
    return [
        element[button]["value"]
        for block in blocks
        if block["type"] == "context_actions"
        for element in block["elements"]
        if element["type"] == "feedback_buttons"
        for button in ("positive_button", "negative_button")
    ]


def stop_control(user: str, thread_ts: str, streaming: list[str]) -> dict[str, Any]:
    """Slack's ``agent_session_stopped``, as its docs show it."""
    return {
        "type": "agent_session_stopped",
        "channel": CHANNEL,
        "thread_ts": thread_ts,
        "streaming_message_ts": streaming,
        "user": user,
        "event_ts": "1783536983.783769",
    }


def vote_click(user: str, value: str, ts: str) -> dict[str, Any]:
    """A click on a feedback button, as Slack's ``block_actions`` payload carries it."""
    action = {
        "type": "feedback_buttons",
        "action_id": VOTE_ACTION,
        "block_id": "b1",
        "value": value,
        "text": {"type": "plain_text", "text": "👍"},
        "action_ts": "1700000099.000100",
    }
    return {
        "user": {"id": user, "team_id": TEAM_ID},
        "channel": {"id": CHANNEL},
        "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL},
        "message": {"ts": ts, "type": "message"},
        "actions": [action],
    }


# --- what a streamed message says --------------------------------------------------------------


@given(st.text(alphabet=st.sampled_from(list("<>@!#|&*`[]()-: \nahttps/.:x;")), max_size=80))
def test_streamed_text_cannot_ping_and_grows_by_appending(text: str) -> None:
    """No ``<`` or ``&`` of the model's can begin markup, the text reads the same, and the
    Markdown of a beginning begins the Markdown of the whole (so only the growth is sent)."""
    markdown = stream_markdown(text)
    assert all(markdown[i + 1] == JOINER for i, ch in enumerate(markdown) if ch in "<&")
    assert plain_markdown(markdown) == text
    for cut in range(len(text)):
        assert markdown.startswith(stream_markdown(text[:cut]))


def test_a_long_text_is_cut_into_sections_between_lines_and_never_inside_a_link() -> None:
    link = "<https://example.com/" + "a" * 80 + "|the page>"
    text = "\n".join(f"line {n} " * 20 + link for n in range(40))
    blocks = section_blocks(text)
    pieces = [block["text"]["text"] for block in blocks]

    assert "".join(pieces) == text and len(pieces) > 1
    assert all(len(piece) <= 3000 and piece.endswith("\n") for piece in pieces[:-1])


# --- the thread status while the answer waits ------------------------------------------------


async def test_a_queued_mention_shows_its_place_in_the_queue_in_the_thread_status(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    async with (
        ConciergeClient(settings, "test") as client,
        slack_bot(settings, client, fake, edit_interval_s=0.0) as bot,
    ):
        running = await client.ask(Ask(LONG_QUESTION, "someone"))
        await running.next_item()  # the engine is busy with it
        waiting = await client.ask(Ask("Say hi.", "someone else"))  # and this one waits
        await bot.slack.event(mention("Say hello.", "100.1"))
        await fake.wait_for(fake.statuses)
        await client.cancel(waiting, "someone else")
        await client.cancel(running, "someone")
        messages = await wait_until_shown(fake, "100.1")
        await collect(running)
        await collect(waiting)
    await engine.stop()

    queued = t("working.queued", "en", ahead=1)
    reading = [t("working.reading", "en"), t("working.searching", "en")]
    statuses = fake.statuses()
    assert statuses[0] == {
        "channel_id": CHANNEL,
        "thread_ts": "100.1",
        "status": queued,
        "loading_messages": [queued],
    }
    assert {"status": reading[0], "loading_messages": reading}.items() <= statuses[1].items()
    assert statuses[-1] == {"channel_id": CHANNEL, "thread_ts": "100.1", "status": ""}
    assert len(statuses) == 3  # set on each change only
    placeholder = fake.calls_of("chat.postMessage")[0]
    cleared = fake.calls_of("assistant.threads.setStatus")[-1]
    first_text = next(c for c in fake.calls_of("chat.update") if parts(c.params["text"])[0])
    assert placeholder.at <= fake.calls_of("assistant.threads.setStatus")[0].at  # Slack clears
    assert first_text.at <= cleared.at  # the status is set after each reply, and cleared
    assert shown(messages)[1] == DONE  # once text shows


async def test_a_thread_status_slack_refuses_is_logged_once_and_the_answers_go_on(
    bot: Bot, engine: RunningEngine, fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    fake.errors["assistant.threads.setStatus"] = "missing_scope"
    fake.errors["agents.sessions.setStatus"] = "not_allowed"  # an app that is no agent
    with caplog.at_level(logging.INFO, logger="bots.slack.stream"):
        await bot.slack.event(mention("Say hello.", "150.1"))
        first = await wait_until_shown(fake, "150.1")
        await bot.slack.event(mention("Say hello.", "150.2"))
        second = await wait_until_shown(fake, "150.2")

    assert shown(first)[1] == shown(second)[1] == DONE
    assert len(fake.statuses()) == len(fake.calls_of("agents.sessions.setStatus")) == 1
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    refusals = [r for r in refusals if "streaming" not in r.getMessage()]  # unoffered here
    assert [r.levelno for r in refusals] == [logging.INFO, logging.INFO]  # one for each


async def test_a_thread_status_is_sent_again_while_it_stays_set_and_no_more_once_cleared(
    web: AsyncWebClient, fake: FakeSlack
) -> None:
    """Slack drops a status after about two minutes without a reply."""
    status = ThreadStatus(
        web,
        CHANNEL,
        "160.1",
        asker=ASKER,
        statuses=Feature("the thread status"),
        sessions=Feature("the agent session"),
        refresh_s=0.01,
    )
    await status.show(MessageContent("", "queued", Status.QUEUED, ahead=2), "en")
    await fake.wait_for(lambda: len(fake.statuses()) >= 3)
    assert status.refreshing
    await status.show(MessageContent("Hi", "answering", Status.GENERATING), "en")

    assert not status.refreshing
    queued = t("working.queued", "en", ahead=2)
    *kept, cleared = [call["status"] for call in fake.statuses()]
    assert len(kept) >= 3 and set(kept) == {queued} and cleared == ""


# --- streamed answers, and the fallback --------------------------------------------------------


async def test_an_answer_in_a_thread_is_streamed_and_ends_with_its_exact_text(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> None:
    fake.streaming = True
    tap = await WireTap.open(broker, client.bot_id)
    await bot.slack.event(mention("Say hello.", "200.1"))
    message = await streamed_to_its_end(fake, "200.1")
    request = await tap.request_from(ASKER)
    expected = await direct_answer(client, "Say hello.")

    assert message.text == stream_markdown(expected) + FOOTER_SEPARATOR + DONE
    assert message.texts[0] == ""  # the placeholder: an empty stream, the status says the rest
    assert all(b.startswith(a) for a, b in zip(message.texts, message.texts[1:], strict=False))
    assert message.recipient == (ASKER, TEAM_ID)
    assert request.context["message"] == message.ts  # a restarted bot finds it
    assert fake.calls_of("chat.appendStream") and len(fake.calls_of("chat.stopStream")) == 1
    assert fake.calls_of("chat.update") == [] and fake.calls_of("chat.postMessage") == []
    session_id = request.session_id
    assert vote_values(message.blocks) == [f"up:{session_id}", f"down:{session_id}"]
    assert [c.params["timestamp"] for c in fake.calls_of("reactions.add")] == [message.ts]


async def test_a_long_streamed_answer_goes_on_in_streams_of_its_own_in_the_thread(
    settings: Settings, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    fake.streaming = True
    async with slack_bot(settings, client, fake, max_chars=40) as bot:
        await bot.slack.event(mention("Say hello.", "260.1"))
        messages = await wait_until_shown(fake, "260.1")
    pieces = split_text(await direct_answer(client, "Say hello."), 40)

    assert len(messages) >= 2 and all(m.streamed and not m.streaming for m in messages)
    assert fake.calls_of("chat.update") == []  # what was streamed was never taken back
    assert [m.text for m in messages] == [stream_markdown(piece) for piece in pieces[:-1]] + [
        stream_markdown(pieces[-1]) + FOOTER_SEPARATOR + DONE
    ]


async def test_where_slack_refuses_to_stream_answers_are_updated_in_place(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> None:
    fake.streaming, fake.errors["chat.startStream"] = True, "not_allowed_token_type"
    tap = await WireTap.open(broker, client.bot_id)
    await bot.slack.event(mention("Say hello.", "300.1"))
    first = await wait_until_shown(fake, "300.1")
    await bot.slack.event(mention("Say hello.", "300.2"))
    second = await wait_until_shown(fake, "300.2")
    request = await tap.request_from(ASKER)
    expected = as_slack_shows(await direct_answer(client, "Say hello."))

    assert shown(first) == shown(second) == (expected, DONE)
    assert not first[0].streamed and len(first[0].texts) > 2  # posted, then updated
    assert len(fake.calls_of("chat.startStream")) == 1  # not asked again for a while
    assert vote_values(first[0].blocks) == [
        f"up:{request.session_id}",
        f"down:{request.session_id}",
    ]
    sections = [b["text"]["text"] for b in first[0].blocks if b["type"] == "section"]
    assert "".join(sections) == first[0].text  # the text shows in the blocks too


async def test_a_stream_start_slack_never_answers_is_posted_instead_and_streaming_stays_on(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    fake.streaming, fake.dropped = True, {"chat.startStream"}  # started, the answer lost
    with log_output("INFO") as output:
        await bot.slack.event(mention("Say hello.", "310.1"))
        first = await wait_until_shown(fake, "310.1")
    fake.dropped = set()
    await bot.slack.event(mention("Say hello.", "310.2"))
    second = await streamed_to_its_end(fake, "310.2")
    expected = await direct_answer(client, "Say hello.")
    log = output.getvalue()

    lost = [m for m in first if m.streamed]  # Slack made them; their ts never came back
    posted = [m for m in first if not m.streamed]
    assert shown(posted) == (as_slack_shows(expected), DONE)  # posted, then updated: exact
    assert lost and all(m.texts == [""] for m in lost)  # left empty, for Slack to expire
    assert second.text == stream_markdown(expected) + FOOTER_SEPARATOR + DONE
    assert log.count("no answer to chat.startStream") == 1
    assert "Traceback" not in log


async def test_a_stream_the_server_expires_mid_answer_is_finished_with_an_update(
    settings: Settings, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    fake.streaming, fake.expire_streams_after = True, 1  # it expires after its first append
    async with slack_bot(settings, client, fake, edit_interval_s=0.0) as bot:
        await bot.slack.event(mention("Say hello.", "400.1"))
        messages = await wait_until_shown(fake, "400.1")
    expected = as_slack_shows(await direct_answer(client, "Say hello."))

    assert len(messages) == 1 and messages[0].streamed
    assert shown(messages) == (expected, DONE)  # rewritten whole: exact
    assert messages[0].texts[:2] == ["", messages[0].texts[1]] and messages[0].texts[1]
    methods = [c.method for c in fake.calls if c.method.startswith("chat.")]
    refused_at = methods.index("chat.stopStream")  # the stream had ended: the message is updated
    assert methods[: refused_at + 1] == [
        "chat.startStream",
        "chat.appendStream",  # taken
        "chat.appendStream",  # refused: message_not_in_streaming_state
        "chat.stopStream",  # refused too
    ]
    assert set(methods[refused_at + 1 :]) == {"chat.update"}
    assert vote_values(messages[0].blocks)


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_failure_after_the_first_message_is_posted_never_posts_it_again(
    web: AsyncWebClient, fake: FakeSlack, streaming: bool
) -> None:
    fake.streaming = streaming
    fake.dropped = {"reactions.add", "assistant.threads.setStatus", "agents.sessions.setStatus"}
    sink = SlackSink(web, CHANNEL, "270.1", native=Native())
    message = await sink.post(MessageContent("", "queued", Status.QUEUED), None)

    assert [m.ts for m in fake.messages] == [message.ts]  # the renderer has it: no retry
    assert fake.calls_of("reactions.add")  # tried, and its answer lost


async def test_a_stream_streams_only_what_its_message_keeps_and_a_lost_append_is_rewritten(
    web: AsyncWebClient, fake: FakeSlack
) -> None:
    fake.streaming = True
    sink = SlackSink(web, CHANNEL, "280.1", native=Native())
    message = await sink.post(MessageContent("", "queued", Status.QUEUED), None)
    await sink.edit(message, MessageContent("Hello there fri", "answering", Status.GENERATING))
    assert fake.message(message.ts).text == "Hello there "  # "fri" may go to the next message

    fake.dropped = {"chat.appendStream"}  # carried out, maybe more than once, never answered
    await sink.edit(message, MessageContent("Hello there friend, ", "…", Status.GENERATING))
    fake.dropped = set()
    done = MessageContent("Hello there friend, hi.", DONE, Status.DONE)
    await sink.edit(message, done)

    shown_ = fake.message(message.ts)
    assert shown_.text == message_text(done) and not shown_.streaming  # rewritten whole: exact
    methods = [c.method for c in fake.calls if c.method.startswith("chat.")]
    stopped = methods.index("chat.stopStream")  # at the lost append: never sent again
    assert set(methods[1:stopped]) == {"chat.appendStream"}
    assert methods[stopped + 1 :] == ["chat.update", "chat.update"]


async def test_a_streamed_answer_taken_over_after_a_restart_is_stopped_then_rewritten(
    settings: Settings, client: ConciergeClient, fake: FakeSlack
) -> None:
    """The last process left its stream running; the next one knows only the context."""
    fake.streaming = True
    async with slack_bot(settings, client, fake) as bot:
        web = bot.adapter.web
        left = await web.chat_startStream(channel=CHANNEL, thread_ts="250.1", markdown_text="Hel")
        context = {"channel": CHANNEL, "thread": "250.1", "question": "250.1"}
        resumed = bot.adapter.answers.resume(context | {"message": left["ts"]})
        assert resumed is not None
        stage, first = resumed
        stage.session_id = "0" * 32
        await stage.edit(first, MessageContent("Hello!", DONE, Status.DONE))
        await stage.ended(first)

    message = fake.message(left["ts"])
    assert not message.streaming and parts(message.text) == ("Hello!", DONE)
    methods = [call.method for call in fake.calls if call.method.startswith("chat.")]
    assert methods == ["chat.startStream", "chat.stopStream", "chat.update"]
    sessions = fake.calls_of("agents.sessions.setStatus")
    assert [call.params["status"] for call in sessions] == ["active"]  # it may have been left on
    assert vote_values(message.blocks) == [f"up:{'0' * 32}", f"down:{'0' * 32}"]


# --- Slack's stop control -----------------------------------------------------------------------


async def test_slacks_stop_control_stops_the_askers_answer_and_not_a_strangers_click(
    bot: Bot, long_engine: RunningEngine, fake: FakeSlack
) -> None:
    fake.streaming = True
    await bot.slack.event(mention(LONG_QUESTION, "500.2", thread_ts="500.1"))  # a follow-up
    started = await fake.wait_for(
        lambda: [m for m in fake.thread(CHANNEL, "500.1") if len(m.text) > 10], 60
    )
    ts = started[0].ts
    answer = bot.adapter.answers.find((CHANNEL, ts))
    assert answer is not None

    fake.stop_streams([ts])  # as Slack does on a click, whoever clicks
    assert await bot.slack.event(stop_control(STRANGER, "500.1", [ts])) == 200
    assert answer.stopped_by is None
    assert await bot.slack.event(stop_control(ASKER, "500.1", [])) == 200  # the thread's answer
    assert answer.stopped_by == ASKER
    messages = await wait_until_shown(fake, "500.1")
    await fake.wait_for(lambda: len(fake.calls_of("agents.sessions.setStatus")) == 2)

    text, footer = shown(messages)
    assert footer == STOPPED and len(text) < 1000  # far from the 400 tokens it would write
    sessions = [call.params for call in fake.calls_of("agents.sessions.setStatus")]
    where = {"channel_id": CHANNEL, "thread_ts": "500.1"}
    assert sessions == [  # what shows Slack's stop button while the answer runs
        where | {"status": "processing", "initiator_user_id": ASKER},
        where | {"status": "active", "initiator_user_id": ASKER},
    ]
    assert [(e["user"], e["text"]) for e in fake.ephemerals] == [
        (STRANGER, t("stop.not_allowed", "en"))
    ]


async def test_a_stop_control_for_no_answer_gives_the_session_back(
    bot: Bot, fake: FakeSlack
) -> None:
    assert await bot.slack.event(stop_control(ASKER, "510.1", [])) == 200

    sessions = [call.params for call in fake.calls_of("agents.sessions.setStatus")]
    assert sessions == [{"channel_id": CHANNEL, "thread_ts": "510.1", "status": "active"}]


# --- feedback ---------------------------------------------------------------------------------


async def test_a_click_on_a_feedback_button_publishes_the_vote_and_thanks_the_voter_alone(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> None:
    fake.streaming = True
    await bot.slack.event(mention("Say hello.", "600.1"))
    message = await streamed_to_its_end(fake, "600.1")
    up, down = vote_values(message.blocks)
    await engine.stop()  # it takes votes too: here the test does
    votes: asyncio.Queue[Feedback] = asyncio.Queue()

    async def take(envelope: Envelope[Feedback]) -> None:
        await votes.put(envelope.message)
        await envelope.ack()

    await broker.consume_feedback(take)
    assert (await bot.slack.action(vote_click(VOTER, up, message.ts)))[0] == 200
    assert (await bot.slack.action(vote_click(VOTER, down, message.ts)))[0] == 200
    first = await asyncio.wait_for(votes.get(), 30)
    second = await asyncio.wait_for(votes.get(), 30)
    await fake.wait_for(lambda: len(fake.responses) == 2)

    session_id = read_vote(up)
    assert session_id is not None
    assert [(f.session_id, f.user_id, f.vote, f.platform) for f in (first, second)] == [
        (session_id[1], VOTER, "up", client.platform),
        (session_id[1], VOTER, "down", client.platform),
    ]
    assert [(r["response_type"], r["text"]) for r in fake.responses] == [
        ("ephemeral", t("vote.thanks_up", "en")),
        ("ephemeral", t("vote.thanks_down", "en")),
    ]
    assert all(r["replace_original"] is False for r in fake.responses)  # the answer stays


async def test_a_user_lookup_slack_never_answers_gives_the_default_and_is_not_retried_at_once(
    web: AsyncWebClient, fake: FakeSlack
) -> None:
    fake.dropped = {"users.info"}
    people = SlackPeople(web, default="ja")
    assert await people.locale(ASKER) == "ja"
    tried = len(fake.calls_of("users.info"))
    assert await people.locale(ASKER) == "ja"

    assert tried >= 1 and len(fake.calls_of("users.info")) == tried


async def test_an_admin_check_slack_never_answers_says_no_once_the_client_gives_up(
    fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    fake.unanswered = {"users.info"}
    quick = AsyncWebClient(token="xoxb-test", base_url=fake.api_url, timeout=1)
    with caplog.at_level(logging.INFO, logger="bots.slack.people"):
        assert await SlackPeople(quick, default="en").is_admin(STRANGER) is False

    assert fake.calls_of("users.info")
    said = [r for r in caplog.records if r.name == "bots.slack.people"]
    assert [(r.levelno, "not an admin" in r.getMessage()) for r in said] == [
        (logging.WARNING, True)
    ]


# --- a Japanese-speaking asker ----------------------------------------------------------------


async def test_an_asker_whose_slack_speaks_japanese_reads_japanese(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    fake.streaming = True
    fake.users[ASKER] = {"locale": "ja-JP", "profile": {"display_name": "Jo"}}
    await bot.slack.event(mention("", "700.1"))  # no question
    status, usage = await bot.slack.command("/ask", "", user_id=ASKER, channel_id=CHANNEL)
    await bot.slack.event(mention("Say hello.", "700.2"))
    message = await streamed_to_its_end(fake, "700.2")
    await bot.slack.command("/ask", "Say hello.", user_id=ASKER, channel_id=CHANNEL)
    in_channel = await wait_until_shown(fake, None, lambda _, f: f == t("status.done", "ja"))
    await bot.slack.action(vote_click(ASKER, vote_values(message.blocks)[0], message.ts))
    await fake.wait_for(lambda: fake.responses)

    assert fake.thread(CHANNEL, "700.1")[0].text == t("slack.mention_usage", "ja")
    assert (status, usage) == (200, t("slack.ask_usage", "ja"))
    assert message.text.endswith(FOOTER_SEPARATOR + t("status.done", "ja"))
    assert fake.statuses()[0]["status"] == t("working.next_up", "ja")
    assert in_channel[0].text.startswith(asked_line("Jo", "Say hello.", "ja") + "\n")
    assert fake.responses[0]["text"] == t("vote.thanks_up", "ja")
    asked = [c for c in fake.calls_of("users.info") if c.params.get("include_locale")]
    assert [c.params["user"] for c in asked] == [ASKER]  # once: it is remembered
