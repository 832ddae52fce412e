"""The Discord adapter end to end: stopping answers and rescrapes from Discord."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from broker.protocol import TERMINAL_TYPES, Cancelled, Done, Progress, ReplyEvent, Request, Started
from config.settings import Settings
from config.texts import t
from tests.conftest import LONG_QUESTION
from tests.discord_fixture import (
    ADMIN,
    ASKER,
    MANAGE_GUILD,
    MANAGER,
    MANAGER_ROLE_ID,
    OPERATOR,
    STRANGER,
    Harness,
    Shown,
    StartBot,
    StartEngine,
    answering,
    engine_for,  # noqa: F401  # the fixture
    fake_discord,  # noqa: F401  # the fixture
    split_footer,
    start_bot,  # noqa: F401  # the fixture
)
from tests.fake_discord import FakeDiscord
from tests.site_fixture import FakeSite

ADMINISTRATOR = 1 << 3


@dataclass
class Streaming:
    """A long answer to the asker, being streamed into its first message."""

    discord_: Harness
    request: Request
    question_id: int
    first_id: int


async def long_answer_streaming(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
) -> Streaming:
    settings = settings.model_copy(update={"max_tokens": 400})
    await engine_for(settings)
    discord_ = await start_bot(settings)
    question_id = discord_.ask(ASKER, LONG_QUESTION)
    request = await discord_.tap.request_from(ASKER["id"])
    first_id = await discord_.first_reply(question_id)
    await answering(discord_, first_id)
    return Streaming(discord_, request, question_id, first_id)


async def stopped(answer: Streaming) -> tuple[Shown, ReplyEvent]:
    """What the answer shows once stopped, and its terminal event (the cancel seen on the wire)."""
    discord_ = answer.discord_
    shown = await discord_.finished(answer.first_id)
    end = (await discord_.tap.ending(answer.request.session_id))[-1]
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))
    return shown, end


async def test_the_askers_stop_on_the_answer_stops_generation(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
) -> None:
    answer = await long_answer_streaming(settings, start_bot, engine_for)
    discord_, request = answer.discord_, answer.request
    discord_.react(ASKER, answer.first_id)
    shown, end = await stopped(answer)

    assert [(c.session_id, c.user_id) for c in discord_.tap.cancels] == [
        (request.session_id, ASKER["id"])
    ]
    assert isinstance(end, Cancelled)
    assert 0 < end.tokens < 400
    assert shown.footer == "🛑 stopped"
    assert shown.text == end.text


async def test_a_strangers_stop_does_nothing_and_a_managers_stop_on_the_question_works(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
) -> None:
    answer = await long_answer_streaming(settings, start_bot, engine_for)
    discord_ = answer.discord_
    discord_.react(STRANGER, answer.first_id)
    discord_.react(STRANGER, answer.question_id)
    discord_.react(MANAGER, answer.question_id, roles=[MANAGER_ROLE_ID])
    shown, end = await stopped(answer)

    assert [c.user_id for c in discord_.tap.cancels] == [MANAGER["id"]]
    assert isinstance(end, Cancelled)
    assert shown.footer == "🛑 stopped"


async def test_a_queued_request_stopped_shows_stopped_at_once_and_never_reaches_the_model(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
) -> None:
    answer = await long_answer_streaming(settings, start_bot, engine_for)
    discord_, running, running_first = answer.discord_, answer.request, answer.first_id
    queued_id = discord_.ask(STRANGER, "And what about dogs?")
    queued = await discord_.tap.request_from(STRANGER["id"])
    placeholder_id = await discord_.first_reply(queued_id)
    placeholder = discord_.shown(placeholder_id)
    discord_.react(STRANGER, placeholder_id)
    stopped = await discord_.finished(placeholder_id)  # while the first answer still runs
    still_running = discord_.tap.events[running.session_id][-1].type not in TERMINAL_TYPES
    discord_.react(ASKER, running_first)
    queued_events = await discord_.tap.ending(queued.session_id)
    await discord_.tap.ending(running.session_id)

    assert placeholder.footer == "⏳ queued · next up"
    assert stopped.footer == "🛑 stopped"
    assert stopped.text == ""
    assert still_running
    assert [type(event) for event in queued_events] == [Cancelled]
    assert not any(isinstance(event, Started) for event in queued_events)


# --- /rescrape --------------------------------------------------------------------------------


async def test_rescrape_is_refused_to_non_admins_and_streams_progress_for_admins(
    site_settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
) -> None:
    await engine_for(site_settings)
    discord_ = await start_bot(site_settings)
    callbacks = "/callback"

    discord_.slash("rescrape", STRANGER, permissions=0)
    refusal = await fake_discord.wait_for(lambda c: c.path.endswith(callbacks))
    sent_at = discord_.slash("rescrape", ADMIN, permissions=ADMINISTRATOR)
    request = await discord_.tap.request_from(ADMIN["id"])
    progress = await fake_discord.wait_for(lambda c: c in fake_discord.posts())
    shown = await discord_.finished(int(progress.response["id"]))
    events = await discord_.tap.ending(request.session_id)
    acks = [c for c in fake_discord.calls if c.path.endswith(callbacks)]

    assert refusal.body["type"] == 4  # a message, at once
    assert (refusal.body["data"]["content"], refusal.body["data"]["flags"]) == (
        t("refusal.not_admin", "en"),
        64,
    )
    assert len(acks) == 2
    assert acks[1].body["type"] == 4 and acks[1].body["data"]["flags"] == 64
    assert acks[1].at - sent_at < 3.0
    assert [r.type for r in discord_.tap.requests] == ["rescrape"]
    assert "message_reference" not in progress.body  # a channel message, not a reply
    assert not any(c.path.startswith("/webhooks/") for c in fake_discord.calls)
    progress_texts = {e.text for e in events if isinstance(e, Progress)}
    assert progress_texts
    assert isinstance(events[-1], Done)
    assert "Rescrape done" in shown.text
    assert shown.text == events[-1].text
    assert shown.footer == "✅ done"
    for edit in fake_discord.edits(shown.message_ids[0])[:-1]:
        assert split_footer(edit.body["content"])[0] in progress_texts | {""}


async def test_a_rescrape_is_stopped_by_a_configured_admins_stop_on_its_progress_message(
    site_settings: Settings,
    site: FakeSite,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
) -> None:
    only_slow = {"site_sitemap_url": None, "site_urls": [f"{site.base}/slow"]}
    settings = site_settings.model_copy(
        update=only_slow | {"scrape_timeout_s": 60.0, "admin_user_ids": [OPERATOR["id"]]}
    )
    await engine_for(settings)
    discord_ = await start_bot(settings)

    discord_.slash("rescrape", MANAGER, permissions=MANAGE_GUILD)
    request = await discord_.tap.request_from(MANAGER["id"])
    progress = await fake_discord.wait_for(lambda c: c in fake_discord.posts())
    progress_id = int(progress.response["id"])
    try:
        await asyncio.wait_for(site.hanging.wait(), 60)  # the scrape waits on the site
        discord_.react(OPERATOR, progress_id)
        shown = await discord_.finished(progress_id)
    finally:
        site.release.set()
    end = (await discord_.tap.ending(request.session_id))[-1]
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))

    assert [c.user_id for c in discord_.tap.cancels] == [OPERATOR["id"]]
    assert isinstance(end, Cancelled)
    assert shown.footer == "🛑 stopped"
    assert "Rescrape stopped" in shown.text
