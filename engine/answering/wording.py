"""What the engine itself writes in an answer, in the question's language.

The texts are the catalogue's (``config/texts/engine.py``, keys ``engine.answer.*``); this
module chooses the language. An answer's own sentences ("not on the site", the quote, why it
was cut, the reply to small talk) follow the question, not the asker's locale: a Japanese
question gets a Japanese answer, whoever asks it. English and Japanese are told apart by the
question's script; any other language reads the English.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from config.texts import LOCALES, Locale, t
from engine.answering.smalltalk import SmallTalk

Language = Locale
# why the model's words were left out ("": kept)
Withdrawn = Literal["", "number", "option", "name", "term"]
WITHDRAWN_WHY: tuple[Withdrawn, ...] = ("number", "option", "name", "term")
# Kana, or kanji: a question holding either is read as Japanese (Chinese reads Japanese too).
JAPANESE_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")


@dataclass(frozen=True)
class Wording:
    """One language's texts; ``evidence`` and ``cut_length`` keep their ``{fields}``."""

    not_on_site: str  # the whole answer to a question the site does not cover
    nearest: str  # ... then before the sections nearest to it
    no_articles: str  # after a general answer, before the first rescrape
    evidence: str  # before the quote of the article ({quote})
    cut_repetition: str  # after an answer stopped for repeating itself
    cut_length: str  # after one stopped at CONCIERGE_MAX_TOKENS ({max_tokens})
    withdrawn: str  # instead of the model's words, when they gave a number (numbers.py)
    withdrawn_option: str  # ... or an option (options.py) nothing it read gives
    withdrawn_name: str  # ... or named another than the quote's name (evidence.quoted_name)
    withdrawn_term: str  # ... or a name nothing it read gives (names.py)
    greeting: str  # the whole answer to small talk (engine/answering/smalltalk.py): "hi"
    thanks: str  # "thanks!"
    goodbye: str  # "bye"

    def small_talk(self, said: SmallTalk) -> str:
        return {"greeting": self.greeting, "thanks": self.thanks, "goodbye": self.goodbye}[said]

    def withdrawal(self, why: Withdrawn) -> str:
        """The sentence that stands for the model's words left out ``why`` ("" when kept)."""
        return dict(zip(WITHDRAWN_WHY, self.withdrawals, strict=True)).get(why, "")

    @property
    def withdrawals(self) -> tuple[str, ...]:
        """Every such sentence, in the order of ``WITHDRAWN_WHY``."""
        return (self.withdrawn, self.withdrawn_option, self.withdrawn_name, self.withdrawn_term)


def wording(language: Language) -> Wording:
    return Wording(
        not_on_site=t("engine.answer.not_on_site", language),
        nearest=t("engine.answer.nearest", language),
        no_articles=t("engine.answer.no_articles", language),
        evidence=t("engine.answer.evidence", language),
        cut_repetition=t("engine.answer.cut_repetition", language),
        cut_length=t("engine.answer.cut_length", language),
        withdrawn=t("engine.answer.withdrawn", language),
        withdrawn_option=t("engine.answer.withdrawn_option", language),
        withdrawn_name=t("engine.answer.withdrawn_name", language),
        withdrawn_term=t("engine.answer.withdrawn_term", language),
        greeting=t("engine.answer.greeting", language),
        thanks=t("engine.answer.thanks", language),
        goodbye=t("engine.answer.goodbye", language),
    )


WORDING: dict[Language, Wording] = {language: wording(language) for language in LOCALES}


def language_of(text: str) -> Language:
    """Japanese when a tenth of the letters are kana or kanji (a question: any one)."""
    letters = sum(1 for char in text[:2000] if char.isalpha())
    japanese = len(JAPANESE_RE.findall(text[:2000]))
    return "ja" if japanese and (japanese * 10 >= letters or letters < 200) else "en"
