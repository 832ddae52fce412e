"""A conversation's history: what the model reads of it, and what the search reads of it.

The bot sends the turns before the question, oldest first (``Request.history``). The model
gets the newest turns that fit its context next to the articles, the question and the
answer's room, counted in its own tokens; the knowledge-base search gets the question with
the asker's last turns, so "and how much is the ticket?" still finds the ferry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.protocol import HistoryTurn
from engine.llm import ChatMessage

SEARCH_USER_TURNS = 2  # a follow-up leans on the question or two before it; older ones drift

TokenCounter = Callable[[Sequence[ChatMessage]], int]  # a prompt's length in the model's tokens


@dataclass(frozen=True)
class FittedHistory:
    """The turns given to the model (the newest, oldest first) and how many were left out."""

    turns: tuple[ChatMessage, ...] = ()
    dropped: int = 0

    @property
    def used(self) -> int:
        return len(self.turns)


NO_HISTORY = FittedHistory()


def as_messages(history: Sequence[HistoryTurn]) -> list[ChatMessage]:
    return [ChatMessage(turn.role, turn.text) for turn in history]


def fit_history(
    turns: Sequence[ChatMessage], fits: Callable[[Sequence[ChatMessage]], bool]
) -> FittedHistory:
    """The most turns, newest first, for which ``fits(kept)`` still holds; the oldest go.

    ``fits`` counts the whole prompt built with ``kept``: a chat template frames each message
    with tokens of its own, so only the rendered prompt's length is exact. More turns never
    make a prompt shorter, so a binary search finds the answer in a handful of counts (the
    protocol allows 50 turns; one count per turn would tokenize the prompt 50 times).
    """
    low, high = 0, len(turns)  # fits(the newest ``low``) holds; more than ``high`` do not
    while low < high:
        middle = (low + high + 1) // 2
        if fits(turns[len(turns) - middle :]):
            low = middle
        else:
            high = middle - 1
    return FittedHistory(tuple(turns[len(turns) - low :]), dropped=len(turns) - low)


def search_text(question: str, history: Sequence[ChatMessage]) -> str:
    """The question, then the asker's last turns (newest first): the search keeps the first
    terms it reads, so the question's own are never crowded out by earlier ones."""
    asked = [turn.content for turn in history if turn.role == "user"]
    return "\n".join([question, *reversed(asked[-SEARCH_USER_TURNS:])])
