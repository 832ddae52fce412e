"""The LLM backend behind a small interface, and its llama.cpp implementation.

The engine only needs ``stream(messages, should_stop)``: text pieces, one per token. A backend
that streams from an OpenAI-compatible server can take this one's place later.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

ShouldStop = Callable[[], bool]


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system", "user" or "assistant"
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


class GenerationStopped(Exception):
    """``should_stop`` became true while the model was still processing the prompt."""


class Backend(Protocol):
    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Iterator[str]:
        """Yield the answer piece by piece; stop early once ``should_stop()`` is true."""
        ...


@dataclass(frozen=True)
class ModelOptions:
    path: Path
    context_size: int = 2048
    threads: int | None = None
    seed: int = -1


@dataclass(frozen=True)
class GenerationLimits:
    max_tokens: int = 512
    temperature: float = 0.2


class LlamaBackend:
    """llama-cpp-python with the model's own chat template.

    Generation blocks, so the engine runs ``stream`` in a thread. llama.cpp's abort callback
    makes prompt processing interruptible too: it asks ``should_stop`` between compute steps.
    """

    def __init__(self, options: ModelOptions) -> None:
        from llama_cpp import Llama  # imported here: loading the library is slow

        self.options = options
        self.llm = Llama(
            model_path=str(options.path),
            n_ctx=options.context_size,
            n_threads=options.threads or max(1, (os.cpu_count() or 1)),
            seed=options.seed if options.seed >= 0 else 0xFFFFFFFF,
            verbose=False,
        )
        self._should_stop: ShouldStop = lambda: False
        self._install_abort_callback()

    def _install_abort_callback(self) -> None:
        import llama_cpp

        @llama_cpp.ggml_abort_callback  # type: ignore[untyped-decorator]  # llama_cpp is untyped
        def abort(_data: ctypes.c_void_p) -> bool:
            return bool(self._should_stop())

        self._abort = abort  # keep a reference: ctypes would free it otherwise

    def _watch_compute(self, on: bool) -> None:
        """Install or remove the abort callback.

        ggml calls it at every node of every graph: a thousand Python calls per token, each
        taking the GIL from the event loop. So it is on only while the prompt is processed,
        where a cancel could otherwise wait for seconds; once tokens flow, the token loop
        checks for cancels between tokens instead.
        """
        import llama_cpp

        callback = self._abort if on else llama_cpp.ggml_abort_callback()  # a NULL pointer
        llama_cpp.llama_set_abort_callback(self.llm.ctx, callback, None)

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Iterator[str]:
        self._should_stop = should_stop
        self._watch_compute(True)
        try:
            chunks: Any = self.llm.create_chat_completion(
                messages=[message.as_dict() for message in messages],  # type: ignore[misc]
                max_tokens=limits.max_tokens,
                temperature=limits.temperature,
                stream=True,
            )
            for index, chunk in enumerate(chunks):
                if index == 0:
                    self._watch_compute(False)  # the prompt is processed
                text = chunk["choices"][0]["delta"].get("content")
                if text:
                    yield text
        except RuntimeError as error:
            if "llama_decode returned 2" not in str(error):
                raise
            self.reset()  # the aborted decode left the context half-filled
            raise GenerationStopped from None
        finally:
            self._watch_compute(False)
            self._should_stop = lambda: False

    def reset(self) -> None:
        """Forget everything the context holds: the next prompt is processed in full, sharing
        no prefix with the last (llama.cpp otherwise reuses the matching prefix). Needed after
        an aborted decode; ``concierge bench`` also calls it so a repeated prompt costs the same.
        Not while ``stream`` runs."""
        import llama_cpp

        self.llm.reset()  # type: ignore[no-untyped-call]  # llama_cpp leaves it unannotated
        memory = llama_cpp.llama_get_memory(self.llm.ctx)
        llama_cpp.llama_memory_clear(memory, True)


def load_backend(options: ModelOptions) -> Backend:
    log.info("loading model %s", options.path.name)
    return LlamaBackend(options)
