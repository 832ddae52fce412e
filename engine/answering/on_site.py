"""Is the question on the site? The one rule, decided on the search's passages before the
model runs. The wire calls a question it refuses ``not_on_site``.

The search always returns something when any word matches, and a small model answers from
whatever it is given: "When does the ferry to Osaka leave?" retrieves the ferry timetable
and gets its times. So a question is on the site only when one article holds most of what it
asks about: the weighted share of its needs (``needs.question_needs``: its content words,
the characters of its Japanese terms) met by the article's retrieved passages.

The share, not a bm25 score: bm25 depends on the size of the knowledge base and on how
common a word is there, so no fixed threshold on it would mean the same on two sites.
See docs/quality.md for how the threshold was chosen.

A follow-up ("and how much is the ticket?") rarely names its subject: when the question
alone is not on the site, the question with the asker's earlier ones (as the search read
it) may be.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.answering.needs import Need, met, question_needs
from engine.knowledge.models import Passage

ON_SITE_SHARE = 0.7  # docs/quality.md, "Is it on the site?"


@dataclass(frozen=True, slots=True)
class BestArticle:
    """How much of the question the best article's passages answer (0.0 to 1.0)."""

    url: str | None
    share: float

    @property
    def on_site(self) -> bool:
        return self.url is not None and self.share >= ON_SITE_SHARE


def on_site_passages(
    question: str, found: Sequence[Passage], *, follow_up_of: str = ""
) -> list[Passage]:
    """The passages of the article that answers ``question``, in rank order; [] when it is
    not on the site (say so, and cite nothing)."""
    best = best_article(question, found)
    if not best.on_site and follow_up_of:
        best = best_article(follow_up_of, found)
    if not best.on_site:
        return []
    return [passage for passage in found if passage.url == best.url]


def best_article(question: str, passages: Sequence[Passage]) -> BestArticle:
    """The article whose retrieved passages meet the largest share of the question's needs
    (the first in rank order on a tie); share 0.0 when the question names nothing."""
    needs = question_needs(question)
    best = BestArticle(url=None, share=0.0)
    if not needs:
        return best
    for url, text in _articles(passages).items():
        share = share_met(needs, text)
        if share > best.share:
            best = BestArticle(url=url, share=share)
    return best


def share_met(needs: Sequence[Need], text: str) -> float:
    """The weighted share of the required ``needs`` met by ``text`` (optional ones, the
    particles and the framing words, do not count: met or not, they say nothing of the topic)."""
    lowered = text.lower()
    required = [need for need in needs if not need.optional]
    total = sum(need.weight for need in required)
    met_weight = sum(need.weight for need in required if met(need, lowered))
    return met_weight / total if total else 0.0


def _articles(passages: Sequence[Passage]) -> dict[str, str]:
    """Each article's title and retrieved passages as one text, in rank order."""
    texts: dict[str, list[str]] = {}
    for passage in passages:
        texts.setdefault(passage.url, [passage.title]).append(passage.text)
    return {url: "\n".join(parts) for url, parts in texts.items()}
