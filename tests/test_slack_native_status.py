"""Slack's own features for AI apps: streamed text and the thread status of a question."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.renderer import MessageContent, Status
from bots.slack.format import section_blocks
from bots.slack.markdown import JOINER, plain_markdown, stream_markdown
from bots.slack.status import ThreadStatus
from bots.slack.stream import Feature
from broker.amqp import Broker
from config.settings import Settings
from config.texts import t
from engine.backends.base import Backend
from tests import slack_fixture
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.fake_slack import FakeSlack
from tests.helpers import collect
from tests.slack_fixture import ASKER, CHANNEL, Bot, mention, slack_bot
from tests.slack_helpers import DONE, parts, shown, wait_until_shown
from tests.slack_native_helpers import web  # noqa: F401  # the fixture

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake, bot = slack_fixture.settings, slack_fixture.fake, slack_fixture.bot


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
    web: AsyncWebClient,  # noqa: F811  # the fixture imported above
    fake: FakeSlack,
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
