"""The askers of ``concierge bench chaos``, and what each question's asker was handed.

Each asker is a named bot (``Bot``): its reply queue is durable, so after a restart the next
incarnation gets the events its predecessor had not taken and takes those answers over, as a
named Discord or Slack bot does. Every event an asker is handed (by any incarnation) goes to its
question's ``Record``, in arrival order; ``judge`` says afterwards how the question ended.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Detached, ReplyTimeout, Session, StopRequested
from broker.protocol import TERMINAL_TYPES, Done, ReplyEvent, Started, TokenEvent
from config.settings import ConfigError, Settings

# How long every question may go without an event before those not ended count as lost: a
# question waiting in the queue hears nothing while the ones before it are answered (minutes,
# on a loaded machine), so only a silence of the whole run says nothing more will come. A
# node's leader election, the engine's outbox wait (30 s, engine.replies.OUTAGE_WAIT_S) and an
# engine restart all fit well inside it.
LOST_AFTER_S = 120.0
RESTART_RETRY_S = 1.0  # a restarted bot refused its reply queue starts again after this...
RESTART_WITHIN_S = 60.0  # ...until this long has passed


@dataclass
class Record:
    """One question: when it was asked, and every event its asker was handed, in order."""

    index: int
    asker: int
    question: str
    asked_at: float | None = None
    started_at: float | None = None  # its last ``started`` (an attempt 2 comes after a 1)
    events: list[ReplyEvent] = field(default_factory=list)
    ends: list[tuple[float, ReplyEvent]] = field(default_factory=list)  # every terminal event
    refused: str | None = None  # the bot could not queue it (the error)
    adopted: int = 0  # sessions a restarted bot took it over in

    @property
    def ended(self) -> bool:
        return bool(self.ends) or self.refused is not None

    @property
    def started(self) -> bool:
        return any(isinstance(event, Started) for event in self.events)

    @property
    def tokens(self) -> int:
        return sum(event.tokens for event in self.events if isinstance(event, TokenEvent))


class Board:
    """Every record of a phase; wakes whoever waits on one whenever any changes."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.by_session: dict[str, Record] = {}
        self.finished = False  # every asker is done
        self.began = time.monotonic()  # when the first question was asked
        self.last_event_at = self.began  # of any question
        self._changed = asyncio.Event()

    def changed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def add(self, record: Record, event: ReplyEvent) -> None:
        now = time.monotonic()
        record.events.append(event)
        self.last_event_at = now
        if isinstance(event, Started):
            record.started_at = now
        if event.type in TERMINAL_TYPES:
            record.ends.append((now, event))
        self.changed()

    async def until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait for ``condition``; False after ``timeout_s`` without it."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass
        return True

    async def settled(self, record: Record) -> None:
        """Until ``record`` ends, or no question has had an event for ``LOST_AFTER_S``."""
        while not record.ended:
            silent_s = time.monotonic() - self.last_event_at
            if silent_s >= LOST_AFTER_S:
                return
            await self.until(lambda: record.ended, LOST_AFTER_S - silent_s)

    def in_flight(self) -> list[Record]:
        """The answer being generated, as the askers see it: the one started last, if it has
        not ended (the engine answers one at a time; an earlier one without an end is lost,
        not in flight)."""
        started = [record for record in self.records if record.started_at is not None]
        latest = max(started, key=lambda record: record.started_at or 0.0, default=None)
        return [latest] if latest is not None and not latest.ended else []


def _ends(event: ReplyEvent) -> bool:
    return event.type in TERMINAL_TYPES


