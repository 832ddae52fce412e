"""What an OpenAI-compatible server offers besides the answer: its models (the start-up check),
its tokenizer (the prompt budget), its slots (whether a stopped answer has left it).

Each server has its own endpoints outside the OpenAI API; each is tried, and what is missing
is done without: an estimate instead of a count, no wait instead of a watched slot.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from config.settings import ConfigError
from config.urls import masked_url
from engine.backends.base import FRAMING_TOKENS, BackendUnavailable, ChatMessage
from engine.backends.openai.sse import KEY_VARIABLE, URL_VARIABLE, error_text

log = logging.getLogger(__name__)

# The safe estimate where the server has no tokenizer endpoint (Ollama): one token per two
# bytes of UTF-8. English averages four to five bytes a token with the Llama, Qwen and GPT
# tokenizers, and a CJK character is three bytes for one or two tokens, so the estimate is
# high: a prompt budgeted with it fits, at the cost of fewer passages.
BYTES_PER_TOKEN_ESTIMATE = 2
PROBE = (ChatMessage("user", "Hello"),)


def estimate_tokens(messages: Sequence[ChatMessage]) -> int:
    """More tokens than any usual tokenizer makes of ``messages``, template included."""
    text_bytes = sum(len(message.content.encode()) for message in messages)
    return -(-text_bytes // BYTES_PER_TOKEN_ESTIMATE) + FRAMING_TOKENS * len(messages)


def server_root(base_url: str) -> str:
    """Where a server's own endpoints live: the OpenAI API's URL without its ``/v1``."""
    return base_url.rstrip("/").removesuffix("/v1")


async def list_models(http: httpx.AsyncClient, base_url: str, timeout_s: float) -> list[str]:
    """The ids of ``GET /v1/models``: the start-up check, failing as the engine's start should."""
    shown = masked_url(base_url)
    try:
        response = await http.get(f"{base_url}/models", timeout=timeout_s)
    except httpx.HTTPError as error:
        raise BackendUnavailable(
            f"cannot reach the model server at {shown} ({type(error).__name__}); "
            f"is it running? check {URL_VARIABLE}"
        ) from None
    status = response.status_code
    if status in (401, 403):
        raise ConfigError(f"{KEY_VARIABLE}: the model server at {shown} refused it (HTTP {status})")
    if status == 404:
        raise ConfigError(f"{URL_VARIABLE}: no OpenAI API at {shown} (it usually ends in /v1)")
    if status != 200:
        said = error_text(response.text)
        raise BackendUnavailable(f"the model server at {shown} answered HTTP {status}: {said}")
    try:
        return [str(model["id"]) for model in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        raise BackendUnavailable(f"{shown}/models is not an OpenAI model list") from None


async def a_slot_is_free(http: httpx.AsyncClient, base_url: str) -> bool | None:
    """Whether llama.cpp's server has a slot free now (``GET /slots``); None for a server
    that does not say (vLLM, Ollama, llama-cpp-python, or llama.cpp started with --no-slots)."""
    try:
        response = await http.get(f"{server_root(base_url)}/slots")
        slots = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(slots, list) or not all(isinstance(slot, dict) for slot in slots):
        return None
    # is_processing since 2024; state (0 = idle) before
    return any(slot.get("is_processing", slot.get("state", 0) != 0) is False for slot in slots)


Count = Callable[[httpx.AsyncClient, str, str, Sequence[ChatMessage]], Awaitable[int]]


@dataclass(frozen=True)
class ServerCounter:
    """A server's own token count of a prompt, by the endpoint it has."""

    name: str
    count_with: Count
    root: str
    model: str

    async def count(self, http: httpx.AsyncClient, messages: Sequence[ChatMessage]) -> int:
        return await self.count_with(http, self.root, self.model, messages)


def _dicts(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    return [message.as_dict() for message in messages]


async def _llama_cpp_count(
    http: httpx.AsyncClient, root: str, model: str, messages: Sequence[ChatMessage]
) -> int:
    """llama.cpp's server: the chat template applied (``/apply-template``), then tokenized."""
    rendered = await http.post(f"{root}/apply-template", json={"messages": _dicts(messages)})
    prompt = rendered.raise_for_status().json()["prompt"]
    body = {"content": prompt, "add_special": True, "parse_special": True}
    tokens = (await http.post(f"{root}/tokenize", json=body)).raise_for_status().json()["tokens"]
    return len(tokens)


async def _vllm_count(
    http: httpx.AsyncClient, root: str, model: str, messages: Sequence[ChatMessage]
) -> int:
    """vLLM: ``/tokenize`` takes the messages and applies the template itself."""
    body = {"model": model, "messages": _dicts(messages), "add_generation_prompt": True}
    response = (await http.post(f"{root}/tokenize", json=body)).raise_for_status()
    return int(response.json()["count"])


async def _llama_cpp_python_count(
    http: httpx.AsyncClient, root: str, model: str, messages: Sequence[ChatMessage]
) -> int:
    """llama-cpp-python's server: ``/extras/tokenize/count`` counts text only, so each message
    adds the framing a template puts around it (as ``LlamaBackend`` does without one)."""
    text = "\n".join(message.content for message in messages)
    body = {"input": text, "model": model}
    response = (await http.post(f"{root}/extras/tokenize/count", json=body)).raise_for_status()
    return int(response.json()["count"]) + FRAMING_TOKENS * len(messages)


COUNTERS: tuple[tuple[str, Count], ...] = (
    ("llama.cpp /tokenize", _llama_cpp_count),
    ("vLLM /tokenize", _vllm_count),
    ("llama-cpp-python /extras/tokenize/count", _llama_cpp_python_count),
)


async def find_counter(http: httpx.AsyncClient, base_url: str, model: str) -> ServerCounter | None:
    """The first tokenizer endpoint that counts a probe; None when the server has none."""
    root = server_root(base_url)
    for name, count_with in COUNTERS:
        counter = ServerCounter(name, count_with, root, model)
        try:
            if await counter.count(http, PROBE) > 0:
                return counter
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            log.debug("no %s: %s", name, type(error).__name__)
    return None
