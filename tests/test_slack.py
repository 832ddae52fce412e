"""The Slack adapter against a local fake of Slack, the real broker and the real model.

Slack's side is ``tests/fake_slack.py``: the bot's real ``AsyncWebClient`` talks to it over
HTTP, and events and slash commands reach the bot as signed HTTP requests through Bolt's own
verification (``tests/slack_fixture.py`` sets both up). The apps run with
``process_before_response=True``, so an HTTP answer means the listener has finished: tests wait
on that, and on what the fake has received, never on time.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from aio_pika.abc import AbstractIncomingMessage
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.renderer import Status, footer_for, split_text
from bots.slack.app import run_slack
from bots.slack.format import BODY_CHARS, FOOTER_SEPARATOR, STOP_REACTION, slack_text, unescape
from broker.amqp import Broker
from broker.messages import Envelope
from broker.protocol import (
    TERMINAL_TYPES,
    Cancel,
    Done,
    ReplyEvent,
    Request,
    Started,
    TokenEvent,
    decode_event,
)
from config.settings import ConfigError, Settings
from engine.backends.base import Backend
from tests import slack_fixture
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.fake_slack import BOT_ID, BOT_USER_ID, FakeSlack, Message
from tests.helpers import collect
from tests.processes import ConciergeProcess
from tests.slack_fixture import ADMIN, ASKER, CHANNEL, STRANGER, Bot, mention, slack_bot
from tests.test_secrets import log_output

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake, bot = slack_fixture.settings, slack_fixture.fake, slack_fixture.bot

DONE = footer_for(Status.DONE, "", 0)
STOPPED = footer_for(Status.STOPPED, "", 0)
STOPPING = footer_for(Status.STOPPING, "", 0)
FINAL_MARKS = ("✅", "🛑 stopped", "⚠️", "⌛", "⏱️")  # how the Renderer's final footers begin
FOOTER_MARKS = ("⏳", "✍", "🛑", "✅", "⚠️", "⌛", "⏱️")
ASKED_LINE = re.compile(r"\A\*[^*\n]*\* asked: [^\n]*\n")  # how an /ask answer opens


# --- what Slack shows -----------------------------------------------------------------------


def reaction(user: str, ts: str, name: str = STOP_REACTION) -> dict[str, Any]:
    item = {"type": "message", "channel": CHANNEL, "ts": ts}
    return {"type": "reaction_added", "user": user, "reaction": name, "item": item}


def admin_lookups(fake: FakeSlack) -> list[str]:
    """Whom ``users.info`` was asked about to see if they are an admin (not for a locale)."""
    return [
        c.params["user"] for c in fake.calls_of("users.info") if "include_locale" not in c.params
    ]


def answer_messages(fake: FakeSlack, thread_ts: str | None) -> list[Message]:
    """The answer in a question's thread; for a slash command, in the channel then its thread."""
    if thread_ts is not None:
        return fake.thread(CHANNEL, thread_ts)
    first = fake.thread(CHANNEL, None)[:1]
    return first + (fake.thread(CHANNEL, first[0].ts) if first else [])


def parts(text: str) -> tuple[str, str]:
    """A message's (unescaped) body and its status line, if it has one."""
    text = ASKED_LINE.sub("", text)
    if text.startswith(FOOTER_MARKS):
        return "", text
    body, separator, footer = text.rpartition(FOOTER_SEPARATOR)
    if separator and footer.startswith(FOOTER_MARKS):
        return unescape(body), footer
    return unescape(text), ""


def as_slack_shows(text: str, max_chars: int = BODY_CHARS) -> str:
    """The answer ``text`` as its messages show it, joined (each piece formatted alone)."""
    return unescape("".join(slack_text(piece) for piece in split_text(text, max_chars)))


LINK_OR_ENTITY = re.compile(r"<https?://[^\s<>|]+(\|[^<>]*)?>")


def shown(messages: list[Message]) -> tuple[str, str]:
    """The whole text the answer's messages show now, and the status line of the last one."""
    bodies = [parts(message.text)[0] for message in messages]
    return "".join(bodies), parts(messages[-1].text)[1]


async def wait_until_shown(
    fake: FakeSlack,
    thread_ts: str | None,
    until: Callable[[str, str], bool] = lambda _, footer: footer.startswith(FINAL_MARKS),
    timeout_s: float = 60.0,
) -> list[Message]:
    """Wait until the answer's messages show a text and footer that satisfy ``until``."""

    def check() -> list[Message] | None:
        messages = answer_messages(fake, thread_ts)
        return messages if messages and until(*shown(messages)) else None

    result = await fake.wait_for(check, timeout_s)
    assert result is not None
    return result


