"""The shared renderer: throttled edits, exact text across splits, visible end states.

A recording sink stands in for a platform (it is the adapter's half of the contract); the
events are real protocol models put on a real session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots.renderer import MessageContent, Renderer, Status, split_text
from bots.session import Detached, Session, StopRequested
from broker.protocol import (
    Cancelled,
    Done,
    Expired,
    Failed,
    Started,
    TokenEvent,
    make_request,
)

SESSION_ID = "abcdef0123456789"


class RecordingSink:
    """Keeps every message's current content, what each showed when posted, and the time of
    every call."""

    def __init__(self) -> None:
        self.messages: list[MessageContent] = []
        self.posted: list[MessageContent] = []
        self.calls: list[tuple[str, float]] = []
        self.replied_to: list[Any] = []

    async def post(self, content: MessageContent, after: Any | None) -> int:
        self.messages.append(content)
        self.posted.append(content)
        self.replied_to.append(after)
        self.calls.append(("post", time.monotonic()))
        return len(self.messages) - 1

    async def edit(self, handle: int, content: MessageContent) -> None:
        self.messages[handle] = content
        self.calls.append(("edit", time.monotonic()))

    def text(self) -> str:
        return "".join(message.body for message in self.messages)


def new_session(timeout_s: float = 5.0) -> Session:
    request = make_request(reply_to="bot", user_id="u", question="q", ttl_s=30)
    request = request.model_copy(update={"session_id": SESSION_ID})
    return Session.for_request(request, timeout_s=timeout_s)


def feed_answer(session: Session, pieces: list[str]) -> str:
    session.items.put_nowait(Started(session_id=SESSION_ID, seq=0, waited_s=0))
    for seq, piece in enumerate(pieces, start=1):
        session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=seq, text=piece))
    text = "".join(pieces)
    session.items.put_nowait(
        Done(
            session_id=SESSION_ID,
            seq=len(pieces) + 1,
            text=text,
            tokens=len(pieces),
            ttft_s=0.1,
            tokens_per_s=10,
            elapsed_s=1,
        )
    )
    return text


@given(st.text(max_size=3000), st.integers(min_value=5, max_value=500))
def test_split_text_keeps_every_character_within_the_limit(text: str, limit: int) -> None:
    pieces = split_text(text, limit)
    assert "".join(pieces) == text
    assert all(len(piece) <= limit for piece in pieces)
    assert all(pieces[:-1])


@given(st.text(min_size=1, max_size=2000), st.integers(min_value=5, max_value=300))
def test_earlier_pieces_never_change_as_the_text_grows(text: str, limit: int) -> None:
    final = split_text(text, limit)
    for end in range(0, len(text), 37):
        partial = split_text(text[:end], limit)
        assert partial[:-1] == final[: len(partial) - 1]


async def test_edits_are_throttled_and_the_final_text_is_exact() -> None:
    sink = RecordingSink()
    session = new_session()
    interval = 0.05
    renderer = Renderer(sink, max_chars=2000, edit_interval_s=interval)
    pieces = [f"word{n} " for n in range(100)]

    async def produce() -> None:  # tokens arrive over time, as from the engine
        session.items.put_nowait(Started(session_id=SESSION_ID, seq=0, waited_s=0))
        for seq, piece in enumerate(pieces, start=1):
            await asyncio.sleep(0.002)
            session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=seq, text=piece))
        text = "".join(pieces)
        session.items.put_nowait(
            Done(
                session_id=SESSION_ID,
                seq=101,
                text=text,
                tokens=100,
                ttft_s=0.1,
                tokens_per_s=10,
                elapsed_s=1,
            )
        )

    producer = asyncio.create_task(produce())
    status = await renderer.run(session)
    await producer
    assert status is Status.DONE
    assert sink.text() == "".join(pieces)
    assert sink.messages[-1].footer == "✅ done"
    times = [at for _, at in sink.calls]
    assert len(times) >= 4  # the placeholder, edits while streaming, the final edit
    assert len(times) < len(pieces) / 2
    # an edit per token would be 2 ms apart; the renderer's clock and the sink's differ by a
    # scheduling step, so a gap may fall a hair short of the interval (seen in CI)
    assert all(later - earlier >= 0.8 * interval for earlier, later in pairwise(times[:-1]))


async def test_a_long_answer_continues_in_chained_messages_with_exact_text() -> None:
    sink = RecordingSink()
    session = new_session()
    renderer = Renderer(sink, max_chars=100, edit_interval_s=0)
    pieces = ["日本語のテキスト🙂 ", "`code` ", "@everyone ", "שלום ", "e\u0301 "] * 40
    text = feed_answer(session, pieces)
    await renderer.run(session)
    assert sink.text() == text
    assert len(sink.messages) == len(split_text(text, 100)) > 1
    assert all(len(message.body) <= 100 for message in sink.messages)
    assert sink.replied_to == [None, *range(len(sink.messages) - 1)]
    assert [bool(message.footer) for message in sink.messages] == [False] * (
        len(sink.messages) - 1
    ) + [True]


async def test_a_request_stopped_while_queued_shows_stopped_at_once() -> None:
    sink = RecordingSink()
    session = new_session()
    session.queued_ahead = 3
    session.items.put_nowait(StopRequested("u"))
    status = await Renderer(sink, max_chars=100, edit_interval_s=0).run(session)
    assert sink.calls[0][0] == "post"
    assert status is Status.STOPPED  # stopped while queued: shown at once
    assert sink.messages[0].footer == "🛑 stopped"


@pytest.mark.parametrize(
    ("ahead", "footer"), [(3, "⏳ queued · 3 ahead"), (0, "⏳ queued · next up")]
)
async def test_queued_footer_names_the_queue_position(ahead: int, footer: str) -> None:
    sink = RecordingSink()
    session = new_session()
    session.queued_ahead = ahead
    text = feed_answer(session, ["Paris."])
    status = await Renderer(sink, max_chars=100, edit_interval_s=0).run(session)
    assert [kind for kind, _ in sink.calls][:1] == ["post"]
    assert sink.posted[0] == MessageContent("", footer)  # the placeholder, before any event
    assert status is Status.DONE
    assert sink.messages == [MessageContent(text, "✅ done")]


async def test_no_reply_within_the_timeout_shows_timed_out() -> None:
    sink = RecordingSink()
    session = new_session(timeout_s=0.01)
    status = await Renderer(sink, max_chars=100, edit_interval_s=0).run(session)
    assert status is Status.TIMED_OUT
    assert sink.messages[0].footer == "⏱️ timed out: no reply from the engine"


def stop_asked_after_a_token() -> tuple[RecordingSink, Session, Renderer]:
    """A session that has begun ("Once upon") and whose asker has pressed stop."""
    sink = RecordingSink()
    session = new_session()
    session.items.put_nowait(Started(session_id=SESSION_ID, seq=0, waited_s=0))
    session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=1, text="Once upon"))
    session.items.put_nowait(StopRequested("u"))
    return sink, session, Renderer(sink, max_chars=100, edit_interval_s=0)


async def test_a_stop_the_engine_confirms_at_once_shows_stopped_in_one_edit() -> None:
    """The engine's confirmation comes before the edit slot: no "stopping…" edit, one edit
    that says "stopped" (a platform's rate limit would delay the second by a slot or two)."""
    sink, session, renderer = stop_asked_after_a_token()
    session.items.put_nowait(Cancelled(session_id=SESSION_ID, seq=2, text="Once upon", tokens=1))
    footers = _noting_footers(sink)

    status = await renderer.run(session)

    assert status is Status.STOPPED
    assert "🛑 stopping…" not in footers
    assert footers[-1] == "🛑 stopped"
    assert sink.text() == "Once upon"


async def test_a_slow_confirmation_shows_stopping_then_stopped_keeping_the_text() -> None:
    sink, session, renderer = stop_asked_after_a_token()
    stopping_shown = asyncio.Event()
    footers = _noting_footers(sink, lambda footer: footer == "🛑 stopping…", stopping_shown)
    following = asyncio.create_task(renderer.run(session))
    await asyncio.wait_for(stopping_shown.wait(), 10)  # once STOP_CONFIRM_WAIT_S has passed
    assert not following.done() and footers[-1] == "🛑 stopping…"
    session.items.put_nowait(Cancelled(session_id=SESSION_ID, seq=2, text="Once upon", tokens=1))

    assert await following is Status.STOPPED
    assert sink.text() == "Once upon"
    assert sink.messages[-1].footer == "🛑 stopped"


def _noting_footers(
    sink: RecordingSink,
    awaited: Callable[[str], bool] = lambda _: False,
    seen: asyncio.Event | None = None,
) -> list[str]:
    """The footer of every edit ``sink`` makes, in order; ``seen`` is set at an ``awaited`` one."""
    footers: list[str] = []
    original_edit = sink.edit

    async def edit_and_note(handle: int, content: MessageContent) -> None:
        footers.append(content.footer)
        await original_edit(handle, content)
        if seen is not None and awaited(content.footer):
            seen.set()

    sink.edit = edit_and_note  # type: ignore[method-assign]
    return footers


async def test_expiry_is_visible() -> None:
    sink = RecordingSink()
    session = new_session()
    session.items.put_nowait(Expired(session_id=SESSION_ID, seq=0, reason="waited too long"))
    status = await Renderer(sink, max_chars=100, edit_interval_s=0).run(session)
    assert status is Status.EXPIRED
    assert sink.messages[-1].footer == "⌛ expired: waited too long"


async def test_a_failing_edit_is_retried_and_nothing_is_lost() -> None:
    sink = RecordingSink()
    failures = [RuntimeError("HTTP 500")]
    original_edit = sink.edit

    async def flaky_edit(handle: int, content: MessageContent) -> None:
        if failures:
            raise failures.pop()
        await original_edit(handle, content)

    sink.edit = flaky_edit  # type: ignore[method-assign]
    session = new_session()
    text = feed_answer(session, ["a ", "b ", "c"])
    await Renderer(sink, max_chars=100, edit_interval_s=0).run(session)
    assert not failures
    assert sink.text() == text


SHOWN_BEFORE_RESTART = MessageContent("Once upon a time", "✍️ answering… (🛑 to stop)")


def taken_over() -> tuple[RecordingSink, Session, Renderer]:
    """A renderer taking over message 0, which a process before a restart was streaming into."""
    sink = RecordingSink()
    sink.messages.append(SHOWN_BEFORE_RESTART)
    renderer = Renderer(sink, max_chars=2000, edit_interval_s=0.0)
    renderer.adopt(0)
    return sink, new_session(), renderer


async def test_a_taken_over_message_is_left_alone_until_the_whole_text_comes() -> None:
    """After a restart the text already shown is unknown: tokens (a suffix of it) and a stop
    must not overwrite it; the terminal event's whole text does."""
    sink, session, renderer = taken_over()
    session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=7, text=" there"))
    session.items.put_nowait(StopRequested("u"))
    session.items.put_nowait(
        Cancelled(session_id=SESSION_ID, seq=9, text="Once upon a time there was", tokens=9)
    )

    status = await renderer.follow(session)

    assert status is Status.STOPPED
    assert [kind for kind, _ in sink.calls] == ["edit"]  # only the final one
    assert sink.messages == [MessageContent("Once upon a time there was", "🛑 stopped")]


