"""The answer lifecycle every adapter shares (bots/answers.py), on a platform kept in memory.

``RecordingStage`` is the adapter's half (numbered messages, what was posted, edited, ended);
the client, the broker and the sessions are the real ones. What went over the wire is read by
a tap beside the bot's queues. Where no engine runs, a test plays the engine by putting reply
events on the session, as the client would on their arrival.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Mapping

import pytest

from bots.answers import SHUTDOWN_USER, Answer, Answers, StopOutcome, warning
from bots.ask import Ask
from bots.client import ConciergeClient
from bots.renderer import MessageContent, Status, split_text
from bots.session import Session
from broker.amqp import Broker
from broker.protocol import Cancelled, Done, Started, TokenEvent, new_session_id
from config.settings import Settings
from config.texts import t
from engine.backends.base import Backend
from tests.conftest import start_engine
from tests.helpers import WireTap

QUESTION_ID = 1  # the platform's id of the asking message
PLACE = {"channel": "c1", "question": str(QUESTION_ID)}
ASKER = "asker"

_message_ids = itertools.count(1000)


class RecordingStage:
    """A platform in memory: each posted message gets the next number."""

    def __init__(self, question: int | None = QUESTION_ID) -> None:
        self.question = question
        self.on_post: Callable[[int], None] = lambda _: None
        self.shown: dict[int, MessageContent] = {}
        self.posted: list[int] = []
        self.ended_with: list[int | None] = []
        self.on_edit: Callable[[int], None] = lambda _: None
        self._changed = asyncio.Event()

    def key(self, message: int) -> int:
        return message

    def place(self, placeholder: int) -> dict[str, str]:
        return {"message": str(placeholder)}

    async def post(self, content: MessageContent, after: int | None) -> int:
        message = next(_message_ids)
        self.on_post(message)
        self.posted.append(message)
        self.shown[message] = content
        self._changed.set()
        return message

    async def edit(self, handle: int, content: MessageContent) -> None:
        self.on_edit(handle)
        self.shown[handle] = content
        self._changed.set()

    async def ended(self, first: int | None) -> None:
        self.ended_with.append(first)
        self._changed.set()

    async def until(self, condition: Callable[[], object], timeout_s: float = 60.0) -> None:
        """Wait until ``condition`` holds, checking after each change."""
        async with asyncio.timeout(timeout_s):
            while not condition():
                self._changed.clear()
                await self._changed.wait()


class AdminCheck:
    """An adapter's admin check that counts how often it was asked."""

    def __init__(self, admin: bool) -> None:
        self.admin = admin
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.admin


def no_resume(context: Mapping[str, str]) -> None:
    return None


def answers_for(
    client: ConciergeClient,
    *,
    resume: Callable[[Mapping[str, str]], tuple[RecordingStage, int] | None] = no_resume,
    max_chars: int = 2000,
) -> Answers[int]:
    return Answers[int](client, resume=resume, max_chars=max_chars, edit_interval_s=0.0)


async def unsaid(text: str) -> None:
    raise AssertionError(f"the asker was told {text!r}")


async def started(answers: Answers[int], stage: RecordingStage) -> Answer:
    """The answer once its placeholder is up, with the engine's start given to it."""
    await stage.until(lambda: stage.posted)
    answer = answers.find(QUESTION_ID)
    assert answer is not None
    answer.session.items.put_nowait(
        Started(session_id=answer.session.session_id, seq=0, waited_s=0)
    )
    await stage.until(lambda: "answering" in stage.shown[stage.posted[0]].footer)
    return answer


async def cancels_until_marker(client: ConciergeClient, tap: WireTap) -> list[tuple[str, str]]:
    """Every cancel sent so far, as (session, user): a marker cancel goes last on the same
    channel, so once it arrives, nothing sent before it is still on its way."""
    marker = Session(new_session_id(), "marker", 1.0)
    await client.cancel(marker, "marker")
    await tap.until(lambda: any(cancel.user_id == "marker" for cancel in tap.cancels))
    return [(c.session_id, c.user_id) for c in tap.cancels if c.user_id != "marker"]


@pytest.fixture
async def tap(broker: Broker, client: ConciergeClient) -> AsyncIterator[WireTap]:
    watching = await WireTap.open(broker, client.bot_id)
    yield watching
    await watching.channel.close()


# --- finding an answer ------------------------------------------------------------------------


