"""The model in this process: llama-cpp-python with the GGUF's own chat template.

The default backend, right for a small VPS (``CONCIERGE_BACKEND=llama``).
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.protocol import FinishReason
from engine.backends.base import (
    FRAMING_TOKENS,
    ChatMessage,
    GenerationLimits,
    GenerationStopped,
    Pieces,
    ShouldStop,
)

if TYPE_CHECKING:
    from engine.backends.state_cache import StateCache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelOptions:
    path: Path
    context_size: int = 2048
    threads: int | None = None
    seed: int = -1
    # llama.cpp's state after recent answers (engine/backends/state_cache.py)
    state_cache_bytes: int = 0


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
        self._template = _chat_template(self.llm)
        self.state_cache = self._install_state_cache(options.state_cache_bytes)

    def _install_state_cache(self, capacity_bytes: int) -> StateCache | None:
        """Keep the state after each answer, so a follow-up reads only what is new; 0: off."""
        if capacity_bytes <= 0:
            return None
        from engine.backends.state_cache import StateCache, give_freed_states_back, lean_save_state

        give_freed_states_back()
        cache = StateCache(capacity_bytes)
        self.llm.set_cache(cache)
        self.llm.save_state = partial(lean_save_state, self.llm)  # type: ignore[method-assign]
        return cache

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

    async def health(self) -> dict[str, Any]:
        return {"kind": "llama", "model": self.options.path.name}

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """As ``create_chat_completion`` counts: the GGUF's chat template, then the tokenizer."""
        if self._template is None:  # llama-cpp-python falls back to a format of its own
            text = "".join(message.content for message in messages)
            return len(self.llm.tokenize(text.encode())) + FRAMING_TOKENS * len(messages)
        rendered = self._template(messages=[message.as_dict() for message in messages])
        prompt = rendered.prompt.encode()
        return len(self.llm.tokenize(prompt, add_bos=not rendered.added_special, special=True))

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        self._should_stop = should_stop
        self._watch_compute(True)
        finish: FinishReason | None = None
        try:
            chunks: Any = self.llm.create_chat_completion(
                messages=[message.as_dict() for message in messages],  # type: ignore[misc]
                max_tokens=limits.max_tokens,
                temperature=limits.temperature,
                top_p=limits.top_p,
                min_p=limits.min_p,
                repeat_penalty=limits.repeat_penalty,
                stream=True,
            )
            for index, chunk in enumerate(chunks):
                if index == 0:
                    self._watch_compute(False)  # the prompt is processed
                choice = chunk["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    yield text
                if choice.get("finish_reason") in ("stop", "length"):
                    finish = choice["finish_reason"]
        except RuntimeError as error:
            if "llama_decode returned 2" not in str(error):
                raise
            self.reset()  # the aborted decode left the context half-filled
            raise GenerationStopped from None
        finally:
            self._watch_compute(False)
            self._should_stop = lambda: False
        return finish

    def reset(self) -> None:
        """Forget everything the context holds: the next prompt is processed in full, sharing
        no prefix with the last (llama.cpp otherwise reuses the matching prefix). Needed after
        an aborted decode; ``concierge bench`` also calls it so a repeated prompt costs the same.
        Not while ``stream`` runs."""
        import llama_cpp

        self.llm.reset()  # type: ignore[no-untyped-call]  # llama_cpp leaves it unannotated
        memory = llama_cpp.llama_get_memory(self.llm.ctx)
        llama_cpp.llama_memory_clear(memory, True)


def _chat_template(llm: Any) -> Any:
    """The formatter ``create_chat_completion`` uses for a GGUF that carries its template (a
    guessed format such as "chatml" is the same template); None for one without."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    if template is None:
        return None
    eos, bos = llm.token_eos(), llm.token_bos()
    return Jinja2ChatFormatter(
        template=template,
        eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
    )
