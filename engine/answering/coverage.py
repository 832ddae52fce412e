"""Does the site cover the question? A decision on the retrieved passages, before the model runs.

The search always returns something when any word matches, and a small model answers from
whatever it is given: "When does the ferry to Osaka leave?" retrieves the ferry timetable
and gets its times. So a question counts as covered only when one article holds most of
what it asks about: the weighted share of its needs (``question_needs``: its content words,
the characters of its Japanese terms) met by the article's retrieved passages.

The share, not a bm25 score: bm25 depends on the size of the knowledge base and on how
common a word is there, so no fixed threshold on it would mean the same on two sites.
See docs/quality.md for how the threshold was chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.knowledge.models import Passage
from engine.knowledge.query import Need, met, question_needs

COVERED_SHARE = 0.7  # on eval/: answerable questions 0.76 and up, the rest 0.63 and below


@dataclass(frozen=True, slots=True)
class Coverage:
    """How much of the question the best article's passages answer (0.0 to 1.0)."""

    url: str | None
    share: float

    @property
    def covered(self) -> bool:
        return self.url is not None and self.share >= COVERED_SHARE


def share_met(needs: Sequence[Need], text: str) -> float:
    """The weighted share of the required ``needs`` met by ``text`` (optional ones, the
    particles and the framing words, do not count: met or not, they say nothing of the topic)."""
    lowered = text.lower()
    required = [need for need in needs if not need.optional]
    total = sum(need.weight for need in required)
    met_weight = sum(need.weight for need in required if met(need, lowered))
    return met_weight / total if total else 0.0


def coverage(question: str, passages: Sequence[Passage]) -> Coverage:
    """The article whose retrieved passages meet the largest share of the question's needs
    (the first in rank order on a tie); share 0.0 when the question names nothing."""
    needs = question_needs(question)
    best = Coverage(url=None, share=0.0)
    if not needs:
        return best
    for url, text in _articles(passages).items():
        share = share_met(needs, text)
        if share > best.share:
            best = Coverage(url=url, share=share)
    return best


def relevant_passages(question: str, passages: Sequence[Passage]) -> list[Passage]:
    """The passages of the covering article, in rank order; [] when the site does not cover
    the question (say so, and cite nothing)."""
    found = coverage(question, passages)
    if not found.covered:
        return []
    return [passage for passage in passages if passage.url == found.url]


def _articles(passages: Sequence[Passage]) -> dict[str, str]:
    """Each article's title and retrieved passages as one text, in rank order."""
    texts: dict[str, list[str]] = {}
    for passage in passages:
        texts.setdefault(passage.url, [passage.title]).append(passage.text)
    return {url: "\n".join(parts) for url, parts in texts.items()}
