"""Numbers the model's words give that nothing it read gives: the default model garbles them.

Tried on npm's documentation, "What is the default value of fetch-timeout?" was answered "The
default value of fetch-timeout is 30000." above the quote "fetch-timeout — Default: 300000 (5
minutes)"; on Python's, "The default level of the logging module is 50." (WARNING is 30). A
reader trusts a number. So when the model's words give one that neither the question, the
asker's earlier questions nor the passages it answered from hold, the engine leaves its words
out and the answer is the site's quote and sources alone (``engine.jobs.answer``): the asker
saw the words stream, and the terminal event's text, which replaces them, has the quote.

Not counted: a list's numbering ("1. Install it"), numbers in code (an example's
``range(10)`` is the model's illustration, not a fact of the site) and addresses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NUMBER_RE = re.compile(r"\d+(?:[,.:]\d+)*")  # 16:50, 1,200, 3.5, 300000
LIST_MARKER_RE = re.compile(r"^[ \t]*\d+[.)][ \t]", re.MULTILINE)
CODE_RE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
ADDRESS_RE = re.compile(r"<?https?://\S+")


def unbacked_numbers(answer: str, read: Iterable[str]) -> list[str]:
    """The numbers of ``answer`` that none of the texts in ``read`` holds ("1,200" and "1200"
    alike, "07:10" and "7:10" alike), in order of appearance."""
    prose = LIST_MARKER_RE.sub(" ", CODE_RE.sub(" ", ADDRESS_RE.sub(" ", answer)))
    given = {_number(found) for text in read for found in NUMBER_RE.findall(text)}
    said = dict.fromkeys(_number(found) for found in NUMBER_RE.findall(prose))
    return [number for number in said if number not in given]


def _number(text: str) -> str:
    return text.replace(",", "").lstrip("0") or "0"
