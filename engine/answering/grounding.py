"""What an answer stands on, decided before the model runs, and what the engine writes after it.

The default model (SmolLM2-135M) answers from whatever it is given and invents the rest, so
the site decides (docs/quality.md, "Grounded answers"):

- the message is small talk ("hi", "thanks!", ``engine/answering/smalltalk.py``): no search needed
and
  no model answer, one friendly sentence in its language that says what the engine can do;
- the knowledge base is empty (no rescrape yet): nothing to stand on, so the model answers
  as a general assistant and a note after it says that is not the site's answer;
- the site does not cover the question (``engine/answering/coverage.py``): no model answer at
  all, a sentence saying so in the question's language, no source (costs no engine seconds,
  invents nothing);
- it covers it: the model reads the covering article's passages (when it writes the
  question's language, ``CONCIERGE_MODEL_LANGUAGES``, and, for a yes/no question, when
  ``CONCIERGE_MODEL_ANSWERS_YES_NO`` says it can: ``engine/answering/yes_no.py``), then the engine
  quotes the article's sentences that best match the question, and its link: a reader can
  check the claim even when the model garbles it. That article is the one source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.protocol import FinishReason
from engine.answering.coverage import relevant_passages
from engine.answering.evidence import Evidence, find_evidence, opening
from engine.answering.passages import format_sources
from engine.answering.smalltalk import small_talk
from engine.answering.wording import WORDING, Language, language_of
from engine.answering.yes_no import is_yes_no_question
from engine.knowledge.models import Passage


@dataclass(frozen=True)
class Grounding:
    """The passages an answer may use ([] when the site does not cover the question), the
    quote that backs it, and whether the model writes anything."""

    language: Language
    passages: tuple[Passage, ...] = ()  # of the one article that covers the question
    evidence: Evidence | None = None
    asks_model: bool = True
    note: str = ""  # said instead of evidence: the site does not cover it, or has no articles
    small_talk: bool = False  # a greeting or thanks, answered by ``note`` alone

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(passage.url for passage in self.passages))

    @property
    def not_on_site(self) -> bool:
        """No article answers it, and it asked something (small talk asks nothing)."""
        return not self.passages and not self.small_talk


def ground(
    question: str,
    found: Sequence[Passage],
    *,
    kb_empty: bool,
    model_languages: Sequence[str],
    model_answers_yes_no: bool,
    follow_up_of: str = "",
) -> Grounding:
    """What ``question`` may be answered from, given the passages the search ``found``.

    A follow-up ("and how much is the ticket?") rarely names its subject: when the question
    alone is not covered, ``follow_up_of`` (the question with the asker's earlier ones, as the
    search read it) may be."""
    language = language_of(question)
    words = WORDING[language]
    # Small talk first, before the follow-up ("thanks!" asks nothing) and before the first
    # rescrape too (the model would answer "hi" with a story of its own).
    if (said := small_talk(question)) is not None:
        return Grounding(language, asks_model=False, note=words.small_talk(said), small_talk=True)
    if kb_empty:
        return Grounding(language, note=words.no_articles)
    passages = relevant_passages(question, found)
    if not passages and follow_up_of:
        passages = relevant_passages(follow_up_of, found)
    if not passages:
        return Grounding(language, asks_model=False, note=words.not_on_site)
    evidence = find_evidence(question, passages) or opening(passages[0])
    asks_model = language in model_languages and (
        model_answers_yes_no or not is_yes_no_question(question)
    )
    return Grounding(language, tuple(passages), evidence, asks_model=asks_model)


def closing(
    grounding: Grounding, finish_reason: FinishReason, max_tokens: int, *, after_text: bool
) -> str:
    """What follows the model's words (``after_text``: it wrote some): why it was cut, if it
    was; then the quote and its source, or the note."""
    words = WORDING[grounding.language]
    parts: list[str] = []
    if finish_reason == "repetition":
        parts.append(words.cut_repetition)
    elif finish_reason == "length":
        parts.append(words.cut_length.format(max_tokens=max_tokens))
    if grounding.evidence is not None:
        quoted = words.evidence.format(quote=grounding.evidence.quote)
        parts.append(quoted + "\n" + format_sources(list(grounding.passages)))
    elif grounding.note:
        parts.append(grounding.note)
    text = "\n\n".join(parts)
    return "\n\n" + text if text and after_text else text
