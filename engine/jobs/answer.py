"""The answer job: the prompt, the token loop in a thread, tokens relayed as they come, then the
sources and the terminal event. The worker runs one at a time: the model serves one answer."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from broker.protocol import Done, Request
from config.settings import Settings
from config.spaces import Spaces
from config.texts import Locale
from engine.answering.closing import closed_fence, closing
from engine.answering.evidence import asks_for_number, has_number
from engine.answering.names import unread_names
from engine.answering.numbers import unbacked_numbers
from engine.answering.options import unread_options
from engine.answering.pipeline import AnswerPlanner, Plan
from engine.answering.prompt import EVIDENCE_INTRO
from engine.answering.wording import Withdrawn
from engine.backends.base import (
    Backend,
    BackendFailed,
    ChatMessage,
    GenerationLimits,
    Interruptible,
)
from engine.cancelled import CancelledSessions
from engine.generation.ending import ending_event
from engine.generation.loop import Generation, run_token_loop
from engine.jobs.next_turn import NextTurn, next_turn_prefix
from engine.replies import TOKEN_BATCH_S, Replies, TokenRelay

log = logging.getLogger(__name__)

ASKER_CHECK_INTERVAL_S = 2.0

AskerPresent = Callable[[str], Awaitable[bool]]  # does the reply queue of this bot id exist?


class AnswerJob:
    """Answers a question with the model, from the articles of the request's space."""

    acks_at_start = False  # acknowledged once answered; handed back if a shutdown cut it short

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        cancelled: CancelledSessions,
        asker_present: AskerPresent,
        spaces: Spaces | None = None,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.cancelled = cancelled
        self.asker_present = asker_present
        self.spaces = spaces or Spaces(settings)
        self._planners: dict[str, AnswerPlanner] = {}  # by space; each holds its own kb
        self.limits = generation_limits(settings)
        self._current: Generation | None = None
        self.next_turn = NextTurn(backend, self._interrupt)  # read when the engine is idle

    def refusal(self, request: Request, locale: Locale) -> str | None:
        return None  # the model takes any question the worker lets through

    def planner(self, space_name: str) -> AnswerPlanner:
        """The space's planner, made at its first question: its knowledge base, its system
        prompt and greeting, and nothing of another space's. ``KeyError`` for an unknown
        space (the worker refuses those before)."""
        if space_name not in self._planners:
            space = self.spaces.get(space_name)
            if space is None:
                raise KeyError(space_name)
            self._planners[space_name] = AnswerPlanner(
                space.settings, self.backend.count_tokens, greeting=space.greeting
            )
        return self._planners[space_name]

    def abandon(self) -> None:
        """The engine is stopping and will not wait: the running answer stops now."""
        self.next_turn.stop()
        if self._current is not None:
            self._current.abandoned = True
            self._interrupt()

    def _interrupt(self) -> None:
        """End the model's computation under way, where the backend can (``Interruptible``);
        the token loop stops at its next check anyway."""
        if isinstance(self.backend, Interruptible):
            self.backend.interrupt()

    async def run(self, request: Request, replies: Replies) -> None:
        """Answer to a terminal event (one a shutdown cut short says "interrupted")."""
        limit_s = self.settings.answer_time_limit_s
        generation = Generation(request.session_id, time_limit_at=time.monotonic() + limit_s)
        planner = self.planner(request.space)
        plan = await asyncio.to_thread(planner.plan, request)  # search, token counts
        relay = TokenRelay(replies, TOKEN_BATCH_S)
        try:
            if plan.asks_model:
                label = EVIDENCE_INTRO if plan.evidence is not None else ""  # it may copy it
                await self._generate(plan.messages, generation, relay, request.reply_to, label)
            else:  # the engine answers alone (pipeline.py)
                generation.finished_at = time.monotonic()
        except Exception as error:
            await relay.close()
            await replies.failed(_failure_reason(error, replies), text=generation.text)
            return
        await relay.close()
        if generation.finished_naturally:  # why it was cut, if it was; the quote and source
            streamed = generation.answer
            generation.withdrawn = _unread_in_words(generation, plan, request)
            generation.appendix = closing(
                plan,
                generation.finish_reason,
                self.limits.max_tokens,
                answer=generation.answer,
                withdrawn=generation.withdrawn,
            )
            if generation.appendix:  # after the words streamed, withdrawn or not: apart
                apart = closed_fence(streamed) + "\n\n" if generation.withdrawn else ""
                await replies.tokens(apart + generation.appendix, count=0)
        cancel_received_at = self.cancelled.received_at(generation.session_id)
        end = ending_event(
            generation,
            replies.header(),
            cancel_received_at=cancel_received_at,
            time_limit_s=limit_s,
            history=plan.history,
            plan=plan,
            locale=replies.locale,
        )
        await replies.send(end)
        if isinstance(end, Done) and plan.asks_model and self.next_turn.reads_ahead:
            lead = await asyncio.to_thread(plan.lead)  # a follow-up may come: prepare it
            self.next_turn.prepare(next_turn_prefix(lead, request.question, end.text))

    async def _generate(
        self,
        messages: list[ChatMessage],
        generation: Generation,
        relay: TokenRelay,
        reply_to: str,
        label: str = "",
    ) -> None:
        """Run the token loop in a thread until it ends, watching that the asker is still there.
        A cancel, or the time limit, interrupts the model's computation the moment it comes.
        ``label``: the prompt's label, left out if the answer begins by copying it."""
        self._current = generation
        self.cancelled.watch(generation.session_id, self._interrupt)
        time_left_s = max(0.0, generation.time_limit_at - time.monotonic())
        out_of_time = asyncio.get_running_loop().call_later(time_left_s, self._interrupt)
        thread = asyncio.ensure_future(
            asyncio.to_thread(
                run_token_loop,
                self.backend,
                messages,
                generation,
                self.cancelled,
                relay.emit,
                self.limits,
                self.settings.answer_paragraphs,
                label,
            )
        )
        watchdog = asyncio.create_task(self._stop_if_asker_leaves(generation.session_id, reply_to))
        try:
            await _outlive_cancellation(thread, generation, self._interrupt)
        except asyncio.CancelledError:
            relay.cancel()
            raise
        finally:
            watchdog.cancel()
            out_of_time.cancel()
            self.cancelled.unwatch(generation.session_id)
            self._current = None

    async def _stop_if_asker_leaves(self, session_id: str, reply_to: str) -> None:
        """Check now and then that the asker's reply queue still exists; if it is gone for
        good, stop generating for nobody."""
        while True:
            await asyncio.sleep(ASKER_CHECK_INTERVAL_S)
            if not await self.asker_present(reply_to):
                log.warning("the asker's reply queue is gone")
                self.cancelled.add(session_id)
                return


