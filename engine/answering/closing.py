"""What the engine writes after the model's words: why they were cut, if they were; then the
quote that backs the answer and its sources, or the engine's note (not on the site, no
articles yet). For the steps before the model, see pipeline.py."""

from __future__ import annotations

import re

from broker.protocol import FinishReason
from engine.answering.passages import format_sources
from engine.answering.pipeline import Plan
from engine.answering.wording import WORDING, Withdrawn

FENCE_RE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)  # a Markdown code fence's line


def closed_fence(answer: str) -> str:
    """The line that closes a code block the model left open (its answer cut at a paragraph
    limit or the token cap inside one), else "": without it, the quote and the sources after
    the answer would show as code, on every platform."""
    open_fence = ""
    for match in FENCE_RE.finditer(answer):
        if not open_fence:
            open_fence = match.group(1)
        elif match.group(1) == open_fence:
            open_fence = ""
    return f"\n{open_fence}" if open_fence else ""


def closing(
    plan: Plan,
    finish_reason: FinishReason,
    max_tokens: int,
    *,
    answer: str,
    withdrawn: Withdrawn = "",
) -> str:
    """What follows the model's words (``answer``: "" when it wrote none), or the whole
    answer when the engine answers alone; ``withdrawn``: the model's words are left out
    (they gave a number or an option nothing it read gives: numbers.py, options.py), and this
    says so first."""
    words = WORDING[plan.language]
    parts: list[str] = []
    if withdrawn:
        parts.append(words.withdrawal(withdrawn))
    elif finish_reason == "repetition":
        parts.append(words.cut_repetition)
    elif finish_reason == "length":
        parts.append(words.cut_length.format(max_tokens=max_tokens))
    if plan.evidence is not None:
        quoted = words.evidence.format(quote=plan.evidence.quote)
        parts.append(quoted + "\n" + format_sources(list(plan.passages), plan.evidence.link))
    elif plan.note:
        parts.append(plan.note)
    text = "\n\n".join(parts)
    return closed_fence(answer) + "\n\n" + text if text and answer else text
