"""The second backend: any server that streams OpenAI chat completions (vLLM, llama.cpp's
server, Ollama, llama-cpp-python's server), in place of the model in this process.

The token loop is unchanged: ``stream`` runs in its thread and yields text pieces. The HTTP
client lives on a private event loop (``engine.backends.openai.private_loop``), so stopping never
waits on a
blocking read: the token loop's thread waits for each piece at most ``STOP_POLL_S`` at a time,
asks ``should_stop``, and on a stop cancels the read, which closes the connection at once,
also while the server is still reading the prompt and has sent nothing. What the server does
then is its own affair (docs/operations.md); where it says (llama.cpp's ``/slots``), the next
answer waits until the stopped one has left the server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import queue
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from broker.protocol import FinishReason
from config.settings import ConfigError
from config.urls import masked_url
from engine.backends.base import (
    ChatMessage,
    GenerationLimits,
    GenerationStopped,
    Pieces,
    ShouldStop,
)
from engine.backends.openai.options import OpenAIOptions
from engine.backends.openai.private_loop import PrivateLoop
from engine.backends.openai.server import (
    ServerCounter,
    a_slot_is_free,
    estimate_tokens,
    find_counter,
    list_models,
)
from engine.backends.openai.sse import (
    BUSY_STATUSES,
    MODEL_VARIABLE,
    Ending,
    ModelServerError,
    read_pieces,
    status_reason,
)

log = logging.getLogger(__name__)

STOP_POLL_S = 0.01  # a waiting stream asks should_stop this often: the bound on a stop's delay
CONNECT_TIMEOUT_S = 10.0
CHECK_TIMEOUT_S = 3.0  # /v1/models, at start and for each /healthz
COUNT_TIMEOUT_S = 10.0  # a token count the server does not give in time is estimated
BUSY_RETRY_S = 30.0  # 429 and 503 are retried with backoff this long, then failed as busy
UNREACHABLE_RETRY_S = 5.0  # a server restarting between two answers gets this long to return
BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 4.0
SLOTS_POLL_S = 0.05
SLOTS_WAIT_MAX_S = 60.0  # then the next answer goes anyway: the server queues it

# GenerationLimits fields and the request fields they are sent as: the OpenAI name, and a
# server's own name for the same setting (llama.cpp: repeat_penalty; vLLM: repetition_penalty).
# Servers ignore the fields they do not know.
REQUEST_FIELDS: dict[str, tuple[str, ...]] = {
    "max_tokens": ("max_tokens",),
    "temperature": ("temperature",),
    "top_p": ("top_p",),
    "top_k": ("top_k",),
    "min_p": ("min_p",),
    "repeat_penalty": ("repeat_penalty", "repetition_penalty"),
    "frequency_penalty": ("frequency_penalty",),
    "presence_penalty": ("presence_penalty",),
}


class _Mark(Enum):
    STOPPED = "stopped"  # should_stop turned true


@dataclass(frozen=True)
class _Finished:
    """The answer is complete; ``reason`` is why, in the engine's words, when it is one."""

    reason: FinishReason | None


Item = str | BaseException | _Finished | _Mark


