"""The Slack adapter against a local fake of Slack: mentions and asks are answered."""

from __future__ import annotations

import itertools
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots.client import ConciergeClient
from bots.slack.format import slack_text
from broker.amqp import Broker
from broker.messages import Envelope
from broker.protocol import Cancel, Done, Request, Started, TokenEvent
from config.settings import Settings
from engine.backends.base import Backend
from tests import slack_fixture
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.fake_slack import FakeSlack
from tests.slack_fixture import ASKER, CHANNEL, Bot, mention, slack_bot
from tests.slack_helpers import DONE, as_slack_shows, direct_answer, parts, shown, wait_until_shown

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake, bot = slack_fixture.settings, slack_fixture.fake, slack_fixture.bot


LINK_OR_ENTITY = re.compile(r"<https?://[^\s<>|]+(\|[^<>]*)?>")


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


# --- asking -----------------------------------------------------------------------------------


async def test_a_mention_is_answered_in_its_thread_with_throttled_updates(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    interval_s = 0.3  # far above a token's time, even at 20 tokens a second
    question = LONG_QUESTION  # 96 tokens take at least 1 s: several update intervals
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
    # One edit per token would be tens of ms apart; an edit's trip to Slack varies, so two
    # edits sent an interval apart may arrive a little closer (79.97 ms at 0.1 s, seen in CI).
    assert gaps and all(gap >= 0.5 * interval_s for gap in gaps), gaps


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
