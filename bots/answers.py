"""The life of an answer, the same on every platform, so that an adapter only translates.

An adapter turns platform events into an ``Ask`` or a stop request and supplies a ``Stage`` for
each answer: the ``MessageSink`` its messages go through, plus the platform's names for them.
``Answers`` does the rest: prepare → placeholder → submit → follow (in that order, so the request
can name its placeholder and a restarted bot can find it again), answers found by any message of
theirs, the stop rule, the take-over of answers asked before a restart, and close.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from bots.ask import Ask
from bots.client import AskRefused, ConciergeClient
from bots.renderer import MessageContent, Renderer, Status
from bots.session import Session
from config.texts import Locale, t

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5.0  # on close, how long answers being stopped may take to show it
SHUTDOWN_USER = "concierge-shutdown"  # the user_id of the cancels sent when a bot stops


def warning(reason: str, locale: Locale = "en") -> str:
    """A refusal as a chat message shows it."""
    return t("refusal.warning", locale, reason=reason)


class StopOutcome(StrEnum):
    """What a stop by one person on one answer did (a Stop button tells the clicker)."""

    STOPPED = "stopped"  # the cancel was sent
    NOT_ALLOWED = "not allowed"  # neither the asker nor an admin
    ENDED = "ended"  # the answer is over (or already being stopped)


# How a platform names a message: Discord by its id, Slack by (channel, ts).
K = TypeVar("K", bound=Hashable)
K_co = TypeVar("K_co", bound=Hashable, covariant=True)

Say = Callable[[str], Awaitable[object]]  # tells the asker something (a refusal) where they asked


class Stage(Protocol[K_co]):
    """One answer's place on a platform: a ``MessageSink`` that also speaks for its platform.

    ``post`` must call ``on_post`` with each message as soon as it exists (before anything else
    is awaited), so that a stop put on it at once already finds the answer.
    """

    # Set by ``Answers`` before the first post: each message posted, the exchange's session
    # id and asker (a persistent Stop button names both) and the locale of the bot's words.
    on_post: Callable[[Any], None]
    session_id: str
    asker: str
    locale: Locale

    @property
    def question(self) -> Any | None:
        """The message that asked, if any (a stop on it counts too)."""
        ...

    def key(self, message: Any) -> K_co:
        """How the platform's stop events name ``message`` (a handle that ``post`` returned)."""
        ...

    def place(self, placeholder: Any) -> Mapping[str, str]:
        """The placeholder's entry in the request's context, beside the ``Ask``'s place."""
        ...

    async def post(self, content: MessageContent, after: Any | None) -> Any: ...

    async def edit(self, handle: Any, content: MessageContent) -> None: ...

    async def ended(self, first: Any | None) -> None:
        """The answer is over (not left to the next process); ``first`` is its first message."""
        ...


# The adapter's reading of a context from before a restart: the stage and the answer's first
# message, or None if the context names no message of this platform.
Resume = Callable[[Mapping[str, str]], tuple[Stage[K], Any] | None]


@dataclass(eq=False)
class Answer:
    """One answer in progress, and who stopped it (the cancel is sent once)."""

    session: Session
    stopped_by: str | None = None


