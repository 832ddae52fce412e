"""A conversation's next turn, prepared while the engine has nothing else to do.

A follow-up's prompt begins as its conversation's last one did (engine/answering/prompt.py),
but for the last exchange: that prompt ended with the question after its articles, and the
follow-up has it back without them, then the answer. So the state llama.cpp saved after the
answer (backends/state_cache.py) serves the follow-up only up to the question before, and every
follow-up read its last exchange again. Now, once an answer has gone out and no request waits,
the engine reads the next prompt's beginning (the system text, the turns, then the question
and the answer as the bot sends them back: ``broker.answer_text``) and saves the state after
it: the follow-up reads only its articles and its question. A request that arrives meanwhile
stops it at once (``Warms.warm`` is interruptible), so it never delays anyone; a follow-up
that differs from the guess (another bot's way of sending turns back) still gains the part
that matches. A new question in a conversation is answered without its turns
(engine/answering/pipeline.py, step 7), yet its follow-up will read them all: the beginning
read ahead is the conversation's (``Plan.lead``), not that prompt's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from broker.answer_text import without_sources
from engine.answering.history import model_words
from engine.backends.base import ChatMessage, ShouldStop

log = logging.getLogger(__name__)


@runtime_checkable
class Warms(Protocol):
    """A backend that can read a prompt's beginning ahead of time (the model in process)."""

    def warm(self, messages: Sequence[ChatMessage], should_stop: ShouldStop) -> int: ...


def next_turn_prefix(
    lead: Sequence[ChatMessage], question: str, done_text: str
) -> list[ChatMessage]:
    """The beginning of a follow-up's prompt: the system text and the conversation before
    this answer (``Plan.lead``; its prompt had the question after its articles, or read no
    turns at all if it was a new topic), then the question and the answer as turns."""
    answer = model_words(without_sources(done_text))  # as ``as_messages`` will read it
    return [*lead, ChatMessage("user", question), ChatMessage("assistant", answer)]


class NextTurn:
    """The next turn's beginning of the last answer, read when the engine is idle."""

    def __init__(self, backend: object, interrupt: Callable[[], None]) -> None:
        self.backend = backend
        self.interrupt = interrupt  # ends the model's computation under way
        self._pending: list[ChatMessage] | None = None
        self._wanted = False  # read by the model's thread: False stops the warm-up
        self._running = False

    @property
    def reads_ahead(self) -> bool:
        """Whether the backend can read a prompt's beginning ahead (the model in process)."""
        return isinstance(self.backend, Warms)

    def prepare(self, messages: list[ChatMessage] | None) -> None:
        """What to read next time the engine is idle (None: nothing)."""
        self._pending = messages

    async def warm(self) -> int:
        """Read what was prepared, unless ``stop`` comes first; the tokens read."""
        messages, self._pending = self._pending, None
        if messages is None or not isinstance(self.backend, Warms):
            return 0
        self._wanted, self._running = True, True
        try:
            read = await asyncio.to_thread(self.backend.warm, messages, lambda: not self._wanted)
        except Exception as error:  # a saving for later: never worth failing the engine
            log.warning("the next turn was not prepared: %s", error)
            return 0
        finally:
            self._running = False
        if read:
            log.debug("next turn prepared: %d tokens read ahead", read)
        return read

    def stop(self) -> None:
        """A request came: whatever is being read stops now, and nothing starts."""
        self._wanted = False
        self._pending = None
        if self._running:
            self.interrupt()
