"""What an OpenAI-compatible server says, read into what the engine needs: its event stream
into text pieces, its error responses into one-line reasons the asker can act on.

Pure functions of the bytes received, so every malformed or truncated stream is tested without
a server. The servers differ in small ways, all accepted here: keep-alive comments
(llama-cpp-python's ``: ping``), an ``error:`` event (llama.cpp's server), a ``data:`` event
holding ``{"error": ...}`` (vLLM), a last chunk without choices (usage).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, ValidationError

from config.text_helpers import shorten
from engine.backends.base import BackendFailed

DONE = "[DONE]"
REASON_MAX_CHARS = 200  # a server's own message, cut to fit one line of a reply
KEY_VARIABLE = "CONCIERGE_OPENAI_API_KEY"
MODEL_VARIABLE = "CONCIERGE_OPENAI_MODEL"
URL_VARIABLE = "CONCIERGE_OPENAI_BASE_URL"
CUT_SHORT = (
    "the model server ended the answer without a finish reason "
    "(cut short by another request? see docs/operations.md)"
)
TRUNCATED = "the model server's stream ended mid-answer"
BUSY_STATUSES = (429, 503)


class ModelServerError(BackendFailed):
    """The model server failed this answer. The message is the asker's reason: one line, never
    a secret (nothing here ever sees the API key)."""


class _Delta(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # a third party's wire: extras vary

    content: str | None = None


class _Choice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    delta: _Delta = _Delta()
    finish_reason: str | None = None


class _Chunk(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    choices: list[_Choice]


@dataclass
class Ending:
    """Why the model stopped, as the server said (``stop``, ``length``...), once it has."""

    reason: str | None = None


async def read_pieces(lines: AsyncIterator[str], ending: Ending) -> AsyncIterator[str]:
    """The answer's text pieces, from the lines of a streamed chat completion; the finish
    reason goes to ``ending``.

    Ends at ``[DONE]`` after a finish reason; raises ``ModelServerError`` for an error event,
    a malformed event, a ``[DONE]`` without a finish reason (llama-cpp-python's server sends
    that when another request interrupts this one) and a stream that stops before either.
    """
    async for field, data in sse_events(lines):
        if field == "error":
            raise ModelServerError(f"the model server failed mid-answer: {error_text(data)}")
        if data == DONE:
            if ending.reason is None:
                raise ModelServerError(CUT_SHORT)
            return
        text, finish_reason = parse_chunk(data)
        ending.reason = ending.reason or finish_reason
        if text:
            yield text
    if ending.reason is None:
        raise ModelServerError(TRUNCATED)


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """``(field, value)`` of each server-sent event: ``data`` (lines joined) or ``error``.

    Comments (``:``) and other fields (``event``, ``id``, ``retry``) are skipped. An event the
    stream ends without its blank line is still given: the caller decides if it is complete.
    """
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "data", "\n".join(data)
                data = []
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "error":
            yield "error", value
    if data:
        yield "data", "\n".join(data)


def parse_chunk(data: str) -> tuple[str | None, str | None]:
    """The text and finish reason of one ``chat.completion.chunk``."""
    try:
        payload = json.loads(data)
    except ValueError:
        raise ModelServerError("the model server sent a malformed event (not JSON)") from None
    if isinstance(payload, dict) and "error" in payload:
        raise ModelServerError(f"the model server failed mid-answer: {error_text(data)}")
    try:
        chunk = _Chunk.model_validate(payload)
    except ValidationError:
        raise ModelServerError(
            "the model server sent a malformed event (not a chat completion chunk)"
        ) from None
    if not chunk.choices:  # a usage-only chunk
        return None, None
    choice = chunk.choices[0]
    return choice.delta.content, choice.finish_reason


def error_text(body: str) -> str:
    """The server's own words from an error body, on one line and short: the OpenAI shape
    (``{"error": {"message": ...}}``), vLLM's and FastAPI's (``message``, ``detail``), or the
    text itself."""
    try:
        payload = json.loads(body)
    except ValueError:
        return _one_line(body) or "no details"
    return _one_line(_message_of(payload)) or "no details"


def _message_of(payload: object) -> str:
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict):
        for key in ("error", "message", "detail"):
            if key in payload:
                return _message_of(payload[key])
    return json.dumps(payload)


def _one_line(text: str) -> str:
    return shorten(" ".join(text.split()), REASON_MAX_CHARS)


def status_reason(status: int, body: str, model: str) -> str:
    """Why a request was refused, for the asker, naming the setting to fix when there is one."""
    said = error_text(body)
    if status in (401, 403):
        return f"the model server refused the API key (HTTP {status}): check {KEY_VARIABLE}"
    if status == 404:
        return (
            f"the model server has no model {model!r} (HTTP 404: {said}): check {MODEL_VARIABLE}, "
            f"and that {URL_VARIABLE} ends in /v1"
        )
    if status in BUSY_STATUSES:
        return f"the model server is busy (HTTP {status}: {said}); try again later"
    if 400 <= status < 500:
        return f"the model server rejected the request (HTTP {status}: {said})"
    return f"the model server failed (HTTP {status}: {said})"
