"""The model in this process: llama-cpp-python with the GGUF's own chat template.

The default backend, right for a small VPS (``CONCIERGE_BACKEND=llama``).
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Sequence
from contextlib import suppress
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

# Reading ahead loads a saved state only when it holds this many more of the tokens than the
# context does: loading a 900-token state takes about as long as reading 20 tokens, and every
# state shares the system prompt with every prompt.
LOAD_GAIN_TOKENS = 32


@dataclass(frozen=True)
class ModelOptions:
    path: Path
    context_size: int = 2048
    threads: int | None = None
    flash_attention: bool = True  # llama.cpp's; off: the attention as llama-cpp-python's default
    seed: int = -1
    # llama.cpp's state after recent answers (engine/backends/state_cache.py)
    state_cache_bytes: int = 0


class LlamaBackend:
    """llama-cpp-python with the model's own chat template.

    Generation blocks, so the engine runs ``stream`` in a thread. A stop does not wait for
    the computation under way (a prompt's processing: seconds; a token: 10 ms or more on a
    busy machine): ``interrupt``, called by the engine the moment a cancel arrives, ends it
    at its next step through llama.cpp's abort callback (``_AbortSwitch``); ``should_stop``
    is still asked between tokens.
    """

    def __init__(self, options: ModelOptions) -> None:
        from llama_cpp import Llama  # imported here: loading the library is slow

        self.options = options
        self.llm = Llama(
            model_path=str(options.path),
            n_ctx=options.context_size,
            n_threads=options.threads or max(1, (os.cpu_count() or 1)),
            seed=options.seed if options.seed >= 0 else 0xFFFFFFFF,
            flash_attn=options.flash_attention,
            verbose=False,
        )
        self._abort = _AbortSwitch(self.llm.ctx)
        self._template = _chat_template(self.llm)
        self._prefix_template = _chat_template(self.llm, add_generation_prompt=False)
        self.state_cache = self._install_state_cache(options.state_cache_bytes)

    def _install_state_cache(self, capacity_bytes: int) -> StateCache | None:
        """Keep the state after each answer, so a follow-up reads only what is new; 0: off."""
        if capacity_bytes <= 0:
            return None
        from engine.backends.state_cache import (
            StateCache,
            give_freed_states_back,
            lean_load_state,
            lean_save_state,
        )

        give_freed_states_back()
        cache = StateCache(capacity_bytes)
        self.llm.set_cache(cache)
        self.llm.save_state = partial(lean_save_state, self.llm)  # type: ignore[method-assign]
        self.llm.load_state = partial(lean_load_state, self.llm)  # type: ignore[method-assign]
        return cache

    async def health(self) -> dict[str, Any]:
        return {"kind": "llama", "model": self.options.path.name}

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """As ``create_chat_completion`` counts: the GGUF's chat template, then the tokenizer."""
        if self._template is None:  # llama-cpp-python falls back to a format of its own
            text = "".join(message.content for message in messages)
            return len(self.llm.tokenize(text.encode())) + FRAMING_TOKENS * len(messages)
        return len(self.prompt_tokens(messages, self._template))

    def prompt_tokens(self, messages: Sequence[ChatMessage], template: Any = None) -> list[int]:
        """The tokens the model reads for ``messages``: the chat template's text (``template``,
        by default the one that ends with the assistant's turn beginning), tokenized."""
        template = template or self._template
        if template is None:
            return []
        rendered = template(messages=[message.as_dict() for message in messages])
        prompt = rendered.prompt.encode()
        return list(self.llm.tokenize(prompt, add_bos=not rendered.added_special, special=True))

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        finish: FinishReason | None = None
        self._abort.let_go()  # an interrupt meant for the answer before is not this one's
        if should_stop():  # stopped before it began: an interrupt from then was let go
            raise GenerationStopped
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
            for chunk in chunks:
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
            self._abort.let_go()  # for whatever computes next
        return finish

    def warm(self, messages: Sequence[ChatMessage], should_stop: ShouldStop) -> int:
        """Process ``messages``, the beginning of a prompt to come (a conversation's next turn
        up to its new question), and keep llama.cpp's state after them in the state cache,
        so that prompt reads only what follows. Returns the tokens processed: 0 when there is
        no cache or chat template, when a saved state holds them all already, or when
        ``should_stop`` (or ``interrupt``) ends it first. Not while ``stream`` runs."""
        if self.state_cache is None or self._prefix_template is None:
            return 0
        from llama_cpp import Llama

        answered = next(reversed(self.state_cache.cache_state), None)  # the last answer's state
        tokens = self.prompt_tokens(messages, self._prefix_template)
        if len(tokens) >= self.options.context_size // 2:  # the new question must fit after it
            return 0
        with suppress(KeyError):  # KeyError: no saved state shares a beginning with it
            saved = self.state_cache[tokens]
            shared = Llama.longest_token_prefix(saved.input_ids[: saved.n_tokens].tolist(), tokens)
            if shared > self._live(tokens) + LOAD_GAIN_TOKENS:
                self.llm.load_state(saved)
        start = self._live(tokens)
        if start >= len(tokens) - 1:
            return 0
        self._abort.let_go()
        if should_stop():
            return 0
        try:
            self.llm.n_tokens = start
            self.llm.eval(tokens[start:])
        except RuntimeError as error:
            if "llama_decode returned 2" not in str(error):
                raise
            self.reset()
            return 0
        finally:
            self._abort.let_go()
        self.state_cache[tokens] = self.llm.save_state()
        self._drop_superseded(answered, messages, tokens)
        return len(tokens) - start

    def _drop_superseded(
        self, answered: tuple[int, ...] | None, messages: Sequence[ChatMessage], tokens: list[int]
    ) -> None:
        """Drop the state saved after the answer just read ahead as a turn: it held the same
        conversation, then the question after its articles, which no follow-up begins with.
        Its room keeps other conversations' states (a 700-token state weighs 16 MB)."""
        from llama_cpp import Llama

        assert self.state_cache is not None
        turns = len(self.prompt_tokens(messages[:-2], self._prefix_template))
        if answered is not None and answered != tuple(tokens):
            if Llama.longest_token_prefix(list(answered), tokens) >= turns:
                self.state_cache.cache_state.pop(answered, None)

    def _live(self, tokens: list[int]) -> int:
        """How many of ``tokens`` the context holds already, from the start."""
        from llama_cpp import Llama

        held: list[int] = self.llm.input_ids[: self.llm.n_tokens].tolist()
        return int(Llama.longest_token_prefix(held, tokens))

    def interrupt(self) -> None:
        """End the computation under way at its next step (from any thread): ``stream``
        then raises ``GenerationStopped``. Called for the answer running now only."""
        self._abort.pull()

    def reset(self) -> None:
        """Forget everything the context holds: the next prompt is processed in full, sharing
        no prefix with the last (llama.cpp otherwise reuses the matching prefix). Needed after
        an aborted decode; ``concierge bench`` also calls it so a repeated prompt costs the same.
        Not while ``stream`` runs."""
        import llama_cpp

        self.llm.reset()  # type: ignore[no-untyped-call]  # llama_cpp leaves it unannotated
        memory = llama_cpp.llama_get_memory(self.llm.ctx)
        llama_cpp.llama_memory_clear(memory, True)


