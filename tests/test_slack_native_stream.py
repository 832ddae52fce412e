"""Slack's own features for AI apps: answers streamed into a thread, and their fallbacks."""

from __future__ import annotations

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bots.client import ConciergeClient
from bots.renderer import MessageContent, Status, split_text
from bots.slack.format import FOOTER_SEPARATOR, message_text
from bots.slack.markdown import stream_markdown
from bots.slack.sink import Native, SlackSink
from broker.amqp import Broker
from config.settings import Settings
from tests import slack_fixture
from tests.conftest import RunningEngine
from tests.fake_slack import TEAM_ID, FakeSlack
from tests.helpers import WireTap
from tests.slack_fixture import ASKER, CHANNEL, Bot, mention, slack_bot
from tests.slack_helpers import DONE, as_slack_shows, direct_answer, parts, shown, wait_until_shown
from tests.slack_native_helpers import (
    streamed_to_its_end,
    vote_values,
    web,  # noqa: F401  # the fixture
)
from tests.test_secrets import log_output

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake, bot = slack_fixture.settings, slack_fixture.fake, slack_fixture.bot


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


async def test_a_stream_start_answered_without_its_ts_is_posted_instead(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    """Slack said ok but gave no ``ts`` to stream into: the answer is posted and updated, as
    for a refusal, and nothing is lost (it ended with a traceback and no answer)."""
    fake.streaming, fake.without["chat.startStream"] = True, ("ts",)
    with log_output("INFO") as output:
        await bot.slack.event(mention("Say hello.", "305.1"))
        messages = await wait_until_shown(fake, "305.1")
    expected = await direct_answer(client, "Say hello.")

    posted = [m for m in messages if not m.streamed]
    assert shown(posted) == (as_slack_shows(expected), DONE)
    assert "Traceback" not in output.getvalue()


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
    web: AsyncWebClient,  # noqa: F811  # the fixture imported above
    fake: FakeSlack,
    streaming: bool,
) -> None:
    fake.streaming = streaming
    fake.dropped = {"reactions.add", "assistant.threads.setStatus", "agents.sessions.setStatus"}
    sink = SlackSink(web, CHANNEL, "270.1", native=Native())
    message = await sink.post(MessageContent("", "queued", Status.QUEUED), None)

    assert [m.ts for m in fake.messages] == [message.ts]  # the renderer has it: no retry
    assert fake.calls_of("reactions.add")  # tried, and its answer lost


async def test_a_stream_streams_only_what_its_message_keeps_and_a_lost_append_is_rewritten(
    web: AsyncWebClient,  # noqa: F811  # the fixture imported above
    fake: FakeSlack,
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
