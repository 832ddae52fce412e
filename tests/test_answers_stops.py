"""The answer lifecycle: finding, refusing and stopping answers, in the asker's locale."""

from __future__ import annotations

import asyncio

from bots.answers import StopOutcome, warning
from bots.ask import Ask
from bots.client import ConciergeClient
from bots.renderer import Status, split_text
from broker.amqp import Broker
from broker.protocol import Cancelled, Done, Started, TokenEvent, new_session_id
from config.settings import Settings
from config.texts import t
from tests.answers_helpers import (
    ASKER,
    PLACE,
    QUESTION_ID,
    AdminCheck,
    RecordingStage,
    answers_for,
    cancels_until_marker,
    started,
    tap,  # noqa: F401  # the fixture
    unsaid,
)
from tests.helpers import WireTap

# --- finding an answer ------------------------------------------------------------------------


async def test_an_answer_is_found_by_its_question_its_placeholder_and_every_continuation(
    client: ConciergeClient,
    tap: WireTap,  # noqa: F811  # the fixture imported above
) -> None:
    answers = answers_for(client, max_chars=10)
    stage = RecordingStage()
    task = answers.start(Ask("Tell me a story.", ASKER, place=PLACE), stage, unsaid)
    answer = await started(answers, stage)
    session_id = answer.session.session_id
    text = "Once upon a time a cat travelled around the world."
    answer.session.items.put_nowait(TokenEvent(session_id=session_id, seq=1, text=text))
    await stage.until(lambda: len(stage.posted) == len(split_text(text, 10)) > 2)

    assert all(answers.find(message) is answer for message in [QUESTION_ID, *stage.posted])
    request = await tap.request_from(ASKER)
    assert request.context == PLACE | {
        "message": str(stage.posted[0]),
        "user": ASKER,
        "kind": "ask",
    }

    done = Done(
        session_id=session_id, seq=2, text=text, tokens=12, ttft_s=0, tokens_per_s=1, elapsed_s=1
    )
    answer.session.items.put_nowait(done)
    assert await task is Status.DONE
    assert all(answers.find(message) is None for message in [QUESTION_ID, *stage.posted])
    assert stage.ended_with == [stage.posted[0]]
    assert "".join(stage.shown[message].body for message in stage.posted) == text


async def test_a_refused_question_is_answered_with_the_reason_and_never_sent(
    settings: Settings, broker: Broker
) -> None:
    short = settings.model_copy(update={"max_question_chars": 10})
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    async with ConciergeClient(short, "test") as client:
        stage = RecordingStage()
        status = await answers_for(client).answer(Ask("x" * 11, ASKER, place=PLACE), stage, say)

    assert status is None
    assert said == ["⚠️ That question is too long (11 characters; the limit is 10)."]
    assert stage.posted == []
    assert await broker.request_queue_depth() == 0


# --- the stop rule ----------------------------------------------------------------------------


async def test_the_asker_stops_an_answer_a_stranger_does_not_and_the_cancel_goes_once(
    client: ConciergeClient,
    tap: WireTap,  # noqa: F811  # the fixture imported above
) -> None:
    answers = answers_for(client)
    stage = RecordingStage()
    task = answers.start(Ask("Tell me a story.", ASKER, place=PLACE), stage, unsaid)
    answer = await started(answers, stage)
    stranger, askers, admin = AdminCheck(False), AdminCheck(False), AdminCheck(True)

    assert not await answers.stop(stage.posted[0], "stranger", stranger)
    assert answer.stopped_by is None
    assert await answers.stop(QUESTION_ID, ASKER, askers)  # on the question
    assert not await answers.stop(stage.posted[0], "admin", admin)  # stopped already

    assert (stranger.calls, askers.calls, admin.calls) == (1, 0, 0)
    assert answer.stopped_by == ASKER
    assert await cancels_until_marker(client, tap) == [(answer.session.session_id, ASKER)]
    await stage.until(lambda: stage.shown[stage.posted[0]].footer == "🛑 stopping…")
    answer.session.items.put_nowait(Cancelled(session_id=answer.session.session_id, seq=1))
    assert await task is Status.STOPPED