def _unread_in_words(generation: Generation, plan: Plan, request: Request) -> Withdrawn:
    """Why the model's words are left out, if they are: they give a number, a command-line
    option or a name that nothing it read gives (the question, the asker's turns it was
    given, the passages; to a question asking for a figure that the quote says in words, the
    quote stands for the passages), or do not name what the quote names for a question
    asking which one, when the site's quote can stand in for them (numbers.py, options.py,
    names.py, evidence.quoted_name)."""
    if plan.evidence is None or not generation.answer:
        return ""
    session_id = request.session_id
    # The system text, the asker's turns, the passages and the question; not the model's own
    # earlier answers: "The answer is: 1,200 yen." (the ferry's) to "How much is the museum
    # for adults?" (800 yen) is a number nothing on the site backs for it.
    read = [turn.content for turn in plan.messages if turn.role != "assistant"]
    figures = read
    if asks_for_number(request.question) and not has_number(plan.evidence.quote):
        # "How many parallel jobs does cargo build run by default?": "The answer is 1." (of
        # "-j1" in a passage) above "Defaults to the number of logical CPUs.": the sentence
        # chosen to give the figure says it in words, so a figure is the model's own
        asked = [turn.content for turn in plan.messages[:-1] if turn.role == "user"]
        figures = [plan.evidence.quote, request.question, *asked]
    cut = generation.finish_reason == "length"
    if unread := unbacked_numbers(generation.answer, figures, cut=cut):
        log.info("session %s: the model's words left out, numbers nothing backs: %s",
                 session_id, ", ".join(unread))  # fmt: skip
        return "number"
    if unread := unread_options(generation.answer, read, cut=cut):
        log.info("session %s: the model's words left out, options nothing it read gives: %s",
                 session_id, ", ".join(unread))  # fmt: skip
        return "option"
    if unread := unread_names(generation.answer, read):
        log.info("session %s: the model's words left out, names nothing it read gives: %s",
                 session_id, ", ".join(unread))  # fmt: skip
        return "term"
    if plan.named and plan.named.lower() not in generation.answer.lower():
        # "Which cargo tree flag shows the reverse dependencies?": "--no-dedupe" above the
        # quote "--invert spec — Show the reverse dependencies…" (the Cargo Book's eval)
        log.info("session %s: the model's words left out, they do not name %s",
                 session_id, plan.named)  # fmt: skip
        return "name"
    return ""


def _failure_reason(error: Exception, replies: Replies) -> str:
    """Log a failed generation and give its reason for the asker, one sentence.

    A failure the backend expects (``BackendFailed``: the model server is down, busy, refused
    the key) is the operator's known situation, not a bug: one line, and its own sentence for
    the asker. Anything else is a bug: its traceback in the log, and for the asker a sentence
    that names no exception and shows nothing of the engine's insides (paths, messages)."""
    if isinstance(error, BackendFailed):
        detail = f" ({error.detail})" if error.detail else ""
        log.warning("generation failed: %s%s", error, detail)
        return replies.text("engine.generation_failed", error=error)
    log.exception("generation failed")
    return replies.text("engine.generation_failed", error=replies.text("engine.error"))


def generation_limits(settings: Settings) -> GenerationLimits:
    """The decoding settings (CONCIERGE_MAX_TOKENS, _TEMPERATURE, _REPEAT_PENALTY), as every
    backend takes them; top-p and min-p keep their fixed defaults."""
    return GenerationLimits(
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        repeat_penalty=settings.repeat_penalty,
    )


async def _outlive_cancellation(
    thread: asyncio.Future[Generation], generation: Generation, interrupt: Callable[[], None]
) -> None:
    """Wait for the generation thread; if this task is cancelled (its channel closed), stop the
    thread and still wait for it, so the model never runs two generations at once."""
    try:
        await asyncio.shield(thread)
    except asyncio.CancelledError:
        generation.abandoned = True
        interrupt()
        await thread
        raise
