"""Turns a session's event stream into message posts and edits, for every platform alike.

The adapter supplies a ``MessageSink`` (post and edit one message); the renderer decides what
the messages say and when: it accumulates the text, edits at most once per ``edit_interval_s``
and always once more at the end, moves text past ``max_chars`` into continuation messages, and
shows the state in a footer. Nothing of the text is lost: the final event carries it whole.
The final edit goes at once: an adapter's interval leaves it room in the platform's limit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from bots.session import Detached, ReplyTimeout, Session, SessionItem, StopRequested
from broker.protocol import Cancelled, Done, Expired, Failed, Progress, Started, TokenEvent
from config.texts import CATALOGUE, LOCALES, Locale, t

log = logging.getLogger(__name__)


FINAL_EDIT_ATTEMPTS = 3
FINAL_EDIT_RETRY_S = 1.0
# After a stop is asked, the edit that would say "stopping…" waits this long for the engine's
# confirmation (it comes within milliseconds): then one edit says "stopped", with the Stop
# button gone, instead of "stopping…" and, an edit slot or two later (a platform's rate
# limit), "stopped". A confirmation slower than this shows "stopping…" first.
STOP_CONFIRM_WAIT_S = 0.5


class Status(StrEnum):
    QUEUED = "queued"
    GENERATING = "generating"
    STOPPING = "stopping"
    DONE = "done"
    STOPPED = "stopped"
    EXPIRED = "expired"
    FAILED = "failed"
    TIMED_OUT = "timed out"
    REFUSED = "refused"
    DETACHED = "detached"  # left to the next bot process (no final edit from this one)


FINAL_STATUSES = frozenset(
    {
        Status.DONE,
        Status.STOPPED,
        Status.EXPIRED,
        Status.FAILED,
        Status.TIMED_OUT,
        Status.REFUSED,
        Status.DETACHED,
    }
)


@dataclass(frozen=True)
class MessageContent:
    """What one message shows: the answer's text and, on the last message, a status line.

    The last message also carries the answer's ``status`` (and, while queued, how many wait
    ``ahead``), so that a platform can add its own controls: a Stop button while it runs,
    votes once it is done, a thread status while nothing is written yet.
    """

    body: str
    footer: str = ""
    # Not compared: the footer already differs whenever they do (an edit is made on change).
    status: Status | None = field(default=None, compare=False)
    ahead: int = field(default=0, compare=False)


class MessageSink(Protocol):
    """The two calls an adapter provides. Handles are whatever the platform needs."""

    async def post(self, content: MessageContent, after: Any | None) -> Any:
        """Post a new message: the first one answers the question, later ones follow ``after``."""
        ...

    async def edit(self, handle: Any, content: MessageContent) -> None: ...


def split_text(text: str, limit: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``limit`` characters whose concatenation is ``text``.

    A cut falls after the last newline or space in the second half of a piece when there is
    one. Each cut depends only on the text before it, so earlier pieces never change as the
    text grows.
    """
    pieces: list[str] = []
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = max(window.rfind("\n"), window.rfind(" "))
        end = start + (cut + 1 if cut >= limit // 2 else limit)
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return pieces


_STATUS_KEYS = {
    Status.GENERATING: "status.answering",
    Status.STOPPING: "status.stopping",
    Status.DONE: "status.done",
    Status.STOPPED: "status.stopped",
    Status.EXPIRED: "status.expired",
    Status.FAILED: "status.failed",
    Status.TIMED_OUT: "status.timed_out",
    Status.REFUSED: "status.refused",
    Status.DETACHED: "status.answering",
}


def footer_for(
    status: Status, detail: str, ahead: int, locale: Locale = "en", *, restarted: bool = False
) -> str:
    """The status line; ``restarted``: an engine died answering, this is the answer anew."""
    if status is Status.QUEUED:
        return t("status.queued", locale, ahead=ahead) if ahead else t("status.next_up", locale)
    again = restarted and status is Status.GENERATING
    key = "status.answering_again" if again else _STATUS_KEYS[status]
    return t(key, locale, detail=detail) if "{detail}" in CATALOGUE[key][locale] else t(key, locale)


def status_of(footer: str) -> Status | None:
    """The status a footer shows (as ``footer_for`` wrote it, in any locale), None if it is
    none of them."""
    for status, start in _FOOTER_STARTS:
        if footer.startswith(start):
            return status
    return None


# Each status by how its footer begins, in every locale, the longest first ("⚠️ failed"
# before a refusal's "⚠️").
_FOOTER_STARTS = sorted(
    dict.fromkeys(
        (
            status,
            footer_for(status, "", 0, locale, restarted=restarted)
            .split(" ·")[0]
            .rstrip(": \uff1a")
            .strip(),
        )
        for locale in LOCALES
        for status in Status
        for restarted in (False, True)
    ),
    key=lambda entry: -len(entry[1]),
)
NOTICE_SEPARATOR = " · "


def history_notice(sent: int | None, cut: bool, done: Done | None, locale: Locale = "en") -> str:
    """What the final footer adds when older messages of the conversation were left out, by
    the bot (``cut``: it sent ``sent`` turns) or by the engine (``done.history_dropped``)."""
    dropped = done.history_dropped if done is not None else 0
    if not cut and not dropped:
        return ""
    used = sent - dropped if sent is not None else (done.history_used if done else 0)
    if used <= 0:
        return t("notice.no_history", locale)
    if used == 1:
        return t("notice.last_message", locale)
    return t("notice.last_messages", locale, used=used)


class Renderer:
    """Renders one session into one or more messages through ``sink``."""

    def __init__(
        self,
        sink: MessageSink,
        *,
        max_chars: int,
        edit_interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        locale: Locale = "en",
    ) -> None:
        self.sink = sink
        self.locale = locale
        self.max_chars = max_chars
        self.edit_interval_s = edit_interval_s
        self.clock = clock
        self.text = ""
        self.status = Status.QUEUED
        self.detail = ""
        self.ahead = 0
        self.handles: list[Any] = []
        self.notice = ""  # after the final status: older messages of the conversation left out
        self.restarted = False  # an engine died answering; the answer began again
        self._history: tuple[int | None, bool] = (None, False)  # turns sent, and were any cut
        self._shown: list[MessageContent | None] = []  # None: unknown (shown before a restart)
        self._text_known = True
        self._dirty = True
        self._last_edit_at = float("-inf")
        self._held_until = float("-inf")  # no edit before then (STOP_CONFIRM_WAIT_S)

    async def run(self, session: Session) -> Status:
        """Show the placeholder, follow the events to a final state, and make the final edit."""
        await self.start(session)
        return await self.follow(session)

    async def start(self, session: Session) -> Any | None:
        """Post the placeholder; returns its handle (None if the platform refused it)."""
        self.ahead = session.queued_ahead
        await self._publish()
        return self.handles[0] if self.handles else None

    def adopt(self, handle: Any) -> None:
        """Take over a message posted before a restart: its text is unknown until an event
        brings the whole of it, so tokens are not shown and nothing is edited until then."""
        self.handles, self._shown = [handle], [None]
        self.status, self._text_known, self._dirty = Status.GENERATING, False, False

    async def refuse(self, reason: str) -> None:
        """The request could not be queued after all: the placeholder says why."""
        self.status, self.detail = Status.REFUSED, reason
        await self._publish_final()

    async def follow(self, session: Session) -> Status:
        """Follow the events to a final state and make the final edit."""
        sent = len(session.request.history) if session.request is not None else None
        self._history = (sent, session.history_cut)
        self.notice = history_notice(sent, session.history_cut, None, self.locale)
        last_event_at = self.clock()
        while self.status not in FINAL_STATUSES:
            idle_left = session.timeout_s - (self.clock() - last_event_at)
            try:
                item = await session.next_item(max(0.0, self._wait_s(idle_left)))
            except ReplyTimeout:
                if self.clock() - last_event_at >= session.timeout_s:
                    self.status = Status.TIMED_OUT
                    break
            else:
                self.apply(item)
                while (
                    self.status not in FINAL_STATUSES and (more := session.ready_item()) is not None
                ):
                    self.apply(more)  # all that has arrived, before the next edit
                last_event_at = self.clock()
            if self._dirty and self.clock() >= self._next_edit_at():
                await self._publish()
        if self.status is not Status.DETACHED:
            await self._publish_final()
        return self.status

    async def _publish_final(self) -> None:
        """The final edit matters most (it carries the whole text): try it a few times."""
        if not self._text_known:  # a taken-over message whose text never came: keep it
            await self._post_end_below()
            return
        for _ in range(FINAL_EDIT_ATTEMPTS):
            await self._publish()
            if not self._dirty:
                return
            await asyncio.sleep(max(self.edit_interval_s, FINAL_EDIT_RETRY_S))

    async def _post_end_below(self) -> None:
        """Say how the answer ended in a message of its own, after the ones it has."""
        end = MessageContent("", self.footer(), self.status)
        try:
            self.handles.append(await self.sink.post(end, self.handles[-1]))
        except Exception as error:
            log.warning("could not post how the answer ended: %s", error)

    def _wait_s(self, idle_left: float) -> float:
        if not self._dirty:
            return idle_left
        return min(idle_left, self._next_edit_at() - self.clock())

    def _next_edit_at(self) -> float:
        """The edit slot (one per ``edit_interval_s``), unless a stop's confirmation is awaited."""
        return max(self._last_edit_at + self.edit_interval_s, self._held_until)

    def apply(self, item: SessionItem) -> None:  # noqa: C901 - one branch per event type
        """Fold one event into the state (text and status)."""
        match item:
            case Detached():
                self.status = Status.DETACHED
            case StopRequested():
                if self.status is Status.QUEUED:
                    self.status = Status.STOPPED  # it will never start: say so at once
                elif self.status is Status.GENERATING:
                    self.status = Status.STOPPING
                    self._held_until = self.clock() + STOP_CONFIRM_WAIT_S
            case Started(attempt=attempt):
                # An answer begun again: the text so far is dropped, the new one comes whole.
                # One never begun here is simply an answer: a request that only waited when
                # a broker node went can come back counted as a second attempt.
                if attempt > 1 and self.status is not Status.QUEUED:
                    self.text, self._text_known, self.restarted = "", True, True
                if self.status is Status.QUEUED:
                    self.status = Status.GENERATING
            case TokenEvent(text=piece):
                if self._text_known:  # else a suffix of a text whose start is unknown
                    self.text += piece
                if self.status is Status.QUEUED:
                    self.status = Status.GENERATING
            case Progress(text=progress):
                self.text, self._text_known = progress, True
                if self.status is Status.QUEUED:
                    self.status = Status.GENERATING
            case Done(text=final_text):
                self.text, self.status = final_text, Status.DONE
                self.notice = history_notice(*self._history, item, self.locale)
            case Cancelled(text=final_text):
                self.text, self.status = final_text or self.text, Status.STOPPED
            case Failed(reason=reason, text=final_text):
                self.text, self.status, self.detail = final_text or self.text, Status.FAILED, reason
            case Expired(reason=reason):
                self.status, self.detail = Status.EXPIRED, reason
        if isinstance(item, Done | Cancelled) or (isinstance(item, Failed) and item.text):
            self._text_known = True  # the whole text (Failed and Expired may carry none)
        if not isinstance(item, Detached):  # the successor shows the rest; nothing to edit
            self._dirty = self._text_known

    def contents(self) -> list[MessageContent]:
        """What each message should show now; the footer goes on the last one."""
        pieces = split_text(self.text, self.max_chars)
        last = MessageContent(pieces[-1], self.footer(), self.status, self.ahead)
        return [MessageContent(piece) for piece in pieces[:-1]] + [last]

    def footer(self) -> str:
        """The status line; a final one adds the notice, if there is one."""
        footer = footer_for(
            self.status, self.detail, self.ahead, self.locale, restarted=self.restarted
        )
        if self.notice and self.status in FINAL_STATUSES:
            return footer + NOTICE_SEPARATOR + self.notice
        return footer

    async def _publish(self) -> None:
        """Post or edit whatever differs from what is shown."""
        self._last_edit_at = self.clock()
        self._dirty = False
        if not self._text_known:
            return
        try:
            for index, content in enumerate(self.contents()):
                if index >= len(self.handles):
                    after = self.handles[-1] if self.handles else None
                    self.handles.append(await self.sink.post(content, after))
                    self._shown.append(content)
                elif self._shown[index] != content:
                    await self.sink.edit(self.handles[index], content)
                    self._shown[index] = content
        except Exception as error:  # a platform error must not lose the answer: retry later
            log.warning("message update failed: %s", error)
            self._dirty = True
