"""Cutting plain text, the same way for the bots and the engine (so it lives in the lowest
layer): a text shortened to its room, and a text split into sentences, English or Japanese.

Not to be confused with ``config.texts``, the catalogue of what the bots and the engine write.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
SENTENCE_ENDS = ".!?\u3002\uff01\uff1f"  # and the Japanese full stop, ! and ?
# A sentence runs to its end marks, all of them ("Really?!"), when a space or the line's end
# follows them ("a.pop() removes" goes on; "3.14" stays whole), to a Japanese end mark
# anywhere, or to the end of its line; so no character but the spaces between sentences is lost
# ("..." alone is a sentence too).
# A sentence ends at its stop and a space, not at "e.g." or "(eg. 20 to 30 times)", nor at
# the "!" of a Rust macro's name going on in lowercase ("The println! macro is only…").
SENTENCE_RE = re.compile(
    r"[^\n]+?(?:(?<!\beg)(?<!\bie)(?<!\bcf)(?<!\bvs)(?<!\be\.g)(?<!\bi\.e)(?<!\bE\.g)"
    r"[.!?]+(?=\s|$)(?!(?<=\w!)\s+[a-z])|[\u3002\uff01\uff1f]+|$)",
    re.M,
)


def shorten(text: str, max_chars: int, ellipsis: str = ELLIPSIS) -> str:
    """``text`` in at most ``max_chars``: as it is if it fits, else its start then
    ``ellipsis``, cut at a space when there is one in the start's second half (no word cut in
    two where one can help it; Japanese has no spaces and is cut anywhere). With no room even
    for ``ellipsis``, the start alone."""
    if len(text) <= max_chars:
        return text
    if max_chars < len(ellipsis):
        return text[: max(0, max_chars)]
    keep = text[: max_chars - len(ellipsis)]
    if " " in keep[len(keep) // 2 :]:
        keep = keep[: keep.rindex(" ")]
    return keep.rstrip() + ellipsis


def split_sentences(text: str) -> list[str]:
    """``text``'s sentences in order, each with its end marks and without the spaces around
    it; a line's end ends a sentence too."""
    return [stripped for found in SENTENCE_RE.findall(text) if (stripped := found.strip())]
