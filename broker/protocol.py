"""The wire protocol, version 5: every name, property and message that crosses RabbitMQ.

This module and ``docs/protocol.md`` are the contract; a client in another language needs
only that document. Messages are JSON objects (``content_type: application/json``, UTF-8)
validated by the pydantic models below, so a bad payload fails here, at the edge, with a reason.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)

from config.errors import ConciergeError
from config.spaces import DEFAULT_SPACE, SpaceName
from config.texts import Locale

# 2: requests carry a context, echoed in events; token events batch.
# 3: requests carry a conversation's history; ``done`` says how the answer finished, which
#    sources it used, how much history it used, and a rescrape's pages not read.
# 4: requests carry the asker's locale (the language of the engine's own texts); votes on
#    answers (``feedback``) go to the engine on a queue of their own.
# 5: ``started`` says which attempt at the answer it begins (an engine died mid-answer and
#    another starts it again: the text so far is dropped).
#    Later, still 5: requests may name their ``space`` (docs/spaces.md). Optional, and left out
#    of the body when it is the default, so a request without a space is byte for byte a v5
#    one either way; an older engine dead-letters one with a space rather than answer it from
#    the wrong site.
PROTOCOL_VERSION: Final = 5
CONTENT_TYPE = "application/json"
MAX_BODY_BYTES = 64 * 1024
MAX_QUESTION_CHARS = 16_000

REQUEST_ROUTING_KEY = "request"
# A full request queue refuses at once ("busy"); every process declares the same length.
REQUEST_QUEUE_MAX_LENGTH = 1000
FEEDBACK_QUEUE_MAX_LENGTH = 100_000  # votes waiting for an engine; the oldest go first
ERROR_HEADER = "x-concierge-error"

SessionId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{8,64}$")]
RoutingName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,200}$")]

MAX_CONTEXT_ENTRIES = 8
ContextKey = Annotated[str, Field(pattern=r"^[a-z0-9_]{1,32}$")]
ContextValue = Annotated[str, Field(max_length=200)]
# What the asking bot needs to find its messages again (a restarted bot has forgotten them):
# opaque to the engine, which echoes it in every reply event of the exchange.
Context = Annotated[dict[ContextKey, ContextValue], Field(max_length=MAX_CONTEXT_ENTRIES)]

MAX_HISTORY_TURNS = 50
MAX_HISTORY_TURN_CHARS = 8_000
MAX_SOURCES = 20
MAX_FAILURES_LISTED = 100  # a done event must stay under MAX_BODY_BYTES; the total is counted


@dataclass(frozen=True)
class Names:
    """Every exchange and queue name, all under one prefix so test runs never collide."""

    prefix: str

    @property
    def request_exchange(self) -> str:
        return f"{self.prefix}.request"

    @property
    def request_queue(self) -> str:
        return f"{self.prefix}.request"

    @property
    def expired_exchange(self) -> str:
        return f"{self.prefix}.expired"

    @property
    def expired_queue(self) -> str:
        return f"{self.prefix}.expired"

    @property
    def dead_queue(self) -> str:
        return f"{self.prefix}.dead"

    @property
    def reply_exchange(self) -> str:
        return f"{self.prefix}.reply"

    def reply_queue(self, bot_id: str) -> str:
        return f"{self.prefix}.reply.{bot_id}"

    @property
    def cancel_exchange(self) -> str:
        return f"{self.prefix}.cancel"

    def cancel_queue(self, engine_name: str) -> str:
        return f"{self.prefix}.cancel.{engine_name}"

    @property
    def feedback_exchange(self) -> str:
        return f"{self.prefix}.feedback"

    @property
    def status_exchange(self) -> str:
        """Fanout: the engine's reply events copied for watchers, tokens merged (protocol.md)."""
        return f"{self.prefix}.status"

    @property
    def feedback_queue(self) -> str:
        return f"{self.prefix}.feedback"


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[5] = PROTOCOL_VERSION