@pytest.mark.parametrize(
    ("generated", "sent"),
    [
        ("**Bold** and `**code**`", "*Bold* and `**code**`"),
        ("## Opening hours ##\nMon to Fri", "*Opening hours*\nMon to Fri"),
        ("- Widgets <https://ex.com/a?b=1&c=2>", "- Widgets <https://ex.com/a?b=1&amp;c=2>"),
        ("See https://ex.com/a_b.", "See <https://ex.com/a_b>."),
        ("## More at https://ex.com\n## **Hours**", "*More at <https://ex.com>*\n*Hours*"),
        ("the [warranty page](https://ex.com/w) says", "the <https://ex.com/w|warranty page> says"),
        (
            "<!channel> <@U1> <#C1> <javascript:x|y>",
            "&lt;!channel&gt; &lt;@U1&gt; &lt;#C1&gt; &lt;javascript:x|y&gt;",
        ),
        ("```\n<@U1> **x** https://ex.com\n```", "```\n&lt;@U1&gt; **x** https://ex.com\n```"),
    ],
)
def test_generated_text_is_sent_in_slacks_own_syntax(generated: str, sent: str) -> None:
    assert slack_text(generated) == sent


@given(st.text(alphabet=st.sampled_from(list("<>@!#|&*`[]()-: \nahttps/.:x;")), max_size=80))
def test_no_generated_text_can_become_a_mention(generated: str) -> None:
    """Whatever the model writes: the only <...> sent are http(s) links the bot made, and
    every & starts an entity."""
    outside_links = LINK_OR_ENTITY.sub("", slack_text(generated))
    assert "<" not in outside_links and ">" not in outside_links
    assert re.sub(r"&(amp|lt|gt);", "", outside_links).count("&") == 0


async def direct_answer(client: ConciergeClient, question: str) -> str:
    """The model's answer asked without Slack (deterministic: temperature 0, fixed seed)."""
    events = await collect(await client.ask(Ask(question, "direct")))
    assert isinstance(events[-1], Done), events[-1]
    return events[-1].text


# --- asking -----------------------------------------------------------------------------------


