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


def entry_bytes(state: LlamaState) -> int:
    """What one saved state holds in memory: llama.cpp's state, the logits and the tokens."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


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
