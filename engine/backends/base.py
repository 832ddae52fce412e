"""What the engine needs of a model, and nothing else: the ``Backend`` interface and its types.

The engine only needs ``stream(messages, should_stop, limits)``: text pieces, one per token.
Two backends implement it, each importing only this module: the model in this process
(``engine.backends.llama``) and an OpenAI-compatible server (``engine.backends.openai``);
``engine.backends.configured`` opens the one the settings name.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from broker.protocol import FinishReason
from config.errors import EXIT_UNAVAILABLE, ConciergeError

# llama.cpp's defaults; they matter only above temperature 0 (the default takes the likeliest
# token), so they are fixed, not settings (docs/quality.md, "Decoding").
TOP_P = 0.95
MIN_P = 0.05
FRAMING_TOKENS = 8  # per message, for a model with no chat template: [INST], roles, ends

ShouldStop = Callable[[], bool]
# An answer's text pieces, one per token; the generator's return value is why the model
# stopped ("stop": by itself, "length": at ``max_tokens``), or None from a backend that
# cannot tell (the token loop then compares the pieces with ``max_tokens``).
Pieces = Generator[str, None, FinishReason | None]


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system", "user" or "assistant"
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


class GenerationStopped(ConciergeError):
    """``should_stop`` became true while the model was still processing the prompt (or, for
    a backend reading from a server, while it waited for the next piece). A stop, caught by
    the token loop: it never reaches a person."""


class BackendFailed(ConciergeError):
    """An answer failed in a way the backend expects (a model server down, busy or refusing):
    the message is the asker's reason, one sentence with no secret and no exception class;
    ``detail`` (an exception's class, say) is for the engine's log only."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.detail = detail


class BackendUnavailable(ConciergeError, ConnectionError):
    """The model server cannot be reached at start (``CONCIERGE_BACKEND=openai``); the engine
    exits with the unavailable code, as for a missing broker."""

    exit_code = EXIT_UNAVAILABLE


class Backend(Protocol):
    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        """Yield the answer piece by piece; stop early once ``should_stop()`` is true; at
        the end, return why the model stopped (``Pieces``)."""
        ...

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """The prompt's length in the model's own tokens, chat template included: a
        conversation's history must leave the answer its room in the context
        (engine/answering/history.py), and only the model's tokenizer knows how much that is."""
        ...

    async def health(self) -> dict[str, Any]:
        """What ``/healthz`` says of the backend: its kind, its model, and, for a model
        server, whether it answers now (``server_answering``)."""
        ...


@runtime_checkable
class Interruptible(Protocol):
    """A backend that can end the computation under way at once, not only between pieces:
    the model in this process (a prompt's processing takes seconds, a token 10 ms or more).
    The engine calls ``interrupt`` the moment the running answer must stop (a cancel, its
    time limit, a shutdown); ``stream`` then raises ``GenerationStopped``."""

    def interrupt(self) -> None: ...


@dataclass(frozen=True)
class GenerationLimits:
    """How the model picks its tokens, and how many (the CONCIERGE_ settings of the same
    names, but top-p and min-p, which are fixed; docs/quality.md says how the defaults were
    chosen)."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = TOP_P
    min_p: float = MIN_P
    repeat_penalty: float = 1.1
