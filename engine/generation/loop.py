"""The token loop: runs in a worker thread, checks ``cancelled_sessions`` every token.

It never waits for the broker: each piece goes to ``emit`` (``TokenRelay.emit``), which only
appends it; the event loop publishes from there. An answer that starts repeating itself is
stopped at once (``engine/generation/repetition.py``) and its repeated tail dropped: a small model
would
otherwise repeat a line until the token cap, keeping the only engine from everyone else. One
that goes on past its paragraphs (``CONCIERGE_ANSWER_PARAGRAPHS``) ends at the blank line
(``engine/generation/paragraphs.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from broker.protocol import FinishReason
from engine.answering.wording import Withdrawn
from engine.backends.base import Backend, ChatMessage, GenerationLimits, GenerationStopped, Pieces
from engine.cancelled import CancelledSessions
from engine.generation.echo import EchoedLabel, label_line_at, without_copied_header
from engine.generation.paragraphs import ParagraphLimit
from engine.generation.repetition import RepetitionDetector


@dataclass
class Generation:
    """What one answer produced, and why it ended."""

    session_id: str
    time_limit_at: float  # time.monotonic() past which the answer is stopped
    pieces: list[str] = field(default_factory=list)
    appendix: str = ""  # what the engine adds after the model's words; not model tokens
    piece_times: list[float] = field(default_factory=list)  # time.monotonic() of each piece
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    abandoned: bool = False  # set by the worker on shutdown; the loop stops at the next token
    stopped_by_cancel: bool = False
    stopped_by_time_limit: bool = False
    finish_reason: FinishReason = "stop"  # how the model's answer ended, when it ran its course
    kept: int | None = None  # pieces of the text, when a repeated tail was dropped
    ended_at: int | None = None  # characters of the text, when it ended at a blank line
    # or at a line copying the prompt's label
    skipped: int = 0  # characters it began with that copied the prompt's label (echo.py)
    # (ended_at counts characters after those)
    # Its words left out, and why: a "number", an "option" or a "term" nothing it read gave,
    # or not the "name" the quote defines ("": kept).
    withdrawn: Withdrawn = ""

    @property
    def finished_naturally(self) -> bool:
        return not (self.abandoned or self.stopped_by_cancel or self.stopped_by_time_limit)

    @property
    def answer(self) -> str:
        """The model's words, without a copy of the prompt's label or of a passage's header
        before them, a repeated tail, what followed its last paragraph or a line restating
        the quote after the label; none when they were withdrawn."""
        if self.withdrawn:
            return ""
        return without_copied_header(self.said[: self.ended_at])

    @property
    def said(self) -> str:
        """The model's words after a copied label, up to a repeated tail, if any."""
        return "".join(self.pieces[: self.kept])[self.skipped :]

    @property
    def text(self) -> str:
        return self.answer + self.appendix

    @property
    def tokens(self) -> int:
        return len(self.pieces)

    @property
    def first_token_at(self) -> float | None:
        return self.piece_times[0] if self.piece_times else None

    def tokens_after(self, moment: float | None) -> int:
        """How many pieces were handed on after ``moment`` (when the cancel arrived)."""
        if moment is None:
            return 0
        return sum(1 for emitted_at in self.piece_times if emitted_at > moment)


def run_token_loop(
    backend: Backend,
    messages: list[ChatMessage],
    generation: Generation,
    cancelled: CancelledSessions,
    emit: Callable[[str], None],
    limits: GenerationLimits,
    paragraphs: int = 0,
    label: str = "",
) -> Generation:
    """Generate until done, cancelled, out of time, repeating itself or past ``paragraphs``
    (0: no limit); ``emit`` gets every piece kept (of the last, its part before the blank
    line), less a copy of the prompt's ``label`` it begins with (``echo.py``)."""

    def should_stop() -> bool:
        return (
            generation.abandoned
            or generation.session_id in cancelled
            or time.monotonic() > generation.time_limit_at
        )

    stopped = False
    detector = RepetitionDetector()
    paragraph_limit = ParagraphLimit(paragraphs)
    echo = EchoedLabel(label)
    try:
        for piece in _pieces(backend.stream(messages, should_stop, limits), generation, limits):
            if should_stop():
                stopped = True
                break
            generation.pieces.append(piece)
            generation.piece_times.append(time.monotonic())
            if (loop := detector.feed(piece)) is not None:
                generation.finish_reason, generation.kept = "repetition", loop.since
                break
            if _pass_on(echo.feed(piece), paragraph_limit, generation, emit):
                break  # the next paragraph begins
    except GenerationStopped:
        stopped = True
    if generation.ended_at is None:  # the beginning held back while it may be the label
        _pass_on(echo.close(), paragraph_limit, generation, emit)
    generation.skipped = echo.skipped
    _end_before_restated_quote(generation, label)
    generation.finished_at = time.monotonic()
    if stopped and not generation.abandoned:
        generation.stopped_by_cancel = generation.session_id in cancelled
        generation.stopped_by_time_limit = not generation.stopped_by_cancel
    return generation


def _end_before_restated_quote(generation: Generation, label: str) -> None:
    """End the answer before a line that copies the prompt's ``label`` with the quote after
    it (``echo.label_line_at``); a repeated tail or the token cap came after that line."""
    said = generation.said
    restated = label_line_at(said[: generation.ended_at], label)
    if restated is None:
        return
    generation.ended_at = len(said[:restated].rstrip())
    if generation.finish_reason in ("length", "repetition"):
        generation.finish_reason = "stop"


def _pass_on(
    pieces: list[str],
    paragraph_limit: ParagraphLimit,
    generation: Generation,
    emit: Callable[[str], None],
) -> bool:
    """Send ``pieces`` (those the echo passed) up to a blank line past the paragraphs kept;
    True once there (of its piece, the part before the blank line is sent)."""
    for piece in pieces:
        if (end := paragraph_limit.feed(piece)) is not None:
            generation.ended_at = end
            if head := piece[: max(0, end - (len(paragraph_limit.text) - len(piece)))]:
                emit(head)
            return True
        emit(piece)
    return False


def _pieces(stream: Pieces, generation: Generation, limits: GenerationLimits) -> Iterator[str]:
    """The stream's pieces; once it ends, why the model stopped: as the backend says, else
    "length" when the pieces reached ``max_tokens`` (a piece is at least one token)."""
    reason = yield from stream
    at_cap = generation.tokens >= limits.max_tokens
    generation.finish_reason = reason or ("length" if at_cap else "stop")