async def test_an_answer_is_found_by_its_question_its_placeholder_and_every_continuation(
    client: ConciergeClient, tap: WireTap
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
    client: ConciergeClient, tap: WireTap
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
    client: ConciergeClient, tap: WireTap
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
    client: ConciergeClient, tap: WireTap
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
    client: ConciergeClient, tap: WireTap
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


# --- close ------------------------------------------------------------------------------------


async def test_closing_stops_each_answer_once_and_ends_those_that_do_not_finish_in_time(
    client: ConciergeClient, tap: WireTap
) -> None:
    answers = answers_for(client)
    queued = [RecordingStage(question=None) for _ in range(2)]
    waiting = [
        answers.start(Ask(f"Question {n}?", f"u{n}"), stage, unsaid)
        for n, stage in enumerate(queued)
    ]
    for stage in queued:
        await stage.until(lambda stage=stage: stage.posted)
    streaming = RecordingStage()
    left_streaming = answers.start(Ask("A story?", ASKER, place=PLACE), streaming, unsaid)
    answer = await started(answers, streaming)
    assert await answers.stop(QUESTION_ID, ASKER, AdminCheck(False))
    sessions = [answers.find(stage.posted[0]) for stage in queued]

    await answers.close(grace_s=0.5)  # the stopped one's end never comes: no engine runs

    assert [await task for task in waiting] == [Status.STOPPED, Status.STOPPED]
    assert left_streaming.cancelled()
    cancels = await cancels_until_marker(client, tap)
    assert sorted(cancels) == sorted(
        [(answer.session.session_id, ASKER)]
        + [(found.session.session_id, SHUTDOWN_USER) for found in sessions if found is not None]
    )
    assert len(cancels) == 3
    assert [stage.ended_with for stage in queued] == [[stage.posted[0]] for stage in queued]


async def test_a_named_bot_closing_leaves_its_answers_to_the_next_process(
    settings: Settings, broker: Broker
) -> None:
    named = settings.model_copy(update={"bot_name": "answers-named"})
    try:
        async with ConciergeClient(named, "test") as client:
            tap = await WireTap.open(broker, client.bot_id)
            answers = answers_for(client)
            stage = RecordingStage()
            task = answers.start(Ask("Tell me a story.", ASKER, place=PLACE), stage, unsaid)
            answer = await started(answers, stage)
            await answers.close()

            assert await task is Status.DETACHED
            assert await cancels_until_marker(client, tap) == []
            assert answer.stopped_by is None
            assert stage.ended_with == []  # its message is left as it is, for the successor
            assert "answering" in stage.shown[stage.posted[0]].footer
            await tap.channel.close()
    finally:
        await broker.delete_reply_queue("answers-named")


# --- the take-over after a restart ------------------------------------------------------------


async def test_the_next_process_of_a_named_bot_finishes_an_answer_in_its_first_message(
    settings: Settings, broker: Broker, backend: Backend
) -> None:
    """The first process leaves while its question waits; the engine starts only then (without
    its startup purge), and the second process, told of the answer by its first event, shows
    it in the first one's message (``resume`` reads the request's context)."""
    named = settings.model_copy(update={"bot_name": "answers-restart", "purge_on_start": False})
    tap = await WireTap.open(broker, "answers-restart")
    engine = None
    try:
        async with ConciergeClient(named, "test") as first_process:
            before, leaving = RecordingStage(), answers_for(first_process)
            leaving.start(Ask("Say hello.", ASKER, place=PLACE), before, unsaid)
            request = await tap.request_from(ASKER)  # sent, naming the placeholder
            await leaving.close()
        first = before.posted[0]

        contexts: list[dict[str, str]] = []
        after = RecordingStage()

        def resume(context: Mapping[str, str]) -> tuple[RecordingStage, int] | None:
            contexts.append(dict(context))
            after.question = int(context["question"])
            return after, int(context["message"])

        second_process = ConciergeClient(named, "test")
        answers = answers_for(second_process, resume=resume)  # before replies flow, as adapters do
        found: list[tuple[Answer | None, Answer | None]] = []
        after.on_edit = lambda _: found.append((answers.find(QUESTION_ID), answers.find(first)))
        async with second_process:
            engine = await start_engine(named, backend)
            await after.until(lambda: after.ended_with)
        events = await tap.ending(request.session_id)
    finally:
        if engine is not None:
            await engine.stop()
        await tap.channel.close()
        await broker.delete_reply_queue("answers-restart")

    done = events[-1]
    assert isinstance(done, Done)
    assert before.shown[first].footer.startswith("⏳ queued")  # as the first process left it
    assert contexts == [PLACE | {"message": str(first)}]
    assert after.posted == []  # nothing posted twice
    assert after.shown[first] == MessageContent(done.text, "✅ done")
    assert after.ended_with == [first]
    question_found, first_found = found[0]  # while it was shown: a stop on either finds it
    assert question_found is not None and first_found is question_found
    assert answers.find(first) is None and answers.find(QUESTION_ID) is None  # once shown