async def test_an_admin_stops_anyones_answer_but_not_after_the_asker_did_meanwhile(
    client: ConciergeClient,
    tap: WireTap,  # noqa: F811  # the fixture imported above
) -> None:
    """Slack asks ``users.info`` whether someone is an admin: the asker's stop may land while
    that call is under way, and the cancel still goes only once."""
    answers = answers_for(client)
    first, second = RecordingStage(), RecordingStage(question=2)
    answers.start(Ask("First?", "someone", place=PLACE), first, unsaid)
    answer = await started(answers, first)
    answers.start(Ask("Second?", ASKER, place={"question": "2"}), second, unsaid)
    await second.until(lambda: second.posted)
    other = answers.find(2)
    assert other is not None
    other.session.items.put_nowait(Started(session_id=other.session.session_id, seq=0, waited_s=0))
    asked, answered = asyncio.Event(), asyncio.Event()

    async def admin_after_a_while() -> bool:
        asked.set()
        await answered.wait()
        return True

    async def admin_at_once() -> bool:
        return True

    assert await answers.stop(first.posted[0], "admin", admin_at_once)
    waiting = asyncio.create_task(answers.stop(2, "admin", admin_after_a_while))
    await asked.wait()
    assert await answers.stop(second.posted[0], ASKER, AdminCheck(False))
    answered.set()

    assert not await waiting
    assert await cancels_until_marker(client, tap) == [
        (answer.session.session_id, "admin"),
        (other.session.session_id, ASKER),
    ]
    await answers.close(grace_s=0)


async def test_a_stop_by_session_id_follows_the_same_rule_and_reaches_answers_not_shown_here(
    client: ConciergeClient,
    tap: WireTap,  # noqa: F811  # the fixture imported above
) -> None:
    """A Stop button names the session (and its asker, for after a restart)."""
    answers = answers_for(client)
    stage = RecordingStage()
    answers.start(Ask("Tell me a story.", ASKER, place=PLACE), stage, unsaid)
    answer = await started(answers, stage)
    session_id = answer.session.session_id
    stranger = AdminCheck(False)

    assert await answers.stop_session(session_id, "stranger", stranger) is StopOutcome.NOT_ALLOWED
    assert await answers.stop_session(session_id, ASKER, stranger) is StopOutcome.STOPPED
    assert await answers.stop_session(session_id, ASKER, stranger) is StopOutcome.ENDED
    # Asked before a restart and not taken over: stopped by id, if the asker (or an admin) asks.
    elsewhere = new_session_id()
    unknown = await answers.stop_session(elsewhere, ASKER, stranger)
    refused = await answers.stop_session(elsewhere, "stranger", stranger, asker=ASKER)
    by_admin = await answers.stop_session(elsewhere, "admin", AdminCheck(True), asker=ASKER)

    assert (unknown, refused, by_admin) == (
        StopOutcome.ENDED,
        StopOutcome.NOT_ALLOWED,
        StopOutcome.STOPPED,
    )
    assert stranger.calls == 2  # the asker is never asked whether they are an admin
    assert await cancels_until_marker(client, tap) == [(session_id, ASKER), (elsewhere, "admin")]
    await answers.close(grace_s=0)


async def test_an_askers_locale_sets_the_bots_texts_and_goes_with_the_request(
    client: ConciergeClient,
    tap: WireTap,  # noqa: F811  # the fixture imported above
) -> None:
    answers = answers_for(client)
    stage = RecordingStage()
    answers.start(Ask("営業時間を教えて", ASKER, place=PLACE, locale="ja"), stage, unsaid)
    await stage.until(lambda: stage.posted)
    request = await tap.request_from(ASKER)

    first = stage.shown[stage.posted[0]]
    assert first.footer.startswith("⏳ 順番待ち") and first.status is Status.QUEUED
    assert (stage.session_id, stage.locale) == (request.session_id, "ja")
    assert request.locale == "ja" and request.context["locale"] == "ja"
    await answers.close(grace_s=0)


async def test_a_refusal_is_told_in_the_askers_locale(settings: Settings) -> None:
    short = settings.model_copy(update={"max_question_chars": 10})
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    async with ConciergeClient(short, "test") as client:
        await answers_for(client).answer(
            Ask("x" * 11, ASKER, place=PLACE, locale="ja"), RecordingStage(), say
        )

    assert said == [warning(t("refusal.too_long", "ja", length=11, limit=10), "ja")]
