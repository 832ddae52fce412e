"""An answer in flight outlives the broker node its engine is connected to (#27 item 4).

The real model answers; the node the engine's connection is on is stopped (or killed) while it
answers; the asker, a named bot on another node (its reply queue a quorum queue, so it
survives), gets the whole answer, each token once, in ``seq`` order, and one terminal event.
To put the outage mid-answer for sure, the model's stream pauses after a few tokens until the
engine has lost its connection (``PausingBackend``): the rest is generated while the engine has
no broker, held (``engine.outbox``) and published after the reconnect. The pure tests below
check the outbox and the reply stream's holding without a broker.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Session, SessionRegistry
from broker.messages import Envelope
from broker.protocol import (
    TERMINAL_TYPES,
    Done,
    Failed,
    ReplyEvent,
    Started,
    TokenEvent,
)
from config.settings import Settings, load_settings
from engine.backends.base import Backend, ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.outbox import MERGED_MAX_CHARS, Outbox
from engine.replies import Replies
from tests.cluster_fixture import Cluster
from tests.conftest import LONG_QUESTION, start_engine
from tests.helpers import collect, streamed_is_final
from tests.test_cluster import cleaned, on_nodes, reconnected

WAIT_S = 60.0  # a leader election after a node goes takes a few seconds on busy cores
TOKENS_BEFORE = 8  # the model pauses after these, until the engine has lost its connection


class PausingBackend:
    """The real model, whose stream stops after ``after`` pieces until ``resume`` is set: a
    model slow at the right moment, so that the outage falls mid-answer."""

    def __init__(self, real: Backend, after: int) -> None:
        self.real = real
        self.after = after
        self.paused = threading.Event()
        self.resume = threading.Event()

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        pieces = self.real.stream(messages, should_stop, limits)
        count = 0
        while True:
            try:
                piece = next(pieces)
            except StopIteration as end:
                return end.value
            yield piece
            count += 1
            if count == self.after:
                self.paused.set()
                self.resume.wait(WAIT_S)

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.real.count_tokens(messages)

    async def health(self) -> dict[str, Any]:
        return await self.real.health()


class Seen:
    """Every event the bot's reply consumer gets, also after its session ended."""

    def __init__(self) -> None:
        self.events: list[ReplyEvent] = []
        self.tokens = 0
        self.tokens_before = asyncio.Event()  # the tokens from before the pause have come

    def recording(
        self, handler: Callable[[Envelope[ReplyEvent]], Awaitable[None]]
    ) -> Callable[[Envelope[ReplyEvent]], Awaitable[None]]:
        async def record(envelope: Envelope[ReplyEvent]) -> None:
            self.events.append(envelope.message)
            if isinstance(envelope.message, TokenEvent):
                self.tokens += envelope.message.tokens
            if self.tokens >= TOKENS_BEFORE:
                self.tokens_before.set()
            await handler(envelope)

        return record


def outage_settings(local: Cluster, tmp_path: Path) -> Settings:
    return load_settings(
        prefix=f"outage-{uuid.uuid4().hex[:12]}",
        broker_url=local.urls(1, 2, 3),  # the engine on node 1, the one that goes
        queue_type="quorum",
        request_ttl_s=120,
        max_tokens=48,
        temperature=0.0,
        answer_paragraphs=0,  # no early end at a blank line: tokens after the outage for sure
        kb_path=tmp_path / "empty-kb.sqlite3",
        feedback_path=tmp_path / "feedback.sqlite3",
        metrics_port=0,
    )