class HistoryTurn(BaseModel):
    """One earlier message of the conversation: the asker's (``user``) or the bot's own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    text: str = Field(max_length=MAX_HISTORY_TURN_CHARS)


def new_session_id() -> str:
    """A fresh id for one question/answer exchange (never a user or a channel)."""
    return uuid.uuid4().hex


class Request(_Message):
    """User → engine: answer a question (``ask``) or rebuild the knowledge base (``rescrape``)."""

    type: Literal["ask", "rescrape"] = "ask"
    session_id: SessionId
    reply_to: RoutingName
    user_id: str = Field(max_length=200)
    question: str = Field("", max_length=MAX_QUESTION_CHARS)
    sent_at: float
    deadline: float
    platform: str = Field("", max_length=50)
    context: Context = {}
    # The conversation so far, oldest first; the question itself is not part of it.
    history: tuple[HistoryTurn, ...] = Field((), max_length=MAX_HISTORY_TURNS)
    # The language of what the engine writes itself (a rescrape's progress, why a request
    # failed or expired); None: the engine's CONCIERGE_LOCALE. An answer's own sentences
    # ("not on the site", the quote) follow the question's language.
    locale: Locale | None = None
    # The space whose site and persona answer (docs/spaces.md); one the engine does not know
    # ends ``failed``, never answered from another space's articles.
    space: SpaceName = DEFAULT_SPACE

    @model_serializer(mode="wrap")
    def _without_default_space(self, handler: SerializerFunctionWrapHandler) -> object:
        """The default space is left out of the body: such a request is a plain v5 one."""
        body = handler(self)
        if isinstance(body, dict) and body.get("space") == DEFAULT_SPACE:
            del body["space"]
        return body


class Cancel(_Message):
    """User → engine: stop the exchange ``session_id``, queued or running."""

    type: Literal["cancel"] = "cancel"
    session_id: SessionId
    sent_at: float
    user_id: str = Field("", max_length=200)


class Feedback(_Message):
    """User → engine: a vote on the answer ``session_id``; one per person (``user_id``),
    changed by the next, withdrawn by ``none``."""

    type: Literal["feedback"] = "feedback"
    session_id: SessionId
    user_id: str = Field(min_length=1, max_length=200)
    vote: Literal["up", "down", "none"]
    platform: str = Field(max_length=32)
    sent_at: float


class _Event(_Message):
    session_id: SessionId
    seq: int = Field(ge=0)
    context: Context = {}  # the request's, echoed


class Started(_Event):
    type: Literal["started"] = "started"
    waited_s: float
    # 1 for the first; more when an engine died answering and this one starts again: what
    # was shown of the answer so far is to be dropped (the new one comes whole).
    attempt: int = Field(1, ge=1)


class TokenEvent(_Event):
    type: Literal["token"] = "token"
    text: str
    tokens: int = Field(1, ge=0)  # model tokens in ``text``; 0: text the engine adds (sources)


class Progress(_Event):
    type: Literal["progress"] = "progress"
    text: str
    counts: dict[str, int] = {}


FinishReason = Literal["stop", "length", "repetition"]


class PageNotRead(BaseModel):
    """A page a rescrape did not store, and why (``failed``: an error; ``skipped``: by rule)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(max_length=2000)
    reason: str = Field(max_length=300)
    outcome: Literal["failed", "skipped"]


class Done(_Event):
    type: Literal["done"] = "done"
    text: str
    tokens: int
    ttft_s: float | None
    tokens_per_s: float | None
    elapsed_s: float
    # How the model's answer ended: on its own (``stop``), at CONCIERGE_MAX_TOKENS
    # (``length``), or stopped because it repeated itself (``repetition``).
    finish_reason: FinishReason = "stop"
    sources: tuple[str, ...] = Field((), max_length=MAX_SOURCES)  # addresses the answer used
    not_on_site: bool = False  # the knowledge base does not cover the question
    history_used: int = Field(0, ge=0)  # turns of the request's history given to the model
    history_dropped: int = Field(0, ge=0)  # the oldest turns left out to fit the context
    failures: tuple[PageNotRead, ...] = Field((), max_length=MAX_FAILURES_LISTED)  # rescrape
    failures_total: int = Field(0, ge=0)  # all pages not read, listed or not


