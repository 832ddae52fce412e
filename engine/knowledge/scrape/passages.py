"""Split an article into passages at indexing time, so one passage fits a small context.

Sizes are in characters, not words: Japanese text has no spaces to count.
"""

from __future__ import annotations

from config.text_helpers import split_sentences

PASSAGE_MAX_CHARS = 1200  # about 200 English words


def split_passages(text: str, max_chars: int = PASSAGE_MAX_CHARS) -> list[str]:
    """Pack whole paragraphs (else sentences, else hard cuts) into passages of max_chars."""
    passages: list[str] = []
    current = ""
    for piece in _pieces(text, max_chars):
        if current and len(current) + 1 + len(piece) > max_chars:
            passages.append(current)
            current = ""
        current = f"{current}\n{piece}" if current else piece
    if current:
        passages.append(current)
    return passages


def _pieces(text: str, max_chars: int) -> list[str]:
    """Paragraphs no longer than max_chars, breaking long ones at sentence ends."""
    pieces: list[str] = []
    for paragraph in filter(None, (line.strip() for line in text.splitlines())):
        if len(paragraph) <= max_chars:
            pieces.append(paragraph)
            continue
        for sentence in split_sentences(paragraph):
            pieces.extend(_hard_cut(sentence, max_chars))
    return pieces


def _hard_cut(sentence: str, max_chars: int) -> list[str]:
    return [sentence[i : i + max_chars] for i in range(0, len(sentence), max_chars)]
