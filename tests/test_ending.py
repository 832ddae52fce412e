"""How a generation ended, as its terminal event: ``ending_event`` alone, no model or broker."""

from __future__ import annotations

import pytest

from broker.protocol import Cancelled, Done, Failed
from engine.generation.ending import ending_event
from engine.generation.loop import Generation
from engine.replies import INTERRUPTED, EventHeader

HEADER = EventHeader(session_id="session-1234", seq=7, context={"channel": "C1"})


def generation(pieces: list[str], piece_times: list[float], finished_at: float) -> Generation:
    """A generation that started at 10.0 and yielded ``pieces`` at ``piece_times``."""
    return Generation(
        "session-1234",
        time_limit_at=100.0,
        pieces=pieces,
        piece_times=piece_times,
        started_at=10.0,
        finished_at=finished_at,
    )


def test_a_finished_generation_is_done_with_its_timings() -> None:
    finished = generation(["The", " answer", "."], [10.5, 10.75, 11.0], finished_at=11.0)
    finished.appendix = "\n\nSources: …"
    event = ending_event(finished, HEADER, cancel_received_at=None, time_limit_s=60)
    assert event == Done(
        **HEADER,
        text="The answer.\n\nSources: …",
        tokens=3,
        ttft_s=0.5,
        tokens_per_s=4.0,  # two tokens after the first, in half a second
        elapsed_s=1.0,
    )


def test_a_generation_with_no_token_is_done_without_rates() -> None:
    event = ending_event(generation([], [], 10.25), HEADER, cancel_received_at=None, time_limit_s=1)
    assert isinstance(event, Done)
    assert (event.tokens, event.ttft_s, event.tokens_per_s) == (0, None, None)
    assert event.elapsed_s == 0.25


def test_a_cancelled_generation_says_how_fast_it_stopped() -> None:
    stopped = generation(["a", "b", "c"], [10.1, 10.2, 10.3], finished_at=10.35)
    stopped.stopped_by_cancel = True
    event = ending_event(stopped, HEADER, cancel_received_at=10.25, time_limit_s=60)
    assert isinstance(event, Cancelled)
    assert (event.text, event.tokens, event.tokens_after_cancel) == ("abc", 3, 1)
    assert event.stop_latency_s == pytest.approx(0.1)
    assert event.seq == 7 and event.context == {"channel": "C1"}


def test_a_cancel_the_engine_never_received_has_no_stop_latency() -> None:
    stopped = generation(["a"], [10.1], finished_at=10.2)
    stopped.stopped_by_cancel = True  # its session's entry expired meanwhile
    event = ending_event(stopped, HEADER, cancel_received_at=None, time_limit_s=60)
    assert isinstance(event, Cancelled)
    assert (event.tokens_after_cancel, event.stop_latency_s) == (0, None)


def test_a_generation_out_of_time_fails_naming_the_limit_and_keeps_its_text() -> None:
    late = generation(["so", " far"], [10.1, 10.2], finished_at=10.3)
    late.stopped_by_time_limit = True
    event = ending_event(late, HEADER, cancel_received_at=None, time_limit_s=0.3)
    assert event == Failed(**HEADER, reason="time limit of 0.3 s reached", text="so far")


def test_an_abandoned_generation_fails_as_interrupted() -> None:
    abandoned = generation(["half"], [10.1], finished_at=10.2)
    abandoned.abandoned = True
    abandoned.stopped_by_cancel = True  # abandoned wins: the engine is going away
    event = ending_event(abandoned, HEADER, cancel_received_at=10.15, time_limit_s=60)
    assert event == Failed(**HEADER, reason=INTERRUPTED, text="half")