class Answers(Generic[K]):
    """Every answer one adapter shows, from the question to the end (or the hand-over).

    ``resume`` reads the context of an answer asked before a restart (see ``Resume``);
    ``ready`` is awaited before such an answer is shown (Discord's REST client needs the login
    first). ``max_chars`` and ``edit_interval_s`` go to each answer's ``Renderer``.
    """

    def __init__(
        self,
        client: ConciergeClient,
        *,
        resume: Resume[K],
        max_chars: int,
        edit_interval_s: float,
        ready: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.client = client
        self.resume = resume
        self.max_chars = max_chars
        self.edit_interval_s = edit_interval_s
        self.ready = ready
        self._by_message: dict[K, Answer] = {}
        self._tasks: set[asyncio.Task[Status | None]] = set()
        client.on_adopt = self._take_over

    # --- starting an answer -------------------------------------------------------------------

    def start(self, ask: Ask, stage: Stage[K], say: Say) -> asyncio.Task[Status | None]:
        """Answer ``ask`` in a task of its own (a platform's listener must return at once)."""
        return self._track(self.answer(ask, stage, say))

    async def answer(self, ask: Ask, stage: Stage[K], say: Say) -> Status | None:
        """Queue ``ask`` and show its answer through ``stage``; None if it was not queued (then
        ``say`` told the asker why)."""
        locale = ask.locale or self.client.settings.locale
        try:
            session = await self.client.prepare(ask)
        except AskRefused as refusal:  # too long, or too many open
            await say(warning(str(refusal), locale))
            return None
        except Exception:
            log.exception("could not queue the %s of %s", ask.kind, ask.asker)
            await say(warning(t("refusal.engine_down", locale), locale))
            return None
        answer, renderer = self._open(session, stage)
        return await self._show(answer, stage, renderer, self._send(session, stage, renderer))

    async def _send(self, session: Session, stage: Stage[K], renderer: Renderer) -> Status:
        """Post the placeholder first, so the request can name it; then send the request and
        follow the answer. A request that cannot be sent turns the placeholder into the reason.
        No placeholder (the platform refused it; the stage told the asker): no request, since
        its answer could be shown nowhere, and every later post would fail the same way."""
        placeholder = await renderer.start(session)
        if placeholder is None:
            return Status.REFUSED
        try:
            await self.client.submit(session, stage.place(placeholder))
        except AskRefused as refusal:  # the queue is full
            await renderer.refuse(str(refusal))
            return renderer.status
        except Exception:
            log.exception("could not send the %s of %s", session.kind, session.user_id)
            await renderer.refuse(t("refusal.engine_down", session.locale))
            return renderer.status
        return await renderer.follow(session)

    def _take_over(self, session: Session, context: dict[str, str]) -> bool:
        """An answer asked before this process started (same bot name): finish it in the
        message its context names. False if it names none of this platform's."""
        resumed = self.resume(context)
        if resumed is None:
            return False
        stage, first = resumed
        answer, renderer = self._open(session, stage)
        self._link(answer, stage.key(first))
        renderer.adopt(first)
        self._track(self._show(answer, stage, renderer, self._resumed(session, renderer)))
        return True

    async def _resumed(self, session: Session, renderer: Renderer) -> Status:
        if self.ready is not None:
            await self.ready()
        return await renderer.follow(session)

    # --- following it to its end --------------------------------------------------------------

    def _open(self, session: Session, stage: Stage[K]) -> tuple[Answer, Renderer]:
        """The answer and its renderer; its question and each message posted find it."""
        answer = Answer(session)
        stage.on_post = lambda message: self._link(answer, stage.key(message))
        stage.session_id, stage.asker = session.session_id, session.user_id
        stage.locale = session.locale
        if stage.question is not None:
            self._link(answer, stage.key(stage.question))
        renderer = Renderer(
            stage,
            max_chars=self.max_chars,
            edit_interval_s=self.edit_interval_s,
            locale=session.locale,
        )
        return answer, renderer

    async def _show(
        self, answer: Answer, stage: Stage[K], renderer: Renderer, shown: Awaitable[Status]
    ) -> Status:
        """Await ``shown`` (the answer to its end), then forget it."""
        try:
            with self.client.showing(answer.session):
                status = await shown
        finally:
            self._unlink(answer)
        if status is not Status.DETACHED:
            await stage.ended(renderer.handles[0] if renderer.handles else None)
        log.info("session %s: %s", answer.session.session_id, status)
        return status

    def _track(self, answering: Coroutine[Any, Any, Status | None]) -> asyncio.Task[Status | None]:
        task = asyncio.create_task(answering)
        self._tasks.add(task)  # now, not when it first runs: close() must see it
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Status | None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("an answer failed", exc_info=task.exception())

    # --- finding and stopping -----------------------------------------------------------------

    def find(self, message: K) -> Answer | None:
        """The answer ``message`` belongs to: its question, placeholder or a continuation."""
        return self._by_message.get(message)

    def find_session(self, session_id: str) -> Answer | None:
        """The answer of the exchange ``session_id``, if this process shows it."""
        for answer in self.active():
            if answer.session.session_id == session_id:
                return answer
        return None

    def active(self) -> list[Answer]:
        return list({id(answer): answer for answer in self._by_message.values()}.values())

    async def stop(
        self, message: K, user_id: str, is_admin: Callable[[], bool | Awaitable[bool]]
    ) -> bool:
        """A stop by ``user_id`` on ``message``: the answer's asker may stop it, and whoever
        ``is_admin`` says (asked only of others). True if this sent the cancel."""
        answer = self.find(message)
        if answer is None or answer.stopped_by is not None:
            return False
        if user_id != answer.session.user_id:
            admin = is_admin()
            if not (await admin if inspect.isawaitable(admin) else admin):
                log.info("%s may not stop session %s", user_id, answer.session.session_id)
                return False
        return await self._cancel(answer, user_id)

    async def stop_session(
        self,
        session_id: str,
        user_id: str,
        is_admin: Callable[[], bool | Awaitable[bool]],
        *,
        asker: str | None = None,
    ) -> StopOutcome:
        """A stop by ``user_id`` on the exchange ``session_id`` (a Stop button names it).

        An exchange this process does not show (it ended, or began before a restart and no
        event has come since) is stopped by id when ``asker`` says who asked: the engine
        stops it if it still has it, and ignores it otherwise.
        """
        answer = self.find_session(session_id)
        owner = answer.session.user_id if answer is not None else asker
        if owner is None or (answer is not None and answer.stopped_by is not None):
            return StopOutcome.ENDED
        if answer is None and self.client.sessions.ended(session_id):
            return StopOutcome.ENDED
        if user_id != owner:
            admin = is_admin()
            if not (await admin if inspect.isawaitable(admin) else admin):
                log.info("%s may not stop session %s", user_id, session_id)
                return StopOutcome.NOT_ALLOWED
        if answer is None:
            await self.client.cancel_id(session_id, user_id)
            return StopOutcome.STOPPED
        return StopOutcome.STOPPED if await self._cancel(answer, user_id) else StopOutcome.ENDED

    async def _cancel(self, answer: Answer, user_id: str) -> bool:
        if answer.stopped_by is not None:  # someone else's stop got here while we asked
            return False
        answer.stopped_by = user_id  # before the await: a second stop meanwhile is not sent
        try:
            await self.client.cancel(answer.session, user_id)
        except BaseException:  # not sent (the broker, or the click's time ran out): try again
            answer.stopped_by = None
            raise
        return True

    async def close(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Stop every answer (the engine is told), give them ``grace_s`` to show it, then end
        them. A bot with a stable name (``CONCIERGE_BOT_NAME``) leaves them to its next
        process instead, which finishes each in the same message."""
        if self.client.named:
            try:
                await self.client.detach()
            except Exception as error:  # the broker may be gone; the replies wait anyway
                log.warning("could not hand the answers over: %s", error)
        else:
            for answer in self.active():
                try:
                    await self._cancel(answer, SHUTDOWN_USER)
                except Exception as error:
                    log.warning("could not stop session %s: %s", answer.session.session_id, error)
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    def _link(self, answer: Answer, message: K) -> None:
        self._by_message[message] = answer

    def _unlink(self, answer: Answer) -> None:
        for key in [key for key, linked in self._by_message.items() if linked is answer]:
            del self._by_message[key]
