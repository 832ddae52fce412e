"""Votes on answers: the feedback database on its own, then a vote's whole way through the real
broker and engine into the database and ``/metrics`` (given, changed, withdrawn; on an unknown
answer; malformed, with the engine answering on)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import ERROR_HEADER, Done, Feedback, encode
from config.settings import Settings
from engine.backends.base import Backend
from engine.feedback.store import (
    NO_VOTES,
    AnswerRecord,
    ArticleVotes,
    FeedbackStore,
    Vote,
    read_report,
)
from engine.knowledge.scrape.builder import build_kb
from engine.metrics import MetricsServer
from tests.conftest import RunningEngine, start_engine
from tests.grounded_fixture import BASE, site_articles
from tests.helpers import collect
from tests.test_metrics import Samples, scrape

FERRY = f"{BASE}/ferry-timetable.html"
ONSEN = f"{BASE}/onsen.html"
WAIT_S = 30.0

# --- the database alone ---------------------------------------------------------------------


def answer(session_id: str, outcome: str = "done", *sources: str) -> AnswerRecord:
    return AnswerRecord(session_id, outcome, sources, "discord", time.time())


def test_one_vote_per_person_changed_and_withdrawn(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.sqlite3")
    store.record_answer(answer("answer-1", "done", FERRY, ONSEN))

    store.vote("answer-1", "u1", "up", "discord", 1.0)
    assert store.totals().by_outcome == {("up", "done"): 1}
    assert store.totals().by_article == {(FERRY, "up"): 1, (ONSEN, "up"): 1}

    store.vote("answer-1", "u1", "down", "discord", 2.0)  # changed, not added
    store.vote("answer-1", "u2", "down", "slack", 3.0)
    assert store.totals().by_outcome == {("down", "done"): 2}
    assert store.totals().by_article == {(FERRY, "down"): 2, (ONSEN, "down"): 2}

    store.vote("answer-1", "u1", "none", "discord", 4.0)  # withdrawn
    store.vote("answer-1", "u3", "none", "discord", 4.0)  # nothing to withdraw: no error
    assert store.totals().by_outcome == {("down", "done"): 1}
    store.close()


def test_a_vote_on_an_answer_the_file_never_saw_is_kept_as_unknown(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.sqlite3")
    store.vote("never-recorded", "u1", "down", "slack", 1.0)
    assert store.totals().by_outcome == {("down", "unknown"): 1}
    assert store.totals().by_article == {}
    store.close()


def test_the_first_end_of_an_answer_counts(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.sqlite3")
    store.record_answer(answer("answer-1", "cancelled"))
    store.record_answer(answer("answer-1", "failed", FERRY))  # a redelivery ends it again
    store.vote("answer-1", "u1", "down", "discord", 1.0)
    assert store.totals().by_outcome == {("down", "cancelled"): 1}
    assert store.totals().by_article == {}
    store.close()


def test_only_the_latest_answers_are_kept_with_their_votes(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.sqlite3", max_answers=3)
    for n in range(5):
        store.record_answer(answer(f"answer-{n}", "done", f"{BASE}/{n}.html"))
        store.vote(f"answer-{n}", "u1", "down", "discord", float(n))

    assert store.totals().by_outcome == {("down", "done"): 3}
    kept = {url for url, _ in store.totals().by_article}
    assert kept == {f"{BASE}/{n}.html" for n in (2, 3, 4)}
    store.close()


def test_the_file_is_made_by_the_first_write_and_never_by_a_reader(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "feedback.sqlite3"
    store = FeedbackStore(path)
    assert store.totals() == NO_VOTES
    assert read_report(path) is None
    assert not path.exists()

    store.record_answer(answer("answer-1", "done", FERRY))
    report = read_report(path)
    assert report is not None and (report.votes, report.most_downvoted) == (0, [])
    store.close()


def test_the_most_downvoted_articles_come_first(tmp_path: Path) -> None:
    path = tmp_path / "feedback.sqlite3"
    store = FeedbackStore(path)
    store.record_answer(answer("a1", "done", FERRY))
    store.record_answer(answer("a2", "done", FERRY, ONSEN))
    store.record_answer(answer("a3", "done", ONSEN))
    store.record_answer(answer("a4", "done", FERRY))  # cited, never voted on
    given: list[tuple[str, str, Vote]] = [
        ("a1", "u1", "down"),
        ("a1", "u2", "down"),
        ("a2", "u1", "up"),
        ("a3", "u1", "down"),
        ("a3", "u2", "up"),
    ]
    for session_id, user_id, vote in given:
        store.vote(session_id, user_id, vote, "discord", 1.0)
    store.close()

    report = read_report(path)
    assert report is not None and report.votes == 5
    assert report.most_downvoted == [
        ArticleVotes(FERRY, down=2, up=1, answers=3),
        ArticleVotes(ONSEN, down=1, up=2, answers=2),
    ]


# --- through the broker and the engine --------------------------------------------------------


@dataclass
class Voting:
    settings: Settings
    engine: RunningEngine
    client: ConciergeClient
    broker: Broker
    metrics: MetricsServer

    async def vote(self, session_id: str, user_id: str, vote: str) -> None:
        feedback = Feedback.model_validate(
            {
                "session_id": session_id,
                "user_id": user_id,
                "vote": vote,
                "platform": "discord",
                "sent_at": time.time(),
            }
        )
        await self.broker.send_feedback(feedback)

    async def metrics_until(self, shows: Callable[[Samples], bool]) -> Samples:
        """Scrape ``/metrics`` until it shows what ``shows`` expects, as Prometheus would: the
        engine tells nobody else that it stored a vote (it sends no reply to a vote)."""
        async with asyncio.timeout(WAIT_S):
            while not shows(samples := await scrape(self.metrics)):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        return samples


def votes(samples: Samples, vote: str, outcome: str) -> float:
    key = ("concierge_feedback_votes", frozenset({("vote", vote), ("outcome", outcome)}))
    return samples[key]


def article_votes(samples: Samples) -> dict[tuple[str, str], float]:
    return {
        (dict(labels)["article"], dict(labels)["vote"]): value
        for (name, labels), value in samples.items()
        if name == "concierge_feedback_article_votes"
    }


@pytest.fixture
async def voting(
    settings: Settings, backend: Backend, broker: Broker, tmp_path: Path
) -> AsyncIterator[Voting]:
    """An engine whose knowledge base holds the test site, with its feedback file in
    ``tmp_path`` and its metrics server on a free port."""
    settings = settings.model_copy(update={"feedback_path": tmp_path / "feedback.sqlite3"})
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    engine = await start_engine(settings, backend)
    async with (
        MetricsServer(engine.worker.metrics, "127.0.0.1", 0) as metrics,
        ConciergeClient(settings, "test") as client,
    ):
        yield Voting(settings, engine, client, broker, metrics)
    await engine.stop()


async def test_a_vote_given_changed_and_withdrawn_shows_in_the_database_and_metrics(
    voting: Voting,
) -> None:
    done = (await collect(await voting.client.ask(Ask("When does the last ferry leave?", "u1"))))[
        -1
    ]
    assert isinstance(done, Done) and done.sources == (FERRY,)
    before = await scrape(voting.metrics)
    assert votes(before, "up", "done") == votes(before, "down", "done") == 0
    assert article_votes(before) == {}

    await voting.vote(done.session_id, "u1", "up")
    given = await voting.metrics_until(lambda now: votes(now, "up", "done") == 1)
    assert article_votes(given) == {(FERRY, "up"): 1}

    await voting.vote(done.session_id, "u1", "down")
    changed = await voting.metrics_until(lambda now: votes(now, "down", "done") == 1)
    assert votes(changed, "up", "done") == 0
    assert article_votes(changed) == {(FERRY, "down"): 1}
    report = read_report(voting.settings.feedback_path)
    assert report is not None and report.votes == 1
    assert report.most_downvoted == [ArticleVotes(FERRY, down=1, up=0, answers=1)]

    await voting.vote(done.session_id, "u1", "none")
    withdrawn = await voting.metrics_until(lambda now: votes(now, "down", "done") == 0)
    assert votes(withdrawn, "up", "done") == 0
    assert article_votes(withdrawn) == {}
    report = read_report(voting.settings.feedback_path)
    assert report is not None and report.votes == 0


async def test_a_vote_on_an_unknown_answer_is_counted_as_unknown(voting: Voting) -> None:
    await voting.vote("not-an-answer-of-ours", "u1", "down")

    shown = await voting.metrics_until(lambda now: votes(now, "down", "unknown") == 1)

    assert votes(shown, "down", "done") == 0 and article_votes(shown) == {}


async def test_the_counts_come_from_the_file_at_start(
    settings: Settings, backend: Backend, broker: Broker, tmp_path: Path
) -> None:
    path = tmp_path / "feedback.sqlite3"
    store = FeedbackStore(path)
    store.record_answer(answer("from-before", "done", FERRY))
    store.vote("from-before", "u1", "down", "slack", 1.0)
    store.close()

    engine = await start_engine(settings.model_copy(update={"feedback_path": path}), backend)
    async with MetricsServer(engine.worker.metrics, "127.0.0.1", 0) as metrics:
        samples = await scrape(metrics)
    await engine.stop()

    assert votes(samples, "down", "done") == 1
    assert article_votes(samples) == {(FERRY, "down"): 1}


async def test_a_malformed_vote_is_dead_lettered_and_the_engine_answers_on(
    voting: Voting,
) -> None:
    channel = await voting.broker.connection.channel()
    dead: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
    parked = await channel.get_queue(voting.broker.names.dead_queue)
    await parked.consume(dead.put, no_ack=True)
    feedback_exchange = await channel.get_exchange(voting.broker.names.feedback_exchange)
    good = Feedback(
        session_id="abcdef123456", user_id="u1", vote="up", platform="slack", sent_at=1.0
    )
    for body in (b"\xff not json", encode(good).replace(b'"up"', b'"sideways"')):
        await feedback_exchange.publish(
            aio_pika.Message(body, content_type="application/json"), routing_key=""
        )

    reasons = [
        str((await asyncio.wait_for(dead.get(), WAIT_S)).headers[ERROR_HEADER]) for _ in range(2)
    ]
    assert reasons[0].startswith("invalid feedback: ")
    assert reasons[1].startswith("invalid feedback: vote: Input should be 'up', 'down' or 'none'")

    done = (await collect(await voting.client.ask(Ask("When does the last ferry leave?", "u2"))))[
        -1
    ]
    assert isinstance(done, Done)  # still answering
    await voting.vote(done.session_id, "u2", "up")  # and still counting votes
    await voting.metrics_until(lambda now: votes(now, "up", "done") == 1)
    await channel.close()
