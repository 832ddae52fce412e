"""Discord's own controls end to end: the stop button under a queued or running answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.amqp import Broker
from broker.protocol import Cancelled, new_session_id
from config.settings import Settings
from config.texts import t
from tests import discord_fixture as base
from tests.discord_fixture import (
    ASKER,
    CHANNEL_ID,
    GUILD_ID,
    STRANGER,
    Harness,
    NamedBot,
    Restarted,
    StartBot,
    StartEngine,
    answering,
)
from tests.discord_native_helpers import DEFERRED_UPDATE, _button, _ids, button, click, told
from tests.fake_discord import FakeDiscord
from tests.fake_discord_wire import click_payload, message_payload
from tests.helpers import WireTap

# The fixtures of tests/discord_fixture.py, used here as they are.
fake_discord = base.fake_discord
engine_for = base.engine_for
start_bot = base.start_bot
named_bots = base.named_bots
restarted_mid_answer = base.restarted_mid_answer


def stop_id(session_id: str, asker: dict[str, Any]) -> str:
    return f"concierge:stop:{session_id}:{asker['id']}"


# --- Stop -------------------------------------------------------------------------------------


async def test_a_queued_answer_has_stop_from_its_placeholder_and_the_askers_click_withdraws_it(
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
) -> None:
    discord_ = await start_bot(settings)  # no engine yet: the question waits in the queue
    question_id = discord_.ask(ASKER, "Anyone there?")
    request = await discord_.tap.request_from(ASKER["id"])
    placeholder_id = await discord_.first_reply(question_id)
    stop = button(fake_discord, placeholder_id, "concierge:stop:")
    placeholder = dict(fake_discord.messages[placeholder_id])  # as the asker sees it

    stranger = click(discord_.bot, STRANGER, placeholder, stop["custom_id"])
    refusal = await told(fake_discord, stranger)
    asker = click(discord_.bot, ASKER, placeholder, stop["custom_id"])
    shown = await discord_.finished(placeholder_id)
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))

    assert stop["custom_id"] == stop_id(request.session_id, ASKER)
    assert (stop["label"], stop["emoji"]["name"]) == ("Stop", "🛑")
    assert base.split_footer(placeholder["content"])[1] == "⏳ queued · next up"
    assert refusal.body["content"] == t("stop.not_allowed", "en")
    assert [(c.session_id, c.user_id) for c in discord_.tap.cancels] == [
        (request.session_id, ASKER["id"])
    ]
    assert [c.body["type"] for c in fake_discord.responses(asker)] == [DEFERRED_UPDATE]
    assert shown.footer == "🛑 stopped"
    assert fake_discord.buttons(placeholder_id) == []

    # A click left on a stale copy of the button (a process gone before its last edit):
    # told the answer has ended, and the button is taken off.
    await discord_.let_go()
    fake_discord.messages[placeholder_id]["components"] = placeholder["components"]
    late = click(discord_.bot, ASKER, placeholder, stop["custom_id"])
    ended = await told(fake_discord, late)
    await fake_discord.wait_for(
        lambda c: c.method == "PATCH" and (c.body or {}).get("components") == [] and c.at > ended.at
    )
    assert ended.body["content"] == t("stop.already_ended", "en")
    assert fake_discord.buttons(placeholder_id) == []
    assert len(discord_.tap.cancels) == 1


async def test_a_click_on_a_stop_button_no_process_shows_stops_it_says_so_and_takes_it_off(
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
) -> None:
    """A button left by a process that stopped (an unnamed bot takes nothing over): nothing
    here will ever edit that message, so the click itself answers and clears it."""
    discord_ = await start_bot(settings)
    session_id = new_session_id()
    message = message_payload(next(_ids), CHANNEL_ID, base.BOT_USER, "An answer\n-# ✍️ writing…")
    message["components"] = [{"type": 1, "components": [_button(stop_id(session_id, ASKER))]}]
    fake_discord.add(message)

    clicked = click(discord_.bot, ASKER, message, stop_id(session_id, ASKER))
    stopping = await told(fake_discord, clicked)
    await fake_discord.wait_for(
        lambda c: c.method == "PATCH" and (c.body or {}).get("components") == []
    )
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))  # the broker's copy, not ours

    assert stopping.body["content"] == t("stop.stopping", "en")
    assert [(c.session_id, c.user_id) for c in discord_.tap.cancels] == [(session_id, ASKER["id"])]
    assert fake_discord.buttons(int(message["id"])) == []


async def test_an_admins_click_stops_someone_elses_answer(
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
) -> None:
    discord_ = await start_bot(settings)  # no engine: the question waits
    question_id = discord_.ask(ASKER, "Anyone there?")
    request = await discord_.tap.request_from(ASKER["id"])
    placeholder_id = await discord_.first_reply(question_id)
    message = dict(fake_discord.messages[placeholder_id])
    stop = button(fake_discord, placeholder_id, "concierge:stop:")

    interaction_id = next(_ids)
    payload = click_payload(
        interaction_id,
        base.MANAGER,
        message,
        stop["custom_id"],
        guild_id=GUILD_ID,
        roles=[base.MANAGER_ROLE_ID],
        permissions=base.MANAGE_GUILD,
    )
    discord_.bot._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
    shown = await discord_.finished(placeholder_id)
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))

    assert [(c.session_id, c.user_id) for c in discord_.tap.cancels] == [
        (request.session_id, base.MANAGER["id"])
    ]
    assert [c.body["type"] for c in fake_discord.responses(interaction_id)] == [DEFERRED_UPDATE]
    assert shown.footer == "🛑 stopped"


async def test_a_running_answer_is_stopped_by_its_askers_click_and_not_by_a_strangers(
    settings: Settings, start_bot: StartBot, engine_for: StartEngine, fake_discord: FakeDiscord
) -> None:
    settings = settings.model_copy(update={"max_tokens": 400})
    await engine_for(settings)
    discord_ = await start_bot(settings)
    question_id = discord_.ask(ASKER, base.LONG_QUESTION)
    request = await discord_.tap.request_from(ASKER["id"])
    answer_id = await discord_.first_reply(question_id)
    await answering(discord_, answer_id)
    message = dict(fake_discord.messages[answer_id])
    stop = button(fake_discord, answer_id, "concierge:stop:")

    refusal = await told(fake_discord, click(discord_.bot, STRANGER, message, stop["custom_id"]))
    cancels_after_refusal = list(discord_.tap.cancels)
    click(discord_.bot, ASKER, message, stop["custom_id"])
    shown = await discord_.finished(answer_id)
    end = (await discord_.tap.ending(request.session_id))[-1]

    assert refusal.body["content"] == t("stop.not_allowed", "en")
    assert cancels_after_refusal == []
    assert [c.user_id for c in discord_.tap.cancels] == [ASKER["id"]]
    assert isinstance(end, Cancelled)
    assert 0 < end.tokens < 400
    assert shown.footer == "🛑 stopped"
    assert shown.text == end.text
    assert fake_discord.buttons(answer_id) == []


async def test_after_a_restart_the_old_messages_stop_button_still_stops_the_answer(
    restarted_mid_answer: Restarted, fake_discord: FakeDiscord
) -> None:
    harness, request = restarted_mid_answer.harness, restarted_mid_answer.request
    answer_id = restarted_mid_answer.answer_id
    message = dict(fake_discord.messages[answer_id])  # as the first process left it
    stop = button(fake_discord, answer_id, "concierge:stop:")
    client = harness.bot.concierge  # taken over (an event came): the click finds it here
    await harness.tap.until(lambda: client.sessions.get(request.session_id) is not None)

    clicked = click(harness.bot, ASKER, message, stop["custom_id"])
    shown = await harness.finished(answer_id)
    end = (await harness.tap.ending(request.session_id))[-1]
    await harness.tap.until(lambda: bool(harness.tap.cancels))

    assert stop["custom_id"] == stop_id(request.session_id, ASKER)
    assert [c.body["type"] for c in fake_discord.responses(clicked)] == [DEFERRED_UPDATE]
    assert [(c.session_id, c.user_id) for c in harness.tap.cancels] == [
        (request.session_id, ASKER["id"])
    ]
    assert isinstance(end, Cancelled)
    assert end.tokens < 400
    assert shown.message_ids[0] == answer_id
    assert shown.footer == "🛑 stopped"
    assert fake_discord.buttons(answer_id) == []


async def test_after_a_restart_a_queued_answers_button_withdraws_it_before_any_event_came(
    settings: Settings,
    named_bots: Callable[[], Awaitable[NamedBot]],
    engine_for: StartEngine,
    broker: Broker,
    fake_discord: FakeDiscord,
) -> None:
    """The new process knows nothing of the answer yet (it waits behind another): the
    button's own id says which session to cancel, and for whom."""
    await engine_for(settings.model_copy(update={"max_tokens": 400}))
    tap = await WireTap.open(broker, "discord-main")
    first = await named_bots()
    before = Harness(first.bot, fake_discord, tap)
    running_question = before.ask(STRANGER, base.LONG_QUESTION)
    running = await tap.request_from(STRANGER["id"])
    running_id = await before.first_reply(running_question)
    await answering(before, running_id)
    queued_question = before.ask(ASKER, "And what about dogs?")
    queued = await tap.request_from(ASKER["id"])
    queued_id = await before.first_reply(queued_question)
    await first.stop()
    second = await named_bots()
    after = Harness(second.bot, fake_discord, tap)
    unknown = second.bot.answers.find_session(queued.session_id) is None

    queued_message = dict(fake_discord.messages[queued_id])
    click(second.bot, ASKER, queued_message, stop_id(queued.session_id, ASKER))
    await tap.until(lambda: any(c.session_id == queued.session_id for c in tap.cancels))
    running_message = dict(fake_discord.messages[running_id])  # let the engine get to it
    click(second.bot, STRANGER, running_message, stop_id(running.session_id, STRANGER))
    shown = await after.finished(queued_id)
    events = await tap.ending(queued.session_id)

    assert unknown
    assert (tap.cancels[0].session_id, tap.cancels[0].user_id) == (queued.session_id, ASKER["id"])
    assert [type(event) for event in events] == [Cancelled]  # never started
    assert shown.message_ids == [queued_id]
    assert shown.footer == "🛑 stopped"
    assert fake_discord.buttons(queued_id) == []
