"""A conversation's history: what the model reads of it, and what the search reads of it.

The bot sends the turns before the question, oldest first (``Request.history``). The model
gets the newest turns that fit its context next to the articles, the question and the
answer's room, counted in its own tokens, each earlier answer as its own words
(``model_words``: without the engine's quote and notes, which it would copy). The
knowledge-base search gets a follow-up with the asker's last questions, so "and how much is
the ticket?" still finds the ferry, and a new question alone, so "What does EAFP stand for?"
is not steered by the question before.

When the turns do not all fit, the oldest go **in blocks**, not one exchange at a time. A
follow-up is fast because its prompt begins as the last turn's did, so llama.cpp reads only
what is new (engine/backends/state_cache.py). A window that slides by one exchange per turn
changes the prompt's beginning at every turn, so every follow-up is read again from the system
prompt, as without the cache (docs/benchmarks.md, "Conversation"). So the first turn kept sits
on a grid, a multiple of a block (``block_start``, in broker/history_window.py since the bots
cut on the same grid): as the conversation grows by one exchange per turn, the start stays
where it was until the window is full again, then moves one block on. A block is about half
of what fits (a power of two, so the grid stays put when what fits changes by a turn or two):
the turns kept are always more than half of what would fit, and the turns after a move begin
alike (what that saves: docs/benchmarks.md, "History dropped in blocks").

The grid is counted from the history's oldest turn, so it holds while the bot sends the
conversation from its beginning, or cut on the same grid: a bot that kept its own last N
messages would slide the history again, so bots/history.py keeps the conversation's turns from
``block_start`` of all of them and its N (a block of a smaller window divides a larger one's,
so the engine's cut of what the bot sent is on the whole conversation's grid too).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.history_window import block_start
from broker.protocol import HistoryTurn
from engine.answering.needs import question_needs
from engine.answering.wording import WORDING
from engine.backends.base import ChatMessage

# "How much for children?", "子供料金はいくら": a word of its own or two, too little to stand alone
# (a need weighs its letters, a kanji two: "children" 8, 子供料金 8, 駐車場 6).
FEW_NEEDS_WEIGHT = 8.0
SEARCH_USER_TURNS = 2  # a follow-up leans on the question or two before it; older ones drift

# Words by which a question points back at the conversation: it goes on ("And…", "What
# about…"), or stands for a thing named before ("it", "them", "an electric one", "それ").
LEANING_RE = re.compile(
    r"^\W*(?:and|but|also|so|then|or|what about|how about|same)\b"
    r"|\b(?:it|its|they|them|their|theirs|those|these|there|else)\b"
    r"|\b(?:ones?|instead)\b(?! of)"  # "an electric one?", not "one of my functions"
    r"|^\W*(?:それ|その|そこ|そちら|あれ|あの|これ|この|こちら|じゃあ|じゃ(?![が-ん])|では|あと)",
    re.IGNORECASE,
)

# A Japanese question that names what it acts on ("タイマーを止めるには", how to stop a timer)
# stands alone however short, as "How do I stop a timer?" does; a follow-up names a topic only
# ("子供料金は", and the children's fare?).
# A request to be told ("料金を教えてください", tell me the fee) names no act: it leans as before.
ACTS_ON_RE = re.compile(
    r"[\u30a0-\u30ff\u3400-\u9fff]\s*を\s*(?!教え|知り|知ら|見せ|聞き|聞か|伺)[\u3400-\u9fff]"
)

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


def _engine_parts() -> tuple[re.Pattern[str], tuple[tuple[str, str], ...]]:
    """Where one of the engine's own parts of an answer begins (the quote, why it was cut, the
    nearest sections, the note after a general answer: at the start or after a blank line),
    and the quote's label and closing mark, in every language."""
    starts, quotes = [], []
    for words in WORDING.values():
        before, after = words.evidence.split("{quote}")
        quotes.append((before, after))
        starts += [before, words.cut_repetition, *words.withdrawals]
        starts += [words.nearest, words.no_articles, words.cut_length.split("{", 1)[0]]
    return re.compile(r"(?:\A|\n\n)(?:" + "|".join(map(re.escape, starts)) + ")"), tuple(quotes)


ENGINE_PART_RE, QUOTE_MARKS = _engine_parts()


def model_words(answer: str) -> str:
    """An earlier answer as the model reads it again: its own words, then the quote's text
    without its label; the engine's notes left out. SmolLM2 copies the form of the turns it
    reads: after two Japanese answers that were quotes alone, an English one began with the
    Japanese quote's label. Given its own words alone, it repeated them as the next answer
    ("The answer is: 1,200 yen." to "How much is the museum for adults?"): the quote stays."""
    part = ENGINE_PART_RE.search(answer)
    words = answer[: part.start() if part else None].strip()
    for label, close in QUOTE_MARKS:  # the last quote: the engine's, after any the model copied
        if (at := answer.rfind(label)) >= 0 and answer.rstrip().endswith(close):
            quote = answer[at + len(label) : len(answer.rstrip()) - len(close)].strip()
            return f"{words}\n\n{quote}".strip()
    return words or answer.strip()


def as_messages(history: Sequence[HistoryTurn]) -> list[ChatMessage]:
    """The turns as the model reads them: the asker's as sent, the answers' as ``model_words``."""
    return [
        ChatMessage(turn.role, model_words(turn.text) if turn.role == "assistant" else turn.text)
        for turn in history
    ]


REFUSALS = tuple(words.not_on_site for words in WORDING.values())


def without_refusals(turns: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The turns the model reads: each exchange the site did not cover left out, its question
    too. Its answer is all the engine's ("The site does not cover this: …"), and SmolLM2 gave
    it again as its own next answer, above the quote that did answer the next question. (The
    search still reads that question: a follow-up may lean on it.)"""
    kept: list[ChatMessage] = []
    for turn in turns:
        if turn.role == "assistant" and turn.content.lstrip().startswith(REFUSALS):
            if kept and kept[-1].role == "user":
                kept.pop()
            continue
        kept.append(turn)
    return kept


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


def fit_history_in_blocks(
    turns: Sequence[ChatMessage], fits: Callable[[Sequence[ChatMessage]], bool]
) -> FittedHistory:
    """The newest turns for which ``fits`` holds, the oldest dropped in blocks (see the
    module's docstring): every turn when all fit, else from ``block_start`` on."""
    window = fit_history(turns, fits).used
    start = block_start(len(turns), window)
    return FittedHistory(tuple(turns[start:]), dropped=start)


def leans_on_earlier(question: str) -> bool:
    """Whether ``question`` reads as a follow-up: it points back ("And how much is the
    ticket?", "For how long can I keep them?"), or says too little to stand alone and names
    nothing ("How much for children?"). A follow-up is searched with the asker's earlier
    questions, whatever it would find alone (the ticket is on the museum's page too); any
    other question alone, since a new topic searched with the last one's words finds the
    last one's pages ("What does EAFP stand for?" after a question on virtual environments)."""
    if LEANING_RE.search(question):
        return True
    if ACTS_ON_RE.search(question):
        return False
    required = [need for need in question_needs(question) if not need.optional]
    weight = sum(need.weight for need in required)
    return weight <= FEW_NEEDS_WEIGHT and not any(need.named for need in required)


def search_text(question: str, history: Sequence[ChatMessage]) -> str:
    """The question, then the asker's last turns (newest first): the search keeps the first
    terms it reads, so the question's own are never crowded out by earlier ones."""
    asked = [turn.content for turn in history if turn.role == "user"]
    return "\n".join([question, *reversed(asked[-SEARCH_USER_TURNS:])])
