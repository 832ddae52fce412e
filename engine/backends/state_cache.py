"""llama.cpp's state after recent answers, kept so a follow-up does not re-read its history.

llama.cpp reuses the part of a prompt its context still holds, but one question from someone
else replaces it. llama-cpp-python saves the state after each answer (keyed by the prompt's
and answer's tokens) into the cache given to ``Llama.set_cache``, and before a prompt loads
the saved state that shares the longest beginning with it. A follow-up's prompt begins with
its conversation's earlier prompt (engine/answering/prompt.py orders it so), so only the new part
is read.

``StateCache`` is its ``LlamaRAMCache`` with two fixes that make the byte bound true:

- A saved state carries a copy of the Python-side logits, ``n_batch`` rows of the vocabulary
  (SmolLM2: 512 x 49,152 floats, 100 MB), which the library neither needs after loading (it
  evaluates at least one token again first) nor counts against the capacity. Only the last
  row is kept, and ``lean_load_state`` never writes it back.
- The capacity counts everything an entry holds, not only llama.cpp's own state.

And ``lean_save_state`` and ``lean_load_state`` replace ``Llama.save_state`` and
``Llama.load_state`` on the engine's model: the library's save copies all 100 MB of logits and
llama.cpp's state three times before the cache keeps one row and one copy; its load writes the
saved row into every row of the Python-side logits up to the state's length (all 512 rows, so
the whole 100 MB becomes resident the first time a follow-up loads a state) and copies the
state once more. Those passing copies and written rows set the engine's peak memory
(docs/quality.md, "Memory").

A lookup that ties (every prompt shares the system prompt) takes the newest entry, so an
unrelated question does not keep the oldest entry alive by touching it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_cpp.llama import Llama
from llama_cpp.llama_cache import LlamaRAMCache

if TYPE_CHECKING:
    from llama_cpp.llama import LlamaState

MIB = 1024 * 1024
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD_BYTES = MIB


def entry_bytes(state: LlamaState) -> int:
    """What one saved state holds in memory: llama.cpp's state, the logits and the tokens."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


def give_freed_states_back() -> None:
    """Have glibc's malloc map every block over 1 MiB on its own, so a state the cache drops
    goes back to the system at once. By default the threshold grows with the blocks freed
    (up to 32 MiB), and dropped states stayed in the heap: 55 MB more at the end of
    docs/quality.md's "Memory" run. Does nothing where the C library is not glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def lean_save_state(llm: Llama) -> LlamaState:
    """``llm.save_state()`` as the cache keeps it, made without the passing copies: the last
    row of the logits only, and llama.cpp's state in the one buffer it is copied into. The
    cache drops what it must to take the new state before that buffer is made, so the engine
    holds the cache's capacity and at most the state it is using (a state just loaded stays
    alive in the library while it answers, dropped or not), not the capacity plus copies."""
    import ctypes

    import llama_cpp
    from llama_cpp.llama import LlamaState

    context = llm._ctx.ctx  # what the library's own save_state reads
    size = int(llama_cpp.llama_state_get_size(context))
    if isinstance(llm.cache, StateCache):  # the entry: the state, one row of logits, tokens
        llm.cache.make_room(size + llm.n_vocab() * 4 + llm.input_ids.nbytes)
    buffer = (ctypes.c_uint8 * size)()
    copied = int(llama_cpp.llama_state_get_data(context, buffer, size))
    if copied > size:
        raise RuntimeError("Failed to copy llama state data")
    return LlamaState(
        scores=llm._scores[-1:].copy(),
        input_ids=llm.input_ids.copy(),
        n_tokens=llm.n_tokens,
        llama_state=buffer,  # type: ignore[arg-type]  # bytes-like: lean_load_state reads it
        llama_state_size=copied,
        seed=llm._seed,
    )


def lean_load_state(llm: Llama, state: LlamaState) -> None:
    """``llm.load_state(state)`` without writing the Python-side logits and without copying
    the state: the engine samples from llama.cpp's own logits, and after a load the library
    evaluates at least one token again before sampling (``_requires_eval``), so the rows it
    would have written are never read."""
    import ctypes

    import llama_cpp

    llm.input_ids = state.input_ids.copy()
    llm.n_tokens = state.n_tokens
    llm._requires_eval = True
    llm._seed = state.seed
    data: Any = state.llama_state  # a ctypes buffer (lean_save_state) or the library's bytes
    if isinstance(data, bytes):
        data = ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8))
    size = state.llama_state_size
    if llama_cpp.llama_state_set_data(llm._ctx.ctx, data, size) != size:
        raise RuntimeError("Failed to set llama state data")


class StateCache(LlamaRAMCache):
    """States of recent answers, least recently used dropped first, within ``capacity_bytes``."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes=capacity_bytes)

    @property
    def cache_size(self) -> int:
        return sum(entry_bytes(state) for state in self.cache_state.values())

    def make_room(self, state_bytes: int) -> None:
        """Drop the least recently used states until one of ``state_bytes`` more fits."""
        while self.cache_state and self.cache_size + state_bytes > self.capacity_bytes:
            self.cache_state.popitem(last=False)

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        value.scores = value.scores[-1:].copy()  # see the module's docstring
        super().__setitem__(key, value)

    def _find_longest_prefix_key(self, key: tuple[int, ...]) -> tuple[int, ...] | None:
        best_length, best = 0, None
        for cached in reversed(self.cache_state):  # newest first: a tie goes to the newest
            length = Llama.longest_token_prefix(cached, key)
            if length > best_length:
                best_length, best = length, cached
        return best
