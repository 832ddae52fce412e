"""Grounded answers through the real engine: the token cap, the loop guard and how answers end."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done, FinishReason
from config.settings import Settings
from engine.answering.closing import closed_fence, closing
from engine.answering.pipeline import Plan
from engine.answering.wording import WORDING
from engine.backends.base import Backend, ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.cancelled import CancelledSessions
from engine.generation.ending import ending_event
from engine.generation.loop import Generation, run_token_loop
from engine.generation.repetition import RepetitionDetector
from engine.knowledge.models import Passage
from engine.knowledge.store import NO_ARTICLES_MESSAGE
from engine.replies import EventHeader
from tests.conftest import LONG_QUESTION, start_engine
from tests.grounded_fixture import BASE, Replay, ask, replay

LOOP_SAMPLES = json.loads((Path(__file__).parent / "loop_samples.json").read_text())


# --- the token cap -------------------------------------------------------------------------


async def test_an_answer_at_the_token_cap_ends_as_length_and_says_so(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    capped = settings.model_copy(update={"max_tokens": 12})
    engine = await start_engine(capped, backend)
    async with ConciergeClient(capped, "test") as client:
        done, _ = await ask(client, LONG_QUESTION)
    await engine.stop()

    assert done.finish_reason == "length"
    assert done.tokens <= 12  # a piece is one token or more
    note = WORDING["en"].cut_length.format(max_tokens=12)
    assert f"\n\n{note}\n\n{NO_ARTICLES_MESSAGE}" in done.text


def test_the_real_backend_says_when_it_stopped_at_the_cap(backend: Backend) -> None:
    long, short = [ChatMessage("user", LONG_QUESTION)], [ChatMessage("user", "Say OK.")]

    at_cap = returned(backend.stream(long, lambda: False, GenerationLimits(max_tokens=5)))
    whole = returned(backend.stream(short, lambda: False, GenerationLimits(200, 0.0)))

    assert (at_cap, whole) == ("length", "stop")


def returned(pieces: Pieces) -> FinishReason | None:
    """What a stream returns once its pieces are taken: why the model stopped."""
    while True:
        try:
            next(pieces)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]  # StopIteration.value is Any


@pytest.mark.parametrize("name", ["last-ferry", "onsen-closing", "library-hours"])
def test_the_token_loop_stops_a_real_loop_and_drops_its_repeated_tail(name: str) -> None:
    pieces = LOOP_SAMPLES["loops"][name]  # the default model's own loop, 300 pieces of 512

    generation, emitted, backend = replay(pieces)

    loop = _first_loop(pieces)
    assert backend.taken == loop.stopped_at < len(pieces)  # nothing generated after it
    assert generation.finish_reason == "repetition" and generation.finished_naturally
    assert generation.answer == "".join(pieces[: loop.since])  # one copy, not the repeats
    assert emitted == pieces[: loop.stopped_at - 1]  # the piece that showed the loop is not sent


def test_an_answer_that_does_not_loop_runs_its_course() -> None:
    prose = LOOP_SAMPLES["clean"]["prose"]

    generation, emitted, _ = replay(prose)

    assert generation.finish_reason == "stop"
    assert generation.answer == "".join(prose) == "".join(emitted)


def test_an_answer_at_the_cap_is_length_even_from_a_backend_that_cannot_tell() -> None:
    class Silent(Replay):
        def stream(
            self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
        ) -> Pieces:
            yield from self.pieces[: limits.max_tokens]
            return None

    prose = LOOP_SAMPLES["clean"]["prose"]
    generation = Generation("s", time_limit_at=float("inf"))
    limits = GenerationLimits(max_tokens=20)
    run_token_loop(Silent(prose), [], generation, CancelledSessions(10, 60), print, limits)

    assert (generation.tokens, generation.finish_reason) == (20, "length")


def test_a_cut_answer_says_why_before_its_evidence() -> None:
    plan = Plan("not_on_site", "en", note=WORDING["en"].not_on_site)

    assert closing(plan, "stop", 512, answer="") == WORDING["en"].not_on_site
    cut = closing(Plan("model", "ja"), "repetition", 512, answer="…")
    assert cut == "\n\n" + WORDING["ja"].cut_repetition


def test_done_says_how_the_answer_ended_and_what_it_stood_on() -> None:
    ferry = Passage("Ferry timetable", f"{BASE}/ferry-timetable.html", "It leaves at 16:50.")
    cut = Generation("s", time_limit_at=100.0, pieces=["A", "B", "A", "B"], started_at=1.0)
    cut.finish_reason, cut.kept, cut.finished_at = "repetition", 2, 2.0
    header = EventHeader(session_id="session-1", seq=3, context={})

    grounded = ending_event(
        cut, header, cancel_received_at=None, time_limit_s=60, plan=Plan("model", "en", (ferry,))
    )
    honest = ending_event(
        Generation("s", time_limit_at=100.0, started_at=1.0, finished_at=1.0),
        header,
        cancel_received_at=None,
        time_limit_s=60,
        plan=Plan("not_on_site", "en", note=WORDING["en"].not_on_site),
    )

    assert isinstance(grounded, Done) and isinstance(honest, Done)
    assert (grounded.text, grounded.tokens, grounded.finish_reason) == ("AB", 4, "repetition")
    assert (grounded.sources, grounded.not_on_site) == ((ferry.url,), False)
    assert (honest.sources, honest.not_on_site, honest.finish_reason) == ((), True, "stop")


class _Found:
    def __init__(self, since: int, stopped_at: int) -> None:
        self.since = since
        self.stopped_at = stopped_at


def _first_loop(pieces: Sequence[str]) -> _Found:
    detector = RepetitionDetector()
    for count, piece in enumerate(pieces, start=1):
        loop = detector.feed(piece)
        if loop is not None:
            return _Found(loop.since, count)
    raise AssertionError("no loop in the sample")


def test_a_code_block_the_answer_left_open_is_closed_before_the_quote() -> None:
    cut = "Use copytree:\n```python\nimport shutil\nshutil.copytree(a, b)"
    assert closed_fence(cut) == "\n```"
    assert closed_fence(cut + "\n```\nDone.") == ""  # closed by the model itself
    assert closed_fence("~~~\ncode ``` inside\n") == "\n~~~"  # only its own kind closes it
    assert closed_fence("No code here.") == ""
