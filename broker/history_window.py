"""Where a long conversation's history begins when only its newest turns may go: on a grid.

Both sides cut on the same grid: the engine when the turns do not all fit the model's context
(engine/answering/history.py, whose docstring says why: a follow-up then begins as the turn before
did,
so llama.cpp's saved state still serves it), and the bots when a conversation has more turns
than ``CONCIERGE_HISTORY_MAX_MESSAGES`` (bots/history.py). A window that slid by one exchange
at either end would change every follow-up's beginning again. docs/protocol.md states the rule
for clients in other languages.
"""

from __future__ import annotations


def block_start(total: int, window: int) -> int:
    """The first of ``total`` turns to keep when at most ``window`` may be: 0 when all may,
    else the first multiple of the block (``history_block(window)``) that leaves at most
    ``window`` (``total`` when ``window`` is 0). Counted from the conversation's first turn,
    the start stays put as it grows, until the window is full again, then moves a block on."""
    if total <= window:
        return 0
    block = history_block(window)
    return -(-(total - window) // block) * block  # the excess, rounded up to whole blocks


def history_block(window: int) -> int:
    """How many turns go at once when ``window`` turns may stay: the largest power of two up
    to half of it (4 of 12, 8 of 16 to 31), so the turns kept are always more than half of the
    window; 1 (no block) below 4, where a block would leave too little. Even from 2 on, so an
    exchange (a question and its answer) is never split; a power of two, so a smaller window's
    block divides a larger one's, and a window that changes by a turn or two mostly keeps its
    grid."""
    half = max(1, window // 2)
    return 1 << (half.bit_length() - 1)
