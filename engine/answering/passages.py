"""What the model reads (passages within a character budget) and what the user sees after
the answer (the links of the articles used)."""

from __future__ import annotations

from engine.knowledge.models import Passage

SEPARATOR = "\n\n"
MIN_PARTIAL_CHARS = 200  # a cut passage shorter than this helps the model less than it costs
ELLIPSIS = "…"


def select_passages(passages: list[Passage], max_chars: int) -> list[Passage]:
    """The passages that fit in ``max_chars`` once rendered, best first; the last one may be
    cut short. Choose once, then give these to both ``render_passages`` and ``format_sources``."""
    chosen: list[Passage] = []
    used = 0
    for number, passage in enumerate(passages, start=1):
        prefix = (SEPARATOR if chosen else "") + _header(number, passage)
        room = max_chars - used - len(prefix)
        if len(passage.text) <= room:
            chosen.append(passage)
            used += len(prefix) + len(passage.text)
            continue
        if room >= MIN_PARTIAL_CHARS or (not chosen and room > len(ELLIPSIS)):
            chosen.append(_cut(passage, room))
        break
    return chosen


def render_passages(chosen: list[Passage]) -> str:
    """The numbered passages, each headed by its title and link: as long as ``select_passages``
    allowed when they came from it."""
    return SEPARATOR.join(
        _header(number, passage) + passage.text for number, passage in enumerate(chosen, 1)
    )


def format_sources(passages: list[Passage]) -> str:
    """A "Sources:" line, then "- Title <url>" once per article in rank order; "" if none."""
    first: dict[str, Passage] = {}
    for passage in passages:
        first.setdefault(passage.url, passage)
    if not first:
        return ""
    return "Sources:\n" + "\n".join(f"- {p.title or p.url} <{p.url}>" for p in first.values())


def _header(number: int, passage: Passage) -> str:
    return f"[{number}] {passage.title} ({passage.url})\n"


def _cut(passage: Passage, max_text_chars: int) -> Passage:
    """The passage's text shortened to ``max_text_chars``, at a space when there is one."""
    keep = passage.text[: max_text_chars - len(ELLIPSIS)]
    if " " in keep[len(keep) // 2 :]:
        keep = keep[: keep.rindex(" ")]
    return Passage(passage.title, passage.url, keep.rstrip() + ELLIPSIS, passage.score)