class OpenAIBackend:
    """Streams chat completions from an OpenAI-compatible server. Build it with ``connect``."""

    def __init__(self, options: OpenAIOptions) -> None:
        self.options = options
        self.base_url, auth = without_userinfo(options.base_url.rstrip("/"))
        self.shown_url = masked_url(options.base_url.rstrip("/"))
        self.model = options.model or ""
        self.counter: ServerCounter | None = None  # how the server counts tokens; None: estimate
        self.has_slots = False  # llama.cpp's /slots says when a stopped answer has left
        self._stopped_early = False  # the last answer was stopped: the server may still run it
        self._loop = PrivateLoop("openai-backend")
        key = options.api_key
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        timeout = httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)  # the time limit bounds reads
        self._http = httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth)

    @classmethod
    def connect(cls, options: OpenAIOptions) -> OpenAIBackend:
        """A backend whose server answered. Raises ``BackendUnavailable`` when it cannot be
        reached and ``ConfigError`` (naming the variable) when it refuses the key or the URL."""
        backend = cls(options)
        try:
            backend._loop.run(backend._start())
        except BaseException:
            backend.close()
            raise
        return backend

    async def _start(self) -> None:
        models = await list_models(self._http, self.base_url, CHECK_TIMEOUT_S)
        if not self.model:
            if not models:
                raise ConfigError(f"{MODEL_VARIABLE}: not set, and {self.shown_url} lists no model")
            self.model = models[0]
        elif self.model not in models:
            log.warning("the model server lists no %r (it has %s)", self.model, ", ".join(models))
        self.counter = await find_counter(self._http, self.base_url, self.model)
        self.has_slots = await a_slot_is_free(self._http, self.base_url) is not None
        log.info(
            "model server %s, model %s; tokens counted by %s%s",
            self.shown_url,
            self.model,
            self.counter.name if self.counter else "estimate",
            "; /slots watched" if self.has_slots else "",
        )

    def close(self) -> None:
        if not self._loop.loop.is_closed():
            self._loop.run(self._http.aclose())
            self._loop.close()

    # --- the answer ------------------------------------------------------------------------

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        pieces: queue.SimpleQueue[Item] = queue.SimpleQueue()
        job = self._loop.submit(self._pump(self.request_body(messages, limits), pieces))
        ended = False
        try:
            while True:
                item = _take(pieces, should_stop)
                if item is _Mark.STOPPED:
                    raise GenerationStopped
                if isinstance(item, _Finished | BaseException):
                    ended = True
                    if isinstance(item, BaseException):
                        raise item
                    return item.reason  # a piece may hold several tokens: the server knows
                yield item
        finally:
            job.cancel()  # closes the connection, if the answer did not end by itself
            self._stopped_early = not ended

    def request_body(
        self, messages: Sequence[ChatMessage], limits: GenerationLimits
    ) -> dict[str, Any]:
        """The chat completion request: the messages, the decoding settings, streaming on."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [message.as_dict() for message in messages],
            "stream": True,
        }
        for name, value in dataclasses.asdict(limits).items():
            for field in REQUEST_FIELDS.get(name, ()):
                payload[field] = value
        if self.options.seed >= 0:
            payload["seed"] = self.options.seed
        return payload

    async def _pump(self, payload: dict[str, Any], pieces: queue.SimpleQueue[Item]) -> None:
        """Read the answer into ``pieces``, ending with ``_Finished`` or the error that
        ended it."""
        try:
            await self._wait_for_a_free_slot()
            ending = Ending()
            async with self._open_stream(payload) as lines:
                async for piece in read_pieces(lines, ending):
                    pieces.put(piece)
            pieces.put(_Finished(_finish_reason(ending.reason)))
        except ModelServerError as error:
            pieces.put(error)
        except httpx.TransportError as error:  # the server died, or the network failed
            reason = "the model server closed the connection mid-answer"
            pieces.put(ModelServerError(reason, type(error).__name__))
        except Exception as error:  # a bug: the worker reports it as an engine error
            pieces.put(error)

    @asynccontextmanager
    async def _open_stream(self, payload: dict[str, Any]) -> AsyncIterator[AsyncIterator[str]]:
        """The response's lines, once the server accepted the request; busy (429, 503) and
        unreachable servers are retried with backoff for a while, then failed."""
        backoff = Backoff()
        url = f"{self.base_url}/chat/completions"
        while True:
            try:
                response = await self._http.send(
                    self._http.build_request("POST", url, json=payload), stream=True
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                if await backoff.retry(UNREACHABLE_RETRY_S):
                    continue
                reason = f"cannot reach the model server at {self.shown_url}"
                raise ModelServerError(reason, type(error).__name__) from None
            if response.status_code == 200:
                break
            body = (await response.aread()).decode(errors="replace")
            await response.aclose()
            if response.status_code in BUSY_STATUSES and await backoff.retry(
                BUSY_RETRY_S, _retry_after_s(response)
            ):
                continue
            raise ModelServerError(status_reason(response.status_code, body, self.model))
        try:
            yield response.aiter_lines()
        finally:
            await response.aclose()

    async def _wait_for_a_free_slot(self) -> None:
        """After a stopped answer, until the server says a slot is free again (llama.cpp keeps
        reading a prompt its client left: issue 15232)."""
        if not (self._stopped_early and self.has_slots):
            return
        began = time.monotonic()
        while time.monotonic() - began < SLOTS_WAIT_MAX_S:
            if await a_slot_is_free(self._http, self.base_url) is not False:
                break
            await asyncio.sleep(SLOTS_POLL_S)
        waited_s = time.monotonic() - began
        log.info("the model server finished the stopped answer after %.2f s", waited_s)

    # --- what the rest of the engine asks ---------------------------------------------------

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """The prompt's length in the server's tokens (its tokenizer endpoint, where it has
        one), else the safe estimate (``engine.backends.openai.server.estimate_tokens``)."""
        counter = self.counter
        if counter is not None:
            try:
                return self._loop.run(counter.count(self._http, messages), COUNT_TIMEOUT_S)
            except Exception as error:  # the estimate still lets the answer go ahead
                log.warning("the model server did not count tokens (%s): estimated", error)
        return estimate_tokens(messages)

    def slot_is_free(self) -> bool | None:
        """Whether the server has a slot free now; None when it does not say (no ``/slots``)."""
        return self._loop.run(a_slot_is_free(self._http, self.base_url), CHECK_TIMEOUT_S)

    async def health(self) -> dict[str, Any]:
        """For ``/healthz``, awaited on the engine's loop: the backend and whether its server
        answers now."""
        answering = await self._loop.run_here(self._answers())
        return {
            "kind": "openai",
            "url": self.shown_url,
            "model": self.model,
            "server_answering": answering,
            "tokens_counted_by": self.counter.name if self.counter else "estimate",
        }

    async def _answers(self) -> bool:
        try:
            response = await self._http.get(f"{self.base_url}/models", timeout=CHECK_TIMEOUT_S)
        except httpx.HTTPError:
            return False
        return response.status_code == 200


def without_userinfo(url: str) -> tuple[str, httpx.BasicAuth | None]:
    """``url`` without its ``user:password@``, and those as basic auth. httpx logs each
    request's URL (at INFO, which the libraries log at): with the credentials in the URL they
    would be in every line."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    auth = httpx.BasicAuth(unquote(user), unquote(password))
    return urlunsplit(parts._replace(netloc=host)), auth