class _AbortSwitch:
    """llama.cpp's abort callback, answered without Python: one byte that says "stop".

    ggml asks the callback at every node of every graph, a thousand times a token. A Python
    callback would take the GIL from the event loop each time (so it used to be on only while
    the prompt was processed, and a token under way ran to its end). The callback is instead
    libc's ``strlen`` on a two-byte buffer, which C answers in nanoseconds: 0 (go on) until
    ``pull`` sets the first byte (1: stop); ``strlen``'s ``size_t`` of 0 or 1 reads as that
    ``bool`` in the ABI's return register. The aborted decode then fails ("llama_decode
    returned 2"). Nothing polls: whoever learns of the stop pulls (``LlamaBackend.interrupt``).
    """

    def __init__(self, ctx: Any) -> None:
        import llama_cpp

        self._flag = (ctypes.c_char * 2)()  # b"\0\0": strlen 0
        strlen = ctypes.CDLL(None).strlen  # the C library already in this process
        self._callback = ctypes.cast(strlen, llama_cpp.ggml_abort_callback)  # kept: ctypes
        llama_cpp.llama_set_abort_callback(
            ctx, self._callback, ctypes.cast(self._flag, ctypes.c_void_p)
        )

    def pull(self) -> None:
        self._flag[0] = b"\1"

    def let_go(self) -> None:
        self._flag[0] = b"\0"


def _chat_template(llm: Any, *, add_generation_prompt: bool = True) -> Any:
    """The formatter ``create_chat_completion`` uses for a GGUF that carries its template (a
    guessed format such as "chatml" is the same template); None for one without. Without the
    generation prompt, a conversation's messages render as the beginning of its next prompt."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    if template is None:
        return None
    eos, bos = llm.token_eos(), llm.token_bos()
    return Jinja2ChatFormatter(
        template=template,
        eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
        add_generation_prompt=add_generation_prompt,
    )
