"""A conversation's earlier messages as a request's ``history``, the same on every platform.

An adapter reads the messages of a reply chain or a thread newest first, as ``Said`` values
(the bot's own with their status line split off), and feeds them to a ``Conversation``, back to
the conversation's first message (or as far as the adapter reads). It joins an answer's
continuation messages into one turn and leaves out messages that show nothing. ``history``
gives the turns oldest first: people's messages as ``user`` turns, named when more than one
person speaks; the bot's answers as ``assistant`` turns without their sources list, marked when
they did not run to their end. ``last_turns`` and ``within_body`` then hold a request to the
count setting and the protocol's 64 KiB.

A conversation with more turns than the count setting (N) keeps its newest **on the engine's
grid** (broker/history_window.py), not the newest N: from ``block_start`` of all its turns and
N. As it grows by an exchange per question, the turns sent begin with the same turn until the
window is full again, then a block later, so the engine's prompt for a follow-up begins as the
one before did and llama.cpp's saved state still serves it (engine/answering/history.py says why).
The
grid is counted from the conversation's first turn, so the adapters read back to it; the
answer says when older messages were left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bots.renderer import Status, status_of
from broker.answer_text import SOURCES_RE
from broker.history_window import block_start
from broker.protocol import MAX_BODY_BYTES, MAX_HISTORY_TURN_CHARS, HistoryTurn, Request, encode
from config.text_helpers import shorten

STOPPED_MARK = " [stopped]"  # an answer someone stopped: the text it showed, then this
CUT_OFF_MARK = " [cut off]"  # one that failed, timed out or was still being written
TRUNCATED_MARK = "…"  # a turn over the character cap keeps its start, then this
# Each earlier turn sent is cut to this (the protocol allows 8,000): a dozen such turns of
# plain text fit a request's 64 KiB body.
HISTORY_TURN_MAX_CHARS = 4000


@dataclass(frozen=True)
class Said:
    """One message as the platform shows it: a person's words (the bot's mention taken out),
    or the body of one of the bot's own messages and its status line (``footer``, "" if none).
    """

    text: str
    author: str = ""  # the platform's user id of a person
    name: str = ""  # how the platform shows that person
    by_bot: bool = False
    footer: str = ""


@dataclass(frozen=True)
class History:
    """The turns for a request, oldest first; ``cut``: older messages were left out."""

    turns: tuple[HistoryTurn, ...] = ()
    cut: bool = False


@dataclass
class _Turn:
    said: Said  # the newest message of the turn (an answer's last, which has the status line)
    pieces: list[str] = field(default_factory=list)  # oldest first


class Conversation:
    """The turns before a question, collected newest first (see the module's docstring)."""

    def __init__(self, max_turns: int, max_chars: int) -> None:
        self.max_turns = max_turns
        self.max_chars = max_chars
        self.cut = False  # the adapter stopped reading before the conversation's first message
        self._turns: list[_Turn] = []  # newest first

    def add(self, said: Said) -> None:
        """Take the next older message. Every message up to the adapter's cap is taken: the
        turns kept are counted from the conversation's first (``history``)."""
        newest = self._turns[-1] if self._turns else None
        if said.by_bot and not said.footer and newest is not None and newest.said.by_bot:
            if said.text:  # an earlier piece of the same answer (only its last has a status)
                newest.pieces.insert(0, said.text)
            return
        if not said.text and not said.by_bot:
            return  # nothing to read (an attachment alone, or text Discord hides)
        self._turns.append(_Turn(said, [said.text] if said.text else []))

    def history(self, asker: str) -> History:
        """The turns oldest first, from ``block_start`` of all of them and ``max_turns``, for a
        question by ``asker`` (a user id): people are named when someone other than the asker
        speaks in them too. ``cut`` when older turns were left out, or never read."""
        shown = [
            turn
            for turn in reversed(self._turns)
            if turn.pieces and self._entry(turn, named=False).text  # not only a sources list
        ]
        start = block_start(len(shown), self.max_turns)
        kept = shown[start:]
        speakers = {asker} | {turn.said.author for turn in kept if not turn.said.by_bot}
        entries = tuple(self._entry(turn, named=len(speakers) > 1) for turn in kept)
        return History(entries, cut=self.cut or start > 0)

    def _entry(self, turn: _Turn, *, named: bool) -> HistoryTurn:
        text = "".join(turn.pieces)
        if turn.said.by_bot:
            return HistoryTurn(
                role="assistant", text=_capped(*answer_text(text, turn.said.footer), self.max_chars)
            )
        speaker = f"{turn.said.name or turn.said.author}: " if named else ""
        return HistoryTurn(role="user", text=_capped(speaker + text, "", self.max_chars))


def answer_text(body: str, footer: str) -> tuple[str, str]:
    """An answer as the conversation remembers it: its text without the sources list, and
    the mark of how it ended ("" if it ran to its end, or the message says nothing of it)."""
    text = SOURCES_RE.sub("", body).rstrip()
    status = status_of(footer)
    if status is None or status is Status.DONE:
        return text, ""
    if status in (Status.STOPPED, Status.STOPPING):
        return text, STOPPED_MARK
    return text, CUT_OFF_MARK


def _capped(text: str, mark: str, max_chars: int) -> str:
    """``text`` and ``mark`` in at most ``max_chars``: the start of a longer text is kept."""
    return (shorten(text, max_chars - len(mark), TRUNCATED_MARK) + mark)[:max_chars]


def last_turns(
    turns: tuple[HistoryTurn, ...], max_turns: int, max_chars: int = MAX_HISTORY_TURN_CHARS
) -> tuple[tuple[HistoryTurn, ...], bool]:
    """At most ``max_turns`` of ``turns`` (a whole conversation, oldest first), each within
    ``max_chars``, and whether any were left out: from ``block_start`` on, the engine's grid
    (see the module's docstring), so a growing conversation keeps its first turn kept for a
    block of turns; none when ``max_turns`` is 0. An adapter's ``Conversation`` has cut on
    the grid already: its turns (at most ``max_turns``) stay as they are."""
    kept = turns[block_start(len(turns), max_turns) :]
    capped = tuple(
        turn
        if len(turn.text) <= max_chars
        else turn.model_copy(update={"text": _capped(turn.text, "", max_chars)})
        for turn in kept
    )
    return capped, len(kept) < len(turns)


def within_body(request: Request) -> tuple[Request, bool]:
    """``request`` with its oldest turns left out until its body fits in ``MAX_BODY_BYTES``,
    and whether any were: in blocks, as ``last_turns`` cuts (the newest that fit, from
    ``block_start`` on), so long turns do not slide the history by one exchange either."""
    history = request.history
    size, fit = len(encode(request)), len(history)
    while fit and size > MAX_BODY_BYTES:
        size -= len(encode(history[-fit])) + (1 if fit > 1 else 0)  # the oldest, and its comma
        fit -= 1
    start = block_start(len(history), fit)
    if start == 0:
        return request, False
    return request.model_copy(update={"history": history[start:]}), True
