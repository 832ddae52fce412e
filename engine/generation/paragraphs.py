"""Ending an answer at a blank line: the model's first paragraphs are kept
(``CONCIERGE_ANSWER_PARAGRAPHS``, 1 by default; 0 keeps them all).

SmolLM2-135M puts its answer in its first paragraph, then comments on it and invents as it
goes: "Each session lasts 60 minutes. ⏎⏎ In other words, a single session can last anywhere
from 12 hours (3 days) to 48 hours". On the eval's files 13 of its 25 answers went on after a
blank line, and none of those paragraphs held a right fact the first lacked
(docs/quality.md, "One paragraph"). Ending the answer there drops what it invents after the
answer, and the engine seconds it costs everyone waiting. A model that writes lists or
steps wants ``CONCIERGE_ANSWER_PARAGRAPHS=0``.

A first paragraph can run on too, line after line with no blank one, to the token cap:
Python's name-mangling answer retold the class tutorial for 560 characters in one line and
went on. With a limit on, an answer also ends at the first sentence's end or line's end past
``ANSWER_MAX_CHARS``: over the eval's six real sites the model's words were 71 characters
long at the median and 486 at the 95th percentile, and a right fact never came later than
the 366th, while the answers past 600 were those that rambled to the cap.
"""

from __future__ import annotations

import re

BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")  # one break however many blank lines it has
ANSWER_MAX_CHARS = 600  # past this, the answer ends where a sentence or a line does
SENTENCE_END = re.compile(r"[.!?](?=\s)|[\u3002\uff01\uff1f]|\n")  # "." then a space; 。 alone
ENDING_MARKS = frozenset(".!?\u3002\uff01\uff1f\n")


class ParagraphLimit:
    """Reads an answer piece by piece; says where it ends once a paragraph past the limit
    begins, or a sentence or line ends past ``max_chars``. Blank lines before any text do
    not count."""

    def __init__(self, paragraphs: int, max_chars: int = ANSWER_MAX_CHARS) -> None:
        self.paragraphs = paragraphs  # 0: no limit, of either kind
        self.max_chars = max_chars
        self.text = ""

    def feed(self, piece: str) -> int | None:
        """The next piece; the length of the answer to keep once it has a blank line after
        its last paragraph kept, or a sentence's end past ``max_chars``, else None."""
        if not self.paragraphs:
            return None
        self.text += piece
        # a mark in the piece, or a space after one that ended the piece before
        if len(self.text) > self.max_chars and (
            not ENDING_MARKS.isdisjoint(piece) or piece[:1].isspace()
        ):
            start = max(self.max_chars, len(self.text) - len(piece) - 1)  # a mark just before
            if (end := SENTENCE_END.search(self.text, start)) is not None:
                paragraph_end = self._paragraph_end()
                if paragraph_end is not None and paragraph_end <= end.end():
                    return paragraph_end
                return len(self.text[: end.end()].rstrip())
        if "\n" not in piece:  # a blank line ends with a newline: none can be new (the hot path)
            return None
        return self._paragraph_end()

    def _paragraph_end(self) -> int | None:
        breaks = 0
        for match in BLANK_LINE.finditer(self.text):
            before = self.text[: match.start()]
            if not before.strip():
                continue
            breaks += 1
            if breaks == self.paragraphs:
                return len(before.rstrip())
        return None