async def test_a_mention_is_answered_in_its_thread_with_throttled_updates(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    interval_s = 0.1
    question = LONG_QUESTION  # 96 tokens take at least 0.6 s: several update intervals
    engine = await start_engine(settings.model_copy(update={"max_tokens": 96}), backend)
    async with ConciergeClient(settings, "test") as client:
        async with slack_bot(settings, client, fake, edit_interval_s=interval_s) as bot:
            assert await bot.slack.event(mention(question, "100.1")) == 200
            messages = await wait_until_shown(fake, "100.1")
        expected = await direct_answer(client, question)
    await engine.stop()

    assert [message.thread_ts for message in messages] == ["100.1"]
    assert messages[0].texts[0].startswith("⏳ queued")  # the placeholder
    assert shown(messages) == (as_slack_shows(expected), DONE)
    assert len(messages[0].texts) - 1 == len(fake.calls_of("chat.update")) >= 2
    posted_and_updated = messages[0].updated_at[:-1]  # the final update may come at any time
    gaps = [later - earlier for earlier, later in itertools.pairwise(posted_and_updated)]
    assert gaps and all(gap >= 0.8 * interval_s for gap in gaps), gaps  # one edit per token: ms


async def test_ask_is_acknowledged_at_once_and_answered_in_the_channel(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    question = "What is the payload of a rocket?"  # Bolt alone misreads "payload" in a form
    started = time.monotonic()
    status, body = await bot.slack.command("/ask", question, user_id=ASKER, channel_id=CHANNEL)
    acknowledged_s = time.monotonic() - started

    assert (status, body) == (200, "")
    assert acknowledged_s < 3.0
    messages = await wait_until_shown(fake, None)
    assert messages[0].thread_ts is None  # in the channel itself
    assert shown(messages) == (as_slack_shows(await direct_answer(client, question)), DONE)


async def test_a_long_answer_continues_in_thread_replies(
    settings: Settings, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    question = "Say hello."
    async with slack_bot(settings, client, fake, max_chars=40) as bot:
        await bot.slack.command("/ask", question, user_id=ASKER, channel_id=CHANNEL)
        messages = await wait_until_shown(fake, None)

    expected = await direct_answer(client, question)
    assert len(messages) >= 3
    first, *continuations = messages
    assert all(message.thread_ts == first.ts for message in continuations)
    assert all(len(parts(message.text)[0]) <= 40 for message in messages)
    assert all(parts(message.text)[1] == "" for message in messages[:-1])
    assert shown(messages) == (as_slack_shows(expected, 40), DONE)


async def test_generated_mentions_never_ping(bot: Bot, broker: Broker, fake: FakeSlack) -> None:
    """A scripted engine on the real broker answers with text full of Slack markup."""
    answer = "Hi <!channel> and <!here>, ask <@U123|bob> & see <https://evil.example|this>."
    questions: list[Request] = []

    async def scripted_engine(envelope: Envelope[Request | Cancel]) -> None:
        request = envelope.message
        assert isinstance(request, Request)
        questions.append(request)
        fields = {"session_id": request.session_id}
        await broker.send_event(Started(**fields, seq=0, waited_s=0), request.reply_to)
        await broker.send_event(TokenEvent(**fields, seq=1, text=answer), request.reply_to)
        done = Done(**fields, seq=2, text=answer, tokens=1, ttft_s=0, tokens_per_s=0, elapsed_s=0)
        await broker.send_event(done, request.reply_to)
        await envelope.ack()

    await broker.consume_requests(scripted_engine)
    await bot.slack.event(mention("is 1 &lt; 2 &amp;&amp; 3 &gt; 2?", "200.1"))
    messages = await wait_until_shown(fake, "200.1")

    assert [request.question for request in questions] == ["is 1 < 2 && 3 > 2?"]
    assert shown(messages) == (as_slack_shows(answer), DONE)
    for text in messages[0].texts:  # the only <...> left are links the bot made
        assert "<" not in LINK_OR_ENTITY.sub("", text) and ">" not in LINK_OR_ENTITY.sub("", text)
    assert messages[0].text.startswith("Hi &lt;!channel&gt; and &lt;!here&gt;, ask &lt;@U123|bob")
    posted = fake.calls_of("chat.postMessage")[0].params
    assert (posted["parse"], posted["link_names"], posted["unfurl_links"]) == ("none", False, False)


async def test_a_ratelimited_update_is_waited_out(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    fake.rate_limit("chat.update", retry_after_s=1)
    await bot.slack.event(mention("Say hello.", "300.1"))
    messages = await wait_until_shown(fake, "300.1")

    assert shown(messages) == (as_slack_shows(await direct_answer(client, "Say hello.")), DONE)
    updates = fake.calls_of("chat.update")
    assert updates[0].ratelimited and not any(call.ratelimited for call in updates[1:])
    assert updates[1].at - updates[0].at >= 1.0  # Retry-After was honoured


# --- stopping ---------------------------------------------------------------------------------


async def test_the_askers_reaction_stops_the_answer_and_a_strangers_does_not(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    # Every event shown at once, so the "stopping" state is sure to be seen.
    async with (
        ConciergeClient(settings, "test") as client,
        slack_bot(settings, client, fake, edit_interval_s=0.0) as bot,
    ):
        await bot.slack.event(mention(LONG_QUESTION, "400.1"))
        answer_ts = (await wait_until_shown(fake, "400.1", lambda text, _: len(text) > 10))[0].ts
        answer = bot.adapter.answers.find((CHANNEL, answer_ts))
        assert answer is not None

        assert await bot.slack.event(reaction(STRANGER, answer_ts)) == 200
        assert await bot.slack.event(reaction(ASKER, "400.1", name="thumbsup")) == 200
        assert answer.stopped_by is None
        assert admin_lookups(fake) == [STRANGER]  # the asker's own stop asks nobody

        assert await bot.slack.event(reaction(ASKER, "400.1")) == 200  # on the question
        assert answer.stopped_by == ASKER
        messages = await wait_until_shown(fake, "400.1")
    await engine.stop()

    text, footer = shown(messages)
    assert footer == STOPPED
    assert any(parts(version)[1] == STOPPING for version in messages[-1].texts)
    assert len(text) < 1000  # far from the 400 tokens it would have written


async def test_a_queued_question_is_stopped_by_an_admin_before_it_starts(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    fake.users["U0WSADMIN"] = {"is_admin": True}  # a workspace admin, not in admin_user_ids
    async with (
        ConciergeClient(settings, "test") as client,
        slack_bot(settings, client, fake) as bot,
    ):
        running = await client.ask(Ask(LONG_QUESTION, "someone"))
        await running.next_item()  # the engine is busy with it
        await bot.slack.event(mention("And what about dogs?", "500.1"))
        queued = await wait_until_shown(fake, "500.1", lambda _, footer: footer.startswith("⏳"))

        assert await bot.slack.event(reaction("U0WSADMIN", queued[0].ts)) == 200
        messages = await wait_until_shown(fake, "500.1")
        await client.cancel(running, "someone")
        await collect(running)
    await engine.stop()

    assert shown(messages) == ("", STOPPED)
    assert all(parts(version)[0] == "" for version in messages[0].texts)  # no token shown


# --- refusing ---------------------------------------------------------------------------------


async def test_a_bad_signature_or_a_stale_request_is_rejected(
    bot: Bot, broker: Broker, fake: FakeSlack
) -> None:
    assert await bot.slack.event(mention("hello?", "600.1"), secret="not-the-secret") == 401
    body = '{"type": "event_callback", "event": {"type": "app_mention"}}'
    stale = time.time() - 600
    assert (await bot.slack.post(body, "application/json", at=stale))[0] == 401
    assert await bot.slack.event(reaction(ASKER, "600.1")) == 200  # signed properly: accepted

    assert await broker.request_queue_depth() == 0
    assert fake.calls_of("chat.postMessage") == []


async def test_mentions_from_bots_itself_or_other_channels_are_ignored(
    settings: Settings, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> None:
    elsewhere = settings.model_copy(update={"allowed_channel_ids": ["C0OTHER"]})
    async with slack_bot(elsewhere, client, fake) as bot:
        assert await bot.slack.event(mention("not here", "700.1")) == 200
        status, body = await bot.slack.command("/ask", "hi", user_id=ASKER, channel_id=CHANNEL)
    async with slack_bot(settings, client, fake) as bot:
        await bot.slack.event(mention("from a bot", "700.2", user="U0OTHERBOT", bot_id="B0OTHER"))
        await bot.slack.event(mention("from myself", "700.3", user=BOT_USER_ID, bot_id=BOT_ID))

    assert (status, body) == (200, "I don't answer in this channel.")
    assert await broker.request_queue_depth() == 0
    assert fake.calls_of("chat.postMessage") == []


@pytest.mark.parametrize("cut", [False, True])
async def test_rescrape_is_refused_to_non_admins(
    bot: Bot, broker: Broker, fake: FakeSlack, cut: bool
) -> None:
    """Also when Slack cannot say who is an admin (``cut``: the connection fails before its
    answer): nobody is one on a guess, and the log says so in a line."""
    if cut:
        fake.dropped = {"users.info"}
    with log_output("INFO") as output:
        status, _ = await bot.slack.command("/rescrape", "", user_id=STRANGER, channel_id=CHANNEL)
    log = output.getvalue()

    assert status == 200
    assert [(r["response_type"], r["text"]) for r in fake.responses] == [
        ("ephemeral", "Only admins can rebuild the knowledge base.")
    ]
    assert await broker.request_queue_depth() == 0
    assert fake.calls_of("chat.postMessage") == []
    assert set(admin_lookups(fake)) == {STRANGER}
    assert log.count(f"no answer to users.info for {STRANGER}") == int(cut)
    assert "Traceback" not in log


async def test_rescrape_streams_progress_for_admins(
    site_settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    settings = site_settings
    engine = await start_engine(settings, backend)
    async with (
        ConciergeClient(settings, "test") as client,
        slack_bot(settings, client, fake, edit_interval_s=0.0) as bot,  # show every event
    ):
        status, _ = await bot.slack.command("/rescrape", "", user_id=ADMIN, channel_id=CHANNEL)
        messages = await wait_until_shown(fake, None)
    await engine.stop()

    assert status == 200
    assert len(messages) == 1  # one message, updated in place
    progress = [parts(text)[0] for text in messages[0].texts if parts(text)[0]]
    assert any(text.startswith("Rescrape: ") for text in progress), progress
    text, footer = shown(messages)
    assert footer == DONE
    assert text.startswith("Rescrape done")


# --- Socket Mode, through run_slack -----------------------------------------------------------


def events_api(event: dict[str, Any], envelope_id: str) -> dict[str, Any]:
    """A Socket Mode envelope carrying ``event``."""
    return {
        "envelope_id": envelope_id,
        "type": "events_api",
        "accepts_response_payload": False,
        "payload": {
            "team_id": "T0000001",
            "api_app_id": "A0000001",
            "type": "event_callback",
            "event_id": f"Ev-{envelope_id}",
            "event": event,
        },
    }


async def test_run_slack_in_socket_mode_answers_a_mention(
    settings: Settings, engine: RunningEngine, broker: Broker, fake: FakeSlack
) -> None:
    stop = asyncio.Event()
    web = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    bot = asyncio.create_task(run_slack(settings, stop, web=web))
    await fake.send_envelope(events_api(mention("Say hello.", "800.1"), "env-1"))
    await fake.wait_for(lambda: fake.acks)
    messages = await wait_until_shown(fake, "800.1")
    stop.set()
    await asyncio.wait_for(bot, 30)

    assert fake.acks == [{"envelope_id": "env-1"}]
    assert fake.calls_of("apps.connections.open")
    assert shown(messages)[1] == DONE
    assert shown(messages)[0]


async def test_run_slack_names_a_missing_or_refused_token(
    settings: Settings, fake: FakeSlack
) -> None:
    web = AsyncWebClient(token="xoxb-revoked", base_url=fake.api_url)
    fake.errors["auth.test"] = "invalid_auth"
    no_app_token = settings.model_copy(update={"slack_app_token": None})

    with pytest.raises(ConfigError, match="slack_app_token"):
        await run_slack(no_app_token, asyncio.Event(), web=web)
    with pytest.raises(ConfigError, match=r"slack_bot_token.*invalid_auth"):
        await run_slack(settings, asyncio.Event(), web=web)


# --- a bot restarted mid-answer ---------------------------------------------------------------


async def test_a_named_bot_restarted_mid_answer_finishes_it_in_the_same_message(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    """Two processes of the bot "slack-main" in turn, as ``run_slack`` starts them: the adapter
    exists before its client takes replies, so the second one takes the answer over."""
    long_answers = settings.model_copy(update={"max_tokens": 400})
    named = long_answers.model_copy(update={"bot_name": "slack-main"})
    engine = await start_engine(long_answers, backend)
    try:
        first = ConciergeClient(named, "slack")
        async with slack_bot(named, first, fake) as bot:
            await first.start()
            await bot.slack.event(mention(LONG_QUESTION, "500.1"))
            streaming = await wait_until_shown(fake, "500.1", lambda text, _: len(text) > 10)
        await first.close()
        answer_ts = streaming[0].ts
        left_at = parts(fake.message(answer_ts).text)[1]
        assert not left_at.startswith(FINAL_MARKS), "the answer ended before the restart"

        second = ConciergeClient(named, "slack")
        async with slack_bot(named, second, fake):
            await second.start()
            messages = await wait_until_shown(fake, "500.1")
        await second.close()
        async with ConciergeClient(long_answers, "test") as client:
            expected = await direct_answer(client, LONG_QUESTION)
    finally:
        await engine.stop()
        await broker.delete_reply_queue("slack-main")

    assert messages[0].ts == answer_ts  # the same message, updated
    assert shown(messages) == (as_slack_shows(expected), DONE)
    assert len(fake.calls_of("chat.postMessage")) == len(messages)  # nothing posted twice


CONNECTED = "connected in Socket Mode"


async def slack_process(settings: Settings, fake: FakeSlack) -> ConciergeProcess:
    """``concierge slack`` as an operator runs it (Socket Mode, a bot name), its Web API and
    edit interval (constants) set to the fake's and 50 ms."""
    at_the_fake = {
        "bots.slack.app.SLACK_API_URL": fake.api_url,
        "bots.slack.adapter.EDIT_INTERVAL_S": 0.05,
    }
    return await ConciergeProcess.start(
        settings,
        "slack",
        CONNECTED,
        constants=at_the_fake,
        CONCIERGE_BOT_NAME="slack-main",
        CONCIERGE_SLACK_BOT_TOKEN="xoxb-test",
        CONCIERGE_SLACK_APP_TOKEN="xapp-test",
    )


async def stop_all(
    processes: list[ConciergeProcess], engine: RunningEngine, broker: Broker
) -> None:
    """The bot processes still running, then the engine; and the bot's queue goes."""
    for process in processes:
        if process.process.returncode is None:
            await process.terminate()
    await engine.stop()
    await broker.delete_reply_queue("slack-main")


async def test_a_bot_process_killed_mid_answer_is_finished_by_the_next_one(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    """SIGKILLed while an answer streams, then started again: the answer ends in its message."""
    long_answers = settings.model_copy(update={"max_tokens": 400})
    engine = await start_engine(long_answers, backend)
    processes: list[ConciergeProcess] = []
    try:
        processes.append(await slack_process(long_answers, fake))
        await fake.send_envelope(events_api(mention(LONG_QUESTION, "900.1"), "env-9"))
        streaming = await wait_until_shown(fake, "900.1", lambda text, _: len(text) > 10)
        processes[0].kill()
        await processes[0].wait()
        answer_ts = streaming[0].ts
        left_at = parts(fake.message(answer_ts).text)[1]
        assert not left_at.startswith(FINAL_MARKS), "the answer ended before the kill"

        processes.append(await slack_process(long_answers, fake))
        messages = await wait_until_shown(fake, "900.1")
        async with ConciergeClient(long_answers, "test") as client:
            expected = await direct_answer(client, LONG_QUESTION)
    finally:
        await stop_all(processes, engine, broker)

    assert messages[0].ts == answer_ts  # the same message, updated by the second process
    assert shown(messages) == (as_slack_shows(expected), DONE)
    assert len(fake.calls_of("chat.postMessage")) == len(messages)  # nothing posted twice


async def ready_and_unacknowledged(queue: str) -> tuple[int, int]:
    """How many of ``queue``'s messages wait, and how many a consumer holds unacknowledged."""
    process = await asyncio.create_subprocess_exec(
        "rabbitmqctl",
        "-q",
        "list_queues",
        "name",
        "messages_ready",
        "messages_unacknowledged",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    for line in out.decode().splitlines():
        name, ready, unacknowledged = line.split("\t")
        if name == queue:
            return int(ready), int(unacknowledged)
    return 0, 0


async def published_end(broker: Broker, bot_id: str) -> asyncio.Future[ReplyEvent]:
    """Resolves with the first terminal event published to ``bot_id`` (seen beside its queue)."""
    channel = await broker.connection.channel()
    tap = await channel.declare_queue(exclusive=True, auto_delete=True)
    await tap.bind(broker.names.reply_exchange, routing_key=bot_id)
    end: asyncio.Future[ReplyEvent] = asyncio.get_running_loop().create_future()

    async def on_event(message: AbstractIncomingMessage) -> None:
        event = decode_event(message.body)
        if event.type in TERMINAL_TYPES and not end.done():
            end.set_result(event)

    await tap.consume(on_event, no_ack=True)
    end.add_done_callback(lambda _: asyncio.ensure_future(channel.close()))
    return end


async def test_an_end_taken_but_not_yet_shown_by_a_killed_bot_is_shown_by_the_next_one(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    """The first process holds the answer's terminal event while Slack makes it wait (a 429
    with a long Retry-After) and is killed: the event was never acknowledged, so the broker
    gives it to the next process, which shows it in the same message."""
    engine = await start_engine(settings, backend)
    reply_queue = broker.names.reply_queue("slack-main")
    processes: list[ConciergeProcess] = []
    try:
        processes.append(await slack_process(settings, fake))
        end = await published_end(broker, "slack-main")
        await fake.send_envelope(events_api(mention("Say hello.", "950.1"), "env-95"))
        placeholder = await fake.wait_for(lambda: fake.thread(CHANNEL, "950.1"))
        fake.rate_limit("chat.update", retry_after_s=600)  # the next update waits 10 minutes
        await fake.wait_for(lambda: fake.calls_of("chat.update"))
        assert isinstance(await asyncio.wait_for(end, 60), Done)
        deadline = time.monotonic() + 60
        # Delivered (none ready), and held: the end is the one message not acknowledged.
        while await ready_and_unacknowledged(reply_queue) != (0, 1):
            assert time.monotonic() < deadline, "the first process acknowledged the end"
        processes[0].kill()
        await processes[0].wait()
        assert not parts(fake.message(placeholder[0].ts).text)[1].startswith(FINAL_MARKS)

        processes.append(await slack_process(settings, fake))
        messages = await wait_until_shown(fake, "950.1")
        async with ConciergeClient(settings, "test") as client:
            expected = await direct_answer(client, "Say hello.")
    finally:
        await stop_all(processes, engine, broker)

    assert messages[0].ts == placeholder[0].ts
    assert shown(messages) == (as_slack_shows(expected), DONE)
