"""Ending an answer at a blank line: the model's first paragraphs are kept
(``CONCIERGE_ANSWER_PARAGRAPHS``, 1 by default; 0 keeps them all).

SmolLM2-135M puts its answer in its first paragraph, then comments on it and invents as it
goes: "Each session lasts 60 minutes. ⏎⏎ In other words, a single session can last anywhere
from 12 hours (3 days) to 48 hours". On the eval's files 13 of its 25 answers went on after a
blank line, and none of those paragraphs held a right fact the first lacked
(docs/quality.md, "One paragraph"). Ending the answer there drops what it invents after the
answer, and the engine seconds it costs everyone waiting. A model that writes lists or
steps wants ``CONCIERGE_ANSWER_PARAGRAPHS=0``.
"""

from __future__ import annotations

import re

BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")  # one break however many blank lines it has


class ParagraphLimit:
    """Reads an answer piece by piece; says where it ends once a paragraph past the limit
    begins. Blank lines before any text do not count."""

    def __init__(self, paragraphs: int) -> None:
        self.paragraphs = paragraphs  # 0: no limit
        self.text = ""

    def feed(self, piece: str) -> int | None:
        """The next piece; the length of the answer to keep once it has a blank line after
        its last paragraph kept, else None."""
        if not self.paragraphs:
            return None
        self.text += piece
        if "\n" not in piece:  # a blank line ends with a newline: none can be new (the hot path)
            return None
        breaks = 0
        for match in BLANK_LINE.finditer(self.text):
            before = self.text[: match.start()]
            if not before.strip():
                continue
            breaks += 1
            if breaks == self.paragraphs:
                return len(before.rstrip())
        return None
