"""Turn a question into what the trigram index can answer.

Trigram FTS5 matches any substring of three or more characters, so each term is quoted
and the terms are joined with OR (bm25 ranks passages matching more and rarer terms first).
Japanese has no spaces: its runs become overlapping trigrams for the index and bigrams
(most Japanese words are two kanji) for a substring fallback that trigrams cannot serve.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MIN_INDEXED_CHARS = 3  # the trigram tokenizer matches nothing shorter
MAX_TERMS = 32  # a 4,000-character question must not become a 4,000-term query

WORD_RE = re.compile(r"\w+")
CJK_RUN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
HIRAGANA_RE = re.compile(r"[\u3040-\u309f]+")
STOPWORDS = frozenset(
    "a about an and are as at be by can do does for from has have how i in is it its me my "
    "no of on or our please so tell that the their there this to up us was we what when "
    "where which who why with you your".split()
)


@dataclass(frozen=True, slots=True)
class Query:
    """``match`` is an FTS5 expression ("" when no term is long enough); ``substrings``
    are the shorter terms, looked up by plain substring search."""

    match: str
    substrings: tuple[str, ...]


def parse_query(question: str) -> Query:
    """Split a question into indexed terms and short substrings."""
    indexed: list[str] = []
    short: list[str] = []
    for word in WORD_RE.findall(question.lower()):
        for run, is_cjk in _script_runs(word):
            terms = _cjk_terms(run) if is_cjk else _latin_terms(run)
            for term in terms:
                (indexed if len(term) >= MIN_INDEXED_CHARS else short).append(term)
    content = [term for term in indexed if term not in STOPWORDS]
    substrings = [term for term in short if term not in STOPWORDS]
    if not content and not substrings:  # "what is this": stopwords are all there is
        content = indexed
    match = " OR ".join(_quote(term) for term in _unique(content))
    return Query(match=match, substrings=tuple(_unique(substrings)))


def _script_runs(word: str) -> Iterator[tuple[str, bool]]:
    """Yield the CJK and non-CJK runs of a word ("python入門" -> "python", "入門")."""
    position = 0
    for cjk in CJK_RUN_RE.finditer(word):
        if cjk.start() > position:
            yield word[position : cjk.start()], False
        yield cjk.group(), True
        position = cjk.end()
    if position < len(word):
        yield word[position:], False


def _latin_terms(run: str) -> list[str]:
    """One term; a plural's final "s" is dropped since a substring match still finds both."""
    if len(run) > 4 and run.endswith("s") and not run.endswith("ss"):
        return [run[:-1]]
    return [run] if len(run) >= 2 else []


def _cjk_terms(run: str) -> list[str]:
    """Overlapping trigrams and bigrams, leaving out pure-hiragana grammar like "ですか"."""
    if len(run) == 1:
        grams = [run]
    else:
        grams = [run[i : i + size] for size in (3, 2) for i in range(len(run) - size + 1)]
    return [gram for gram in grams if not HIRAGANA_RE.fullmatch(gram)]


def _unique(terms: list[str]) -> list[str]:
    return list(dict.fromkeys(terms))[:MAX_TERMS]


def _quote(term: str) -> str:
    """A quoted FTS5 string: no character of the question can become query syntax."""
    return '"' + term.replace('"', '""') + '"'
