"""The Discord adapter end to end: a bot restarted mid-answer finishes it in place."""

from __future__ import annotations

from broker.protocol import Cancelled, Done
from tests.discord_fixture import (
    ASKER,
    Restarted,
    engine_for,  # noqa: F401  # the fixture
    fake_discord,  # noqa: F401  # the fixture
    named_bots,  # noqa: F401  # the fixture
    restarted_mid_answer,  # noqa: F401  # the fixture
)
from tests.fake_discord import FakeDiscord


async def test_a_bot_restarted_mid_answer_finishes_it_in_the_same_message(
    restarted_mid_answer: Restarted,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
) -> None:
    harness, request = restarted_mid_answer.harness, restarted_mid_answer.request
    answer_id = restarted_mid_answer.answer_id
    shown = await harness.finished(answer_id)
    done = (await harness.tap.ending(request.session_id))[-1]

    assert not harness.tap.cancels  # the first process left the answer running
    assert request.context["message"] == str(answer_id)
    assert isinstance(done, Done)
    assert done.context == request.context  # echoed for the next process
    assert shown.message_ids[0] == answer_id  # the same message, edited
    assert shown.text == done.text  # continued in replies to it if it outgrew one message
    assert shown.footer == "✅ done"
    assert len(fake_discord.posts()) == len(shown.message_ids)  # nothing posted twice


async def test_after_a_restart_the_askers_stop_on_the_answer_still_stops_it(
    restarted_mid_answer: Restarted,  # noqa: F811  # the fixture imported above
) -> None:
    harness, request = restarted_mid_answer.harness, restarted_mid_answer.request
    answer_id = restarted_mid_answer.answer_id
    client = harness.bot.concierge
    await harness.tap.until(lambda: client.sessions.get(request.session_id) is not None)
    harness.react(ASKER, answer_id)
    shown = await harness.finished(answer_id)
    end = (await harness.tap.ending(request.session_id))[-1]

    assert [(c.session_id, c.user_id) for c in harness.tap.cancels] == [
        (request.session_id, ASKER["id"])
    ]
    assert isinstance(end, Cancelled)
    assert end.tokens < 400
    assert shown.text == end.text
    assert shown.footer == "🛑 stopped"