class Cancelled(_Event):
    type: Literal["cancelled"] = "cancelled"
    text: str = ""
    tokens: int = 0
    tokens_after_cancel: int = 0
    stop_latency_s: float | None = None


class Failed(_Event):
    type: Literal["failed"] = "failed"
    reason: str
    text: str = ""


class Expired(_Event):
    type: Literal["expired"] = "expired"
    reason: str


ReplyEvent = Annotated[
    Started | TokenEvent | Progress | Done | Cancelled | Failed | Expired,
    Field(discriminator="type"),
]
TerminalEvent = Done | Cancelled | Failed | Expired
TERMINAL_TYPES = frozenset({"done", "cancelled", "failed", "expired"})

_reply_adapter: TypeAdapter[ReplyEvent] = TypeAdapter(ReplyEvent)


class ProtocolError(ConciergeError, ValueError):
    """A message that is not valid protocol; ``reason`` says why in one line (for the
    dead-letter queue's header and the log, never for a person)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def encode(message: BaseModel) -> bytes:
    return message.model_dump_json().encode()


def _check_envelope(body: bytes, content_type: str | None) -> None:
    if content_type not in (None, "", CONTENT_TYPE):
        raise ProtocolError(f"content type {content_type!r} is not {CONTENT_TYPE}")
    if len(body) > MAX_BODY_BYTES:
        raise ProtocolError(f"body of {len(body)} bytes exceeds {MAX_BODY_BYTES}")


def _first_error(error: ValidationError) -> str:
    issue = error.errors(include_url=False)[0]
    where = ".".join(str(part) for part in issue["loc"]) or "body"
    return f"{where}: {issue['msg']}"


def decode_request(body: bytes, content_type: str | None = CONTENT_TYPE) -> Request:
    _check_envelope(body, content_type)
    try:
        return Request.model_validate_json(body)
    except ValidationError as error:
        raise ProtocolError(f"invalid request: {_first_error(error)}") from None


def decode_cancel(body: bytes, content_type: str | None = CONTENT_TYPE) -> Cancel:
    _check_envelope(body, content_type)
    try:
        return Cancel.model_validate_json(body)
    except ValidationError as error:
        raise ProtocolError(f"invalid cancel: {_first_error(error)}") from None


def decode_feedback(body: bytes, content_type: str | None = CONTENT_TYPE) -> Feedback:
    _check_envelope(body, content_type)
    try:
        return Feedback.model_validate_json(body)
    except ValidationError as error:
        raise ProtocolError(f"invalid feedback: {_first_error(error)}") from None


def decode_event(body: bytes, content_type: str | None = CONTENT_TYPE) -> ReplyEvent:
    _check_envelope(body, content_type)
    try:
        return _reply_adapter.validate_json(body)
    except ValidationError as error:
        raise ProtocolError(f"invalid reply event: {_first_error(error)}") from None


def make_request(
    *,
    reply_to: str,
    user_id: str,
    question: str,
    ttl_s: float,
    kind: Literal["ask", "rescrape"] = "ask",
    platform: str = "",
    session_id: str | None = None,
    context: dict[str, str] | None = None,
    history: tuple[HistoryTurn, ...] = (),
    locale: Locale | None = None,
    space: str = DEFAULT_SPACE,
) -> Request:
    """A request stamped now, whose deadline is ``ttl_s`` from now (its AMQP TTL too)."""
    now = time.time()
    return Request(
        type=kind,
        session_id=session_id or new_session_id(),
        reply_to=reply_to,
        user_id=user_id,
        question=question,
        sent_at=now,
        deadline=now + ttl_s,
        platform=platform,
        context=context or {},
        history=history,
        locale=locale,
        space=space,
    )