def _finish_reason(said: str | None) -> FinishReason | None:
    """The server's finish reason in the engine's words; None for one it has no word for
    (``content_filter``, ``tool_calls``)."""
    if said == "length":
        return "length"
    return "stop" if said == "stop" else None


def _take(pieces: queue.SimpleQueue[Item], should_stop: ShouldStop) -> Item:
    """The next piece, the end or an error; STOPPED as soon as ``should_stop()`` is true, checked
    before each piece and every ``STOP_POLL_S`` while none comes."""
    while not should_stop():
        try:
            return pieces.get(timeout=STOP_POLL_S)
        except queue.Empty:
            continue
    return _Mark.STOPPED


def _retry_after_s(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):  # absent, or an HTTP date: our own backoff then
        return None


class Backoff:
    """Waits that double from ``BACKOFF_FIRST_S`` up to ``BACKOFF_MAX_S``, within a budget."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.delay_s = BACKOFF_FIRST_S

    async def retry(self, budget_s: float, asked_s: float | None = None) -> bool:
        """Wait before the next try; False (no wait) once the budget would be spent."""
        delay_s = min(asked_s, BACKOFF_MAX_S) if asked_s is not None else self.delay_s
        if time.monotonic() - self.began + delay_s > budget_s:
            return False
        await asyncio.sleep(delay_s)
        self.delay_s = min(self.delay_s * 2, BACKOFF_MAX_S)
        return True