class Bot:
    """One named bot: its reply queue is durable, so the process that follows it after a
    restart gets the events its predecessor had not taken, and takes those answers over."""

    def __init__(self, settings: Settings, bot_id: str, board: Board) -> None:
        self.settings = settings
        self.bot_id = bot_id
        self.board = board
        self.client: ConciergeClient | None = None
        self.restarts = 0
        self.refused_starts = 0  # "another bot process is running as ...": tried again
        self._followers: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()  # no question is asked while the bot restarts

    async def start(self) -> Bot:
        self.client = await self._open()
        return self

    async def _open(self) -> ConciergeClient:
        client = ConciergeClient(self.settings, "bench", bot_id=self.bot_id)
        client.on_adopt = lambda session, _context: self._adopt(client, session)
        return await client.start()

    async def _open_again(self) -> ConciergeClient:
        """Start again as a supervisor would: a start refused because the broker still counts
        the predecessor's consumer (``ReplyQueueTaken``) is tried again, and counted."""
        deadline = time.monotonic() + RESTART_WITHIN_S
        while True:
            try:
                return await self._open()
            except ConfigError:
                self.refused_starts += 1
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(RESTART_RETRY_S)

    async def ask(self, record: Record) -> None:
        async with self._lock:
            assert self.client is not None
            record.asked_at = time.monotonic()
            try:
                session = await self.client.ask(Ask(record.question, f"asker-{record.asker}"))
            except Exception as error:  # a bot would say so, and not retry
                record.refused = f"{type(error).__name__}: {error}"
                self.board.changed()
                return
            self.board.by_session[session.session_id] = record
            self._follow(self.client, session, record)

    def _adopt(self, client: ConciergeClient, session: Session) -> bool:
        """An answer asked before the restart: followed here, as an adapter would show it."""
        record = self.board.by_session.get(session.session_id)
        if record is None:
            return False
        record.adopted += 1
        self._follow(client, session, record)
        return True

    def _follow(self, client: ConciergeClient, session: Session, record: Record) -> None:
        task = asyncio.create_task(self._events(client, session, record))
        self._followers.add(task)
        task.add_done_callback(self._followers.discard)

    async def _events(self, client: ConciergeClient, session: Session, record: Record) -> None:
        shown = False
        try:
            while True:
                item = await session.next_item()  # until the reply timeout: the run ends first
                if isinstance(item, StopRequested | Detached):
                    continue
                self.board.add(record, item)
                if item.type in TERMINAL_TYPES:
                    shown = True
                    return
        except ReplyTimeout:
            return
        except asyncio.CancelledError:  # the process goes: what it had taken counts as seen
            while not session.items.empty():
                item = session.items.get_nowait()
                if not isinstance(item, StopRequested | Detached) and not _ends(item):
                    self.board.add(record, item)  # acknowledged already: never sent again
            raise
        finally:
            client.forget(session, shown=shown)  # an end not shown stays for the successor

    async def restart(self, record: Record) -> bool:
        """As a process that dies: its answers stay in its queue, the next one takes them.
        Whether ``record`` was still being answered when this process stopped taking events."""
        async with self._lock:
            assert self.client is not None
            for task in list(self._followers):
                task.cancel()
            in_flight = not record.ended
            await asyncio.gather(*self._followers, return_exceptions=True)
            await self.client.broker.close()  # no cancel, no detach: as a killed process
            self.client = await self._open_again()
            self.restarts += 1
        return in_flight

    async def close(self) -> None:
        for task in list(self._followers):
            task.cancel()
        await asyncio.gather(*self._followers, return_exceptions=True)
        if self.client is not None:
            await self.client.close()


