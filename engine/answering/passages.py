"""What the model reads (passages within a character budget) and what the user sees after
the answer (the links of the articles used)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from config.text_helpers import ELLIPSIS, shorten
from engine.knowledge.models import PATH_SEPARATOR, Passage

SEPARATOR = "\n\n"
MIN_PARTIAL_CHARS = 200  # a cut passage shorter than this helps the model less than it costs
NEAREST_PAGES = 2  # pages pointed to after "not on the site"


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


def format_sources(passages: list[Passage], quoted: str = "") -> str:
    """A "Sources:" line, then "- Title > Section <page#anchor>" once per section: the
    ``quoted`` section (its link) first, since the reader checks the quote there, then the
    rest in rank order; "" if none."""
    first: dict[str, Passage] = {}
    for passage in sorted(passages, key=lambda passage: passage.link != quoted):
        first.setdefault(passage.link, passage)
    if not first:
        return ""
    return "Sources:\n" + _listed(first.values())


def format_nearest(heading: str, found: list[Passage], pages: int = NEAREST_PAGES) -> str:
    """``heading``, then "- Title > Section <page#anchor>" for the best section of each of the
    first ``pages`` pages found; "" if none. Not a "Sources:" list: they do not answer the
    question, and the asker should not read them as if they did."""
    best: dict[str, Passage] = {}
    for passage in found:
        if len(best) == pages:
            break
        best.setdefault(passage.url, passage)
    if not best:
        return ""
    return heading + "\n" + _listed(best.values())


def _listed(passages: Iterable[Passage]) -> str:
    """One "- Title > Section <page#anchor>" line per passage."""
    return "\n".join(f"- {_name(passage)} <{passage.link}>" for passage in passages)


def _name(passage: Passage) -> str:
    """The article's title, and the section's own heading when it is not the title."""
    title = passage.title or passage.url
    section = passage.heading.rsplit(PATH_SEPARATOR, 1)[-1] if passage.heading else ""
    return f"{title}{PATH_SEPARATOR}{section}" if section and section != title else title


def _header(number: int, passage: Passage) -> str:
    return f"[{number}] {passage.heading or passage.title} ({passage.link})\n"


def _cut(passage: Passage, max_text_chars: int) -> Passage:
    """The passage's text shortened to ``max_text_chars``, marked as cut."""
    return replace(passage, text=shorten(passage.text, max_text_chars))
