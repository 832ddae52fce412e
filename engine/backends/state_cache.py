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
  row is kept: ``load_state`` broadcasts it into the rows it restores.
- The capacity counts everything an entry holds, not only llama.cpp's own state.

And ``lean_save_state`` replaces ``Llama.save_state`` on the engine's model: the library's
copies all 100 MB of logits and llama.cpp's state three times before the cache keeps one row
and one copy, and those passing copies set the engine's peak memory (docs/quality.md,
"Memory").

A lookup that ties (every prompt shares the system prompt) takes the newest entry, so an
unrelated question does not keep the oldest entry alive by touching it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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
    row of the logits only, and llama.cpp's state copied once out of its buffer."""
    import ctypes

    import llama_cpp
    from llama_cpp.llama import LlamaState

    context = llm._ctx.ctx  # what the library's own save_state reads
    size = llama_cpp.llama_state_get_size(context)
    buffer = (ctypes.c_uint8 * int(size))()
    copied = int(llama_cpp.llama_state_get_data(context, buffer, size))
    if copied > int(size):
        raise RuntimeError("Failed to copy llama state data")
    return LlamaState(
        scores=llm._scores[-1:].copy(),
        input_ids=llm.input_ids.copy(),
        n_tokens=llm.n_tokens,
        llama_state=ctypes.string_at(buffer, copied),
        llama_state_size=copied,
        seed=llm._seed,
    )


class StateCache(LlamaRAMCache):
    """States of recent answers, least recently used dropped first, within ``capacity_bytes``."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes=capacity_bytes)

    @property
    def cache_size(self) -> int:
        return sum(entry_bytes(state) for state in self.cache_state.values())

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