TRIES = 3  # the outage must fall mid-answer: a run where it did not is tried again
OUTAGE_RECONNECT_S = 4  # the engine's wait before reconnecting, in these tests only


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kill", [False, True], ids=["stopped", "killed"])
async def test_an_answer_outlives_the_node_its_engine_is_on(
    cluster: Cluster,
    backend: Backend,
    tmp_path: Path,
    kill: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tried again when the reconnect beat the model's first token after the outage (nothing
    was held, so the holding was not tested); fails when that happens ``TRIES`` times. The
    engine waits longer than its 1 s before reconnecting: a node killed beside the model on
    two cores (the others electing leaders) can hold the next token back for a second."""
    monkeypatch.setattr("broker.amqp.RECONNECT_INTERVAL_S", OUTAGE_RECONNECT_S)
    for _ in range(TRIES):
        session_id, events, seen, replies = await _answer_through_an_outage(
            cluster, backend, tmp_path, kill
        )
        _check_whole(session_id, events, seen)
        if replies.held > 0:  # the outage fell mid-answer: the rest was held, then sent
            assert replies.end_delivered
            return
    pytest.fail(f"in {TRIES} tries the engine never had to hold an event: untested")


async def _answer_through_an_outage(
    cluster: Cluster, backend: Backend, tmp_path: Path, kill: bool
) -> tuple[str, list[ReplyEvent], Seen, Replies]:
    """Ask; pause the model after ``TOKENS_BEFORE`` pieces; take node 1 (the engine's) away
    and let the model go on while the engine has no broker; the events the asker got, all the
    bot's consumer saw, and the answer's reply stream in the engine."""
    settings = outage_settings(cluster, tmp_path)
    model = PausingBackend(backend, TOKENS_BEFORE)
    async with cleaned(on_nodes(settings, cluster, 2)):
        engine = await start_engine(settings, model)  # type: ignore[arg-type]
        seen = Seen()
        bot = ConciergeClient(on_nodes(settings, cluster, 2, 3, 1), "test", bot_id="outage-bot")
        bot._on_reply = seen.recording(bot._on_reply)  # type: ignore[method-assign]
        await bot.start()
        try:
            broker = engine.worker.broker
            assert broker.connection.url.port == cluster.port(1)  # type: ignore[attr-defined]
            gone, back = asyncio.Event(), reconnected(broker)
            broker.connection.close_callbacks.add(lambda *_: gone.set())
            session = await bot.ask(Ask(LONG_QUESTION, "u1"))
            answered = asyncio.create_task(collect(session, WAIT_S))
            assert await asyncio.to_thread(model.paused.wait, WAIT_S), "the model never began"
            await asyncio.wait_for(seen.tokens_before.wait(), WAIT_S)
            async with cluster.node_going(1, kill=kill):
                await asyncio.wait_for(gone.wait(), WAIT_S)
                assert broker.events.channel.is_closed  # what the engine's publish sees
                model.resume.set()  # the model goes on while the engine has no broker
                events = await answered
                await asyncio.wait_for(back.wait(), WAIT_S)
            assert broker.connection.url.port != cluster.port(1)  # type: ignore[attr-defined]
            # The redelivered request is not answered twice: the next answer comes after it.
            following = await collect(await bot.ask(Ask("What is two plus two?", "u2")), WAIT_S)
            assert isinstance(following[-1], Done)
        finally:
            model.resume.set()
            await bot.close()
            await engine.stop()
    replies = engine.worker._answered[session.session_id]
    assert replies is not None
    return session.session_id, events, seen, replies


def _check_whole(session_id: str, events: list[ReplyEvent], seen: Seen) -> None:
    """The asker's answer is whole: each token once, in ``seq`` order, one terminal event."""
    assert isinstance(events[0], Started) and events[0].attempt == 1
    done = events[-1]
    assert isinstance(done, Done), done
    seqs = [event.seq for event in events]
    assert seqs == list(range(done.seq + 1))  # each once, in order, none missing
    assert streamed_is_final(events, done.text)  # the whole answer, each token once
    assert sum(event.tokens for event in events if isinstance(event, TokenEvent)) > TOKENS_BEFORE
    # An event whose confirmation was lost with the connection is published again: the queue
    # may then hold it twice, and the asker's session drops the second (its seq came already).
    raw = [e for e in seen.events if e.session_id == session_id]
    assert {event.seq for event in raw} == set(seqs)
    ends = [event for event in raw if event.type in TERMINAL_TYPES]
    assert ends and all(end == done for end in ends)  # one end, also after the redelivery


# --- without a broker ------------------------------------------------------------------------


def token(seq: int, text: str) -> TokenEvent:
    return TokenEvent(session_id="s" * 8, seq=seq, text=text, tokens=1)


def test_the_outbox_keeps_order_merges_tokens_and_stays_bounded() -> None:
    outbox = Outbox(max_events=3)
    assert outbox.merge_tokens("lost", 1) is None  # nothing held: an event of its own
    outbox.hold(Started(session_id="s" * 8, seq=0, waited_s=0.0))
    assert outbox.merge_tokens("x", 1) is None  # not after a started
    outbox.hold(token(1, "The"))
    merged = outbox.merge_tokens(" cat", 2)
    assert merged is not None and (merged.seq, merged.text, merged.tokens) == (1, "The cat", 3)
    assert outbox.merge_tokens("y" * MERGED_MAX_CHARS, 1) is None  # too big: a new event
    assert outbox.hold(token(2, "z"))
    assert not outbox.hold(token(3, "over"))  # full: dropped, counted
    done = Done(session_id="s" * 8, seq=3, text="The catz", tokens=4, ttft_s=0.1,
                tokens_per_s=1.0, elapsed_s=1.0)  # fmt: skip
    assert outbox.hold(done)  # a terminal event is always kept
    assert outbox.dropped == 1
    first = outbox.take()
    assert isinstance(first, Started)
    outbox.put_back(first)
    assert [outbox.take() for _ in range(4)] == [first, merged, token(2, "z"), done]
    assert outbox.take() is None


def test_a_session_drops_an_event_it_has_had_and_counts_again_from_a_new_attempt() -> None:
    sessions = SessionRegistry()
    session = Session("s" * 8, "u", 60.0)
    sessions.add(session)
    first = Started(session_id="s" * 8, seq=0, waited_s=0.0)
    for event in (first, token(1, "The"), token(1, "The"), token(2, " cat"), token(1, "The")):
        assert sessions.deliver(event)  # taken (and acknowledged), shown or not
    again = Started(session_id="s" * 8, seq=0, waited_s=0.0, attempt=2)
    assert sessions.deliver(again) and sessions.deliver(token(1, "A"))
    set_aside = Failed(session_id="s" * 8, seq=0, reason="set aside")  # after attempt 2
    assert sessions.deliver(set_aside)
    shown = [session.items.get_nowait() for _ in range(session.items.qsize())]
    assert shown == [first, token(1, "The"), token(2, " cat"), again, token(1, "A"), set_aside]
