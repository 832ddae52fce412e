# ruff: noqa: RUF001  # the Japanese wording uses full-width brackets and colons
"""What the engine itself writes to the asker, in the question's language.

Plain text, no Markdown: Discord, Slack and the terminal each show it as written (the
empty-knowledge-base note once showed its ``_underscores_`` raw). English and Japanese are
told apart by the question's script; any other language reads the English.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from engine.knowledge import NO_ARTICLES_MESSAGE

Language = Literal["en", "ja"]
# Kana, or kanji: a question holding either is read as Japanese (Chinese reads Japanese too).
JAPANESE_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")


@dataclass(frozen=True)
class Wording:
    not_on_site: str  # the whole answer to a question the site does not cover
    no_articles: str  # after a general answer, before the first rescrape
    evidence: str  # before the quote of the article ({quote})
    cut_repetition: str  # after an answer stopped for repeating itself
    cut_length: str  # after one stopped at CONCIERGE_MAX_TOKENS ({max_tokens})


WORDING: dict[Language, Wording] = {
    "en": Wording(
        not_on_site="The site does not cover this: none of its articles answers that question.",
        no_articles=NO_ARTICLES_MESSAGE,
        evidence="From the site: \u201c{quote}\u201d",
        cut_repetition="(Cut here: the answer had started repeating itself.)",
        cut_length="(Cut here: the answer reached its limit of {max_tokens} tokens.)",
    ),
    "ja": Wording(
        not_on_site="この質問の答えは、サイトの記事には載っていません。",
        no_articles=(
            "サイトの記事からの答えではありません。まだ記事を読み込んでいません"
            "（管理者が rescrape を実行すると、サイトを読み込みます）。"
        ),
        evidence="サイトの記事より：「{quote}」",
        cut_repetition="（同じことを繰り返し始めたため、ここで打ち切りました。）",
        cut_length="（長さの上限 {max_tokens} トークンに達したため、ここで打ち切りました。）",
    ),
}


def language_of(question: str) -> Language:
    return "ja" if JAPANESE_RE.search(question) else "en"
