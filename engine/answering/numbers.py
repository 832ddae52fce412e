"""Numbers the model's words give that nothing it read gives: the default model garbles them.

Tried on npm's documentation, "What is the default value of fetch-timeout?" was answered "The
default value of fetch-timeout is 30000." above the quote "fetch-timeout — Default: 300000 (5
minutes)"; on the test site, "You can return an item within 30 days. The answer is: 1". A
reader trusts a number. So when the model's words give one that nothing it was given holds
(the system text, the conversation's turns, the passages, the question), the engine leaves
its words out and the answer is the site's quote and sources alone (``engine.jobs.answer``):
the asker saw the words stream, and the terminal event's text, which replaces them, has the
quote. To a question asking for a figure that the quote says in words ("Defaults to the
number of logical CPUs."), the quote stands for the passages: it is the sentence chosen to
give that figure, so a figure is the model's own ("The answer is 1." to "How many parallel
jobs does cargo build run by default?" came from another passage's "-j1").

Not counted: a list's numbering ("1. Install it", "Step 2:"), numbers in code (an example's
``range(10)`` is the model's illustration, not a fact of the site), addresses, and, in an
answer cut at the token cap, the number it was cut in ("300" of "300000"). A number is read
as a reader would: "1,200" is 1200, "1.50" is 1.5, full-width digits are digits, and
"3.11.2" gives "3.11" and "3" too ("Python 3").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

NUMBER_RE = re.compile(r"\d+(?:[,.:]\d+)*")  # 16:50, 1,200, 3.5, 300000
LIST_MARKER_RE = re.compile(r"^[ \t]*(?:#+[ \t]*)?(?:step[ \t]+)?\d+[.):][ \t]", re.I | re.M)
CODE_BLOCK = r"```.*?(?:```|\Z)"  # a block, closed or cut at the token cap
CODE_SPAN = r"`([^`\n]*)`"
CODE_RE = re.compile(f"{CODE_BLOCK}|{CODE_SPAN}", re.DOTALL)
ADDRESS_RE = re.compile(r"<?https?://\S+")


def unbacked_numbers(answer: str, read: Iterable[str], *, cut: bool = False) -> list[str]:
    """The numbers of ``answer`` that none of the texts in ``read`` holds, in order of
    appearance; ``cut``: the answer stopped at the token cap, maybe inside its last number."""
    answer = unicodedata.normalize("NFKC", answer)
    if cut:
        answer = re.sub(r"[\d,.:]+\Z", "", answer.rstrip())
    prose = LIST_MARKER_RE.sub(" ", CODE_RE.sub(" ", ADDRESS_RE.sub(" ", answer)))
    given = {
        form
        for text in read
        for found in NUMBER_RE.findall(unicodedata.normalize("NFKC", text))
        for form in _forms(found)
    }
    said = dict.fromkeys(number_key(found) for found in NUMBER_RE.findall(prose))
    return [number for number in said if number not in given]


def _forms(text: str) -> list[str]:
    """The number and the dotted prefixes a reader also reads in it: "3.11.2", "3.11", "3"."""
    parts = text.split(".")
    return [number_key(".".join(parts[:end])) for end in range(len(parts), 0, -1)]


def number_key(text: str) -> str:
    """ "1,200" and "1200" alike, "07:10" and "7:10", "1.50" and "1.5"."""
    number = text.replace(",", "")
    if ":" in number:
        return ":".join(part.lstrip("0") or "0" for part in number.split(":"))
    whole, dot, fraction = number.partition(".")
    if "." not in fraction:  # a decimal, not a version: "1.50" is "1.5"
        fraction = fraction.rstrip("0")
    return (whole.lstrip("0") or "0") + (dot + fraction if fraction else "")
