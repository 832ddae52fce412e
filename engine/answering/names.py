"""Names the model's words give that nothing it read gives: the default model invents them.

Tried on the Cargo Book, "What does cargo build do?" was answered "a command that compiles
and builds packages on the Kubernetes server… built using Docker containers" above the quote
"Compile local packages and all of their dependencies."; on Python's documentation, "EAFP
stands for "Explicit Type Preferment"". A name a reader does not know sends them looking for
it, so such words are left out as a wrong number or an invented option is (numbers.py,
options.py): the answer is the site's quote and sources alone.

A name is a capitalised word inside a sentence (not its first word) that is no common English
word (``english.py``: "Python", "True", "Windows" are common, and so is a name everyone
writes; "Kubernetes", "Preferment" are not). Code is the model's illustration, not a claim:
its spans and blocks are not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engine.answering.english import is_common_word
from engine.answering.numbers import CODE_RE

# Capitalised after a lowercase letter or a comma, colon or semicolon and a space: not a
# sentence's first word, nor a heading's.
NAME_RE = re.compile(r"(?<=[a-z,;:] )[A-Z][A-Za-z]{2,}\b")


def unread_names(answer: str, read: Iterable[str]) -> list[str]:
    """The names of ``answer`` that are no common English word and that none of the texts in
    ``read`` holds (in any case), in order."""
    texts = " ".join(read).lower()
    said = dict.fromkeys(NAME_RE.findall(CODE_RE.sub(" ", answer)))
    return [name for name in said if not is_common_word(name.lower()) and name.lower() not in texts]
