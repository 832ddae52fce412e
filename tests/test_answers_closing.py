"""The answer lifecycle: closing an adapter, and the next process finishing its answers."""

from __future__ import annotations

from collections.abc import Mapping

from bots.answers import SHUTDOWN_USER, Answer
from bots.ask import Ask
from bots.client import ConciergeClient
from bots.renderer import MessageContent, Status
from broker.amqp import Broker
from broker.protocol import Done
from config.settings import Settings
from engine.backends.base import Backend
from tests import answers_helpers
from tests.answers_helpers import (
    ASKER,
    PLACE,
    QUESTION_ID,
    AdminCheck,
    RecordingStage,
    answers_for,
    cancels_until_marker,
    started,
    unsaid,
)
from tests.conftest import start_engine
from tests.helpers import WireTap

tap = answers_helpers.tap  # the fixture

# --- close ------------------------------------------------------------------------------------


async def test_closing_stops_each_answer_once_and_ends_those_that_do_not_finish_in_time(
    client: ConciergeClient,
    tap: WireTap,
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
