"""What the console knows of the queue, built only from copies of what crosses the broker.

Pure: no I/O. The observer feeds it requests, cancels, reply events and expired requests as
they are copied to the console's own queues, and the queue counts it polls; ``snapshot``
gives the JSON the page shows. Requests queued before the console started were never copied
to it: they are only a count (``unknown_before``), always at the head of the queue.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from broker.protocol import (
    Cancel,
    Cancelled,
    Done,
    Expired,
    Failed,
    Progress,
    ReplyEvent,
    Request,
    Started,
    TokenEvent,
)
from cli.console.exchange import Exchange, Outcome, outcome_row, running_row, waiting_row

SHOWN_WAITING = 100  # the page lists this many waiting requests; the rest are counted
OUTCOMES_KEPT = 20
TEXT_CHARS = 20_000  # of an answer being generated, shown live
ENDED_REMEMBERED = 500  # ended sessions, so a late copy of one is not taken for a new one
OUTCOME_NAMES = {"done": "done", "cancelled": "stopped", "expired": "expired", "failed": "failed"}
USER_KEY, KIND_KEY = "user", "kind"  # what ConciergeClient adds to every request's context
UNKNOWN_SPACE = "?"  # not a space's name (config/spaces.py): a request the console saw no copy of


@dataclass
class QueueCount:
    """The request queue as the broker counts it (``None`` until first read)."""

    messages: int | None = None
    consumers: int | None = None


class ConsoleState:
    """The waiting requests in order, the running ones, the last outcomes."""

    def __init__(self, stale_after_s: float = 3.0) -> None:
        self.waiting: dict[str, Exchange] = {}  # in arrival order (dicts keep it)
        self.running: dict[str, Exchange] = {}
        # Taken off the list by the broker's count, not by an event: kept, so that an event
        # that comes after all (a start the console missed) still finds its request; only
        # taken out again (``pop``), so the least recently used is the oldest.
        self.unseen: LRUCache[str, Exchange] = LRUCache(maxsize=ENDED_REMEMBERED)
        self.outcomes: deque[Outcome] = deque(maxlen=OUTCOMES_KEPT)
        self.ended: deque[str] = deque(maxlen=ENDED_REMEMBERED)
        self.count = QueueCount()
        self.unknown_before: int | None = None  # set by the first count
        self.stale_after_s = stale_after_s
        self._excess_since: float | None = None
        self.health: dict[str, Any] | None = None
        self.kb: dict[str, Any] | None = None  # default's knowledge base
        self.kb_spaces: dict[str, dict[str, Any]] | None = None  # each space's; None: no spaces

    # --- copies from the broker ----------------------------------------------------------

    def on_request(self, request: Request) -> None:
        sid = request.session_id
        if sid in self.ended or sid in self.running or sid in self.waiting:
            return  # a redelivered copy
        self.waiting[sid] = Exchange.of(request)

    def on_cancel(self, cancel: Cancel) -> None:
        exchange = self.waiting.get(cancel.session_id) or self.running.get(cancel.session_id)
        if exchange is not None and exchange.stop_by is None:
            exchange.stop_by = cancel.user_id or "?"

    def on_expired(self, request: Request, now: float, *, set_aside: bool = False) -> None:
        """A request the request queue dead-lettered (a copy from the expired exchange): its
        TTL ran out while it waited, or (``set_aside``) a quorum queue gave it out past its
        delivery limit, each time to an engine that stopped before the end."""
        exchange = (
            self.waiting.pop(request.session_id, None)
            or self.running.pop(request.session_id, None)
            or Exchange.of(request)
        )
        if set_aside:
            detail = "set aside: its engine stopped before the end each time it was given out"
            self._end(exchange, "failed", now, detail=detail)
        else:
            self._end(exchange, "expired", now, detail="its time to live ran out in the queue")

    def on_event(self, event: ReplyEvent, now: float) -> None:
        sid = event.session_id
        if sid in self.ended:
            return  # after a terminal event (a redelivered request reported again)
        exchange = self._take(event, now)
        match event:
            case Started():
                exchange.waited_s = event.waited_s
            case TokenEvent():
                self._add_tokens(exchange, event, now)
            case Progress():
                exchange.text, exchange.progress = event.text, dict(event.counts)
            case Done() | Cancelled() | Failed() | Expired():
                self.running.pop(sid, None)
                self._end_with(exchange, event, now)

    def _take(self, event: ReplyEvent, now: float) -> Exchange:
        """The exchange an event belongs to, moved from waiting to running: any event says
        the engine has it (``started`` may have gone by before the console started)."""
        sid = event.session_id
        if sid in self.running:
            return self.running[sid]
        exchange = self.waiting.pop(sid, None) or self.unseen.pop(sid, None)
        if exchange is None:  # asked before the console started, by a bot it binds
            context = event.context
            exchange = Exchange(sid, context.get(KIND_KEY, "ask"), asker=context.get(USER_KEY, ""))
        if event.type not in ("done", "cancelled", "failed", "expired"):
            exchange.started_at = now
            self.running[sid] = exchange
        return exchange

    @staticmethod
    def _add_tokens(exchange: Exchange, event: TokenEvent, now: float) -> None:
        if len(exchange.text) < TEXT_CHARS:
            exchange.text += event.text
        if event.tokens:
            if exchange.first_token_at is None:
                exchange.first_token_at = now
            exchange.last_token_at = now
            exchange.tokens += event.tokens

    def _end_with(self, exchange: Exchange, event: ReplyEvent, now: float) -> None:
        tokens, rate, elapsed, detail = exchange.tokens, None, None, ""
        match event:
            case Done():
                tokens, elapsed = event.tokens, event.elapsed_s
                rate = round(event.tokens_per_s, 1) if event.tokens_per_s is not None else None
                if exchange.kind == "rescrape":
                    detail = exchange.text  # the last progress line
            case Cancelled():
                tokens = event.tokens
                detail = f"by {exchange.stop_by}" if exchange.stop_by else ""
            case Failed() | Expired():
                detail = event.reason
        outcome = OUTCOME_NAMES[event.type]
        self._end(exchange, outcome, now, tokens, rate, elapsed, detail)

    def _end(
        self,
        exchange: Exchange,
        outcome: str,
        now: float,
        tokens: int = 0,
        tokens_per_s: float | None = None,
        elapsed_s: float | None = None,
        detail: str = "",
    ) -> None:
        self.ended.append(exchange.session_id)
        self.outcomes.appendleft(
            Outcome(
                exchange.session_id,
                exchange.kind,
                exchange.space,
                exchange.platform,
                exchange.asker,
                exchange.question,
                outcome,
                now,
                exchange.waited_s,
                tokens,
                tokens_per_s,
                elapsed_s,
                detail,
            )
        )

    # --- polled ------------------------------------------------------------------------

    def on_count(self, messages: int, consumers: int, now: float) -> None:
        """Reconcile with the broker's count of waiting requests.

        Those queued before the console started are at the head, so they leave first. If more
        are listed than the broker holds for ``stale_after_s`` (a request skipped without an
        event because its asker was gone, or one whose start went by unseen and whose first
        token is still to come), the oldest listed ones are taken off the list, quietly: a
        later event still finds them. A count read a moment before a copy arrived is one
        behind: hence the delay, not an immediate cut.
        """
        self.count = QueueCount(messages, consumers)
        if self.unknown_before is None:
            self.unknown_before = max(0, messages - len(self.waiting))
        excess = self.unknown_before + len(self.waiting) - messages
        if excess <= 0:
            self._excess_since = None
            return
        if self._excess_since is None:
            self._excess_since = now
            return
        if now - self._excess_since < self.stale_after_s:
            return
        dropped = min(self.unknown_before, excess)
        self.unknown_before -= dropped
        for sid in list(self.waiting)[: excess - dropped]:
            self.unseen[sid] = self.waiting.pop(sid)
        self._excess_since = None

    def on_answering(self, session_ids: list[str], now: float) -> None:
        """The sessions the engine says it is working on (``/healthz``): one still listed as
        waiting started while the console was not yet bound to its asker's replies."""
        for sid in session_ids:
            exchange = self.waiting.pop(sid, None) or self.unseen.pop(sid, None)
            if exchange is not None:
                exchange.started_at = now
                self.running[sid] = exchange

    def drop_expired(self, now: float) -> None:
        """A request past its deadline is no longer in the queue (its TTL is the same span)."""
        for sid, exchange in list(self.waiting.items()):
            if exchange.deadline is not None and exchange.deadline < now - 1.0:
                self._end(self.waiting.pop(sid), "expired", now, detail="past its deadline")

    # --- what the page shows -----------------------------------------------------------

    def snapshot(self, now: float) -> dict[str, Any]:
        ahead = self.unknown_before or 0
        waiting = [
            waiting_row(exchange, ahead + index + 1, now)
            for index, exchange in enumerate(list(self.waiting.values())[:SHOWN_WAITING])
        ]
        return {
            "waiting": waiting,
            "waiting_listed": len(self.waiting),
            "unknown_before": ahead,
            "broker_waiting": self.count.messages,
            "workers": self.count.consumers,
            "running": [running_row(exchange, now) for exchange in self.running.values()],
            "outcomes": [outcome_row(outcome) for outcome in self.outcomes],
            "tokens_per_s": self._tokens_per_s(),
            "spaces": self._by_space(),
        }

    def _by_space(self) -> dict[str, dict[str, int]]:
        """Waiting and running requests by space, of those the console saw queued: a request
        queued before it started (``unknown_before``), or known from its events alone, has no
        space it could tell, and is counted under ``"?"``."""
        shares: dict[str, dict[str, int]] = {}
        for state, exchanges in (("waiting", self.waiting), ("running", self.running)):
            for exchange in exchanges.values():
                share = shares.setdefault(exchange.space or UNKNOWN_SPACE, _no_share())
                share[state] += 1
        if self.unknown_before:
            shares.setdefault(UNKNOWN_SPACE, _no_share())["waiting"] += self.unknown_before
        return shares

    def _tokens_per_s(self) -> dict[str, float | None]:
        """Now (the answer being generated) and the median of the last finished answers."""
        live = [e.live_tokens_per_s() for e in self.running.values() if e.kind == "ask"]
        done = [
            o.tokens_per_s
            for o in self.outcomes
            if o.outcome == "done" and o.kind == "ask" and o.tokens_per_s
        ]
        return {
            "now": next((rate for rate in live if rate is not None), None),
            "recent_median": round(statistics.median(done), 1) if done else None,
        }


def _no_share() -> dict[str, int]:
    return {"waiting": 0, "running": 0}