def judge(record: Record) -> dict[str, Any]:
    """One question as its asker saw it: ``whole`` (its first end is ``done``, whose text is
    the tokens of its last attempt, each ``seq`` once), ``not whole``, ``interrupted`` (it
    ended failed, expired or stopped, or was never queued) or ``lost`` (no end)."""
    verdict: dict[str, Any] = {
        "question": record.index,
        "ends": len(record.ends),
        "adopted": record.adopted,
        "latency_s": None,
    }
    if record.refused is not None:
        return {**verdict, "outcome": "interrupted", "reason": f"not queued: {record.refused}"}
    if not record.ends:
        return {**verdict, "outcome": "lost", "events": len(record.events)}
    at, end = record.ends[0]
    assert record.asked_at is not None
    verdict["latency_s"] = at - record.asked_at
    verdict["same_ends"] = all(other == end for _, other in record.ends)
    if not isinstance(end, Done):
        return {**verdict, "outcome": "interrupted", "reason": getattr(end, "reason", end.type)}
    shown = record.events[: record.events.index(end) + 1]
    if is_whole(shown, end):
        return {**verdict, "outcome": "whole"}
    seqs = [event.seq for event in _last_attempt(shown)]
    missing = sorted(set(range(end.seq + 1)) - set(seqs))
    return {**verdict, "outcome": "not whole", "seqs_missing": missing, "seqs_shown": seqs}


def is_whole(events: list[ReplyEvent], done: Done) -> bool:
    """The last attempt's events, from its ``started`` to ``done``: every ``seq`` once, in
    order, and the tokens' text is the final text."""
    attempt = _last_attempt(events)
    seqs = [event.seq for event in attempt]
    text = "".join(event.text for event in attempt if isinstance(event, TokenEvent))
    return seqs == list(range(done.seq + 1)) and text == done.text


def _last_attempt(events: list[ReplyEvent]) -> list[ReplyEvent]:
    starts = [i for i, event in enumerate(events) if isinstance(event, Started)]
    return events[starts[-1] :] if starts else events


def count_outcomes(judged: list[dict[str, Any]]) -> dict[str, int]:
    counts = {outcome: 0 for outcome in ("whole", "not whole", "interrupted", "lost")}
    for verdict in judged:
        counts[verdict["outcome"]] += 1
    counts["duplicated"] = sum(verdict["ends"] > 1 for verdict in judged)
    return counts


def summary(baseline: dict[str, Any], chaos: dict[str, Any]) -> dict[str, Any]:
    added = {
        key: chaos["latency_s"][stat] - baseline["latency_s"][stat]
        if chaos["latency_s"][stat] is not None and baseline["latency_s"][stat] is not None
        else None
        for key, stat in (("p50", "median"), ("p95", "p95"))
    }
    return {
        "without_faults": baseline["counts"],
        "with_faults": chaos["counts"],
        "added_latency_s": added,
    }


def print_report(doc: dict[str, Any]) -> None:
    """The two runs side by side, then each fault as it struck."""
    console = Console()
    baseline, chaos = doc["runs"]
    table = Table(
        title=f"bench chaos: {doc['config']['questions']} questions, "
        f"{doc['config']['askers']} askers, seed {doc['config']['seed']}"
    )
    table.add_column("")
    table.add_column("without faults", justify="right")
    table.add_column("with faults", justify="right")
    for key, label in OUTCOME_LABELS.items():
        table.add_row(label, str(baseline["counts"][key]), str(chaos["counts"][key]))
    added = doc["summary"]["added_latency_s"]
    for key, stat in (("p50", "median"), ("p95", "p95")):
        table.add_row(
            f"latency {key}, s (asked to end)",
            f"{baseline['latency_s'][stat]:.1f}",
            f"{chaos['latency_s'][stat]:.1f} ({added[key]:+.1f})",
        )
    console.print(table)
    faults = Table(title="faults (seconds from the first question)")
    for column in ("fault", "struck at", "answer in flight", "what", "back at"):
        faults.add_column(column)
    for fault in chaos["faults"]:
        faults.add_row(
            fault["fault"],
            f"{fault['struck_at_s']:.1f}",
            f"question {fault['question']}",
            fault["what"],
            f"{fault['back_at_s']:.1f}",
        )
    console.print(faults)


OUTCOME_LABELS = {
    "whole": "answered whole",
    "not whole": "answered, not whole",
    "interrupted": "ended failed, expired or stopped",
    "lost": "lost (no end)",
    "duplicated": "duplicated (a second end shown)",
}