async def test_a_detached_session_ends_without_a_final_edit() -> None:
    """The bot process is leaving: its successor finishes the message, so the text received
    but not shown yet (edits are throttled) is not edited in now."""
    sink = RecordingSink()
    session = new_session()
    renderer = Renderer(sink, max_chars=2000, edit_interval_s=60.0)
    session.items.put_nowait(Started(session_id=SESSION_ID, seq=0, waited_s=0))
    session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=1, text="Hello"))
    session.items.put_nowait(Detached())

    status = await renderer.run(session)

    assert status is Status.DETACHED
    assert [kind for kind, _ in sink.calls] == ["post"]  # the placeholder, nothing after it
    assert sink.messages == [MessageContent("", "⏳ queued · next up")]


async def test_a_taken_over_answer_that_ends_without_text_says_so_below_it() -> None:
    """After a restart the engine may report a failure with no text (it died too): the text
    the message shows is unknown, so it stays, and the end is said in a message after it."""
    sink, session, renderer = taken_over()
    session.items.put_nowait(Failed(session_id=SESSION_ID, seq=0, reason="interrupted"))

    status = await renderer.follow(session)

    assert status is Status.FAILED
    assert [kind for kind, _ in sink.calls] == ["post"]
    assert sink.messages == [SHOWN_BEFORE_RESTART, MessageContent("", "⚠️ error: interrupted")]
    assert sink.replied_to == [0]


async def test_a_refused_request_says_why_in_its_placeholder() -> None:
    sink = RecordingSink()
    renderer = Renderer(sink, max_chars=2000, edit_interval_s=0.0)
    assert await renderer.start(new_session()) == 0
    await renderer.refuse("I'm busy right now.")
    assert sink.messages == [MessageContent("", "⚠️ I'm busy right now.")]
