"""Turn a question into what the trigram index can answer.

Trigram FTS5 matches any substring of three or more characters, so each term is quoted
and the terms are joined with OR (bm25 ranks passages matching more and rarer terms first).
A two-letter name ("ci", "ls") is too short for the index: it is also searched as a phrase
with the word beside it ("npm ci"), which the index can match. English words lose common
endings ("closing" -> "clos"), so a substring match finds "close", "closed" and "closes" alike.
Japanese has no spaces: its runs become overlapping trigrams for the index and bigrams (most
Japanese words are two kanji) for a substring fallback that trigrams cannot serve. A hiragana
word ("ようかん", "よやく") is found by its hiragana trigrams, once the grammar around it
("はいくらですか") is taken out. A Japanese run's dictionary words are also searched in
English, for English pages (``glossary.py``: ヒープ, "heap"), after the question's own terms.

engine/answering/needs.py groups the same terms by what the question asks about, for the
on-site decision and the quote: they must read the question as the search does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from engine.knowledge.glossary import shared_glossary

MIN_INDEXED_CHARS = 3  # the trigram tokenizer matches nothing shorter
MAX_TERMS = 32  # a 4,000-character question must not become a 4,000-term query
ENGLISH_PER_WORD = 2  # of a Japanese word's English forms, those searched for
ENGLISH_TERMS = 12  # a Japanese question's English forms searched for, after its own terms
NOUN_SUFFIXES = ("ation", "ition", "tion", "sion", "ment")
MIN_STEM_CHARS = 4  # "times" -> "time", never "tim": a shorter stem matches too much

WORD_RE = re.compile(r"\w+")
LATIN_WORD_RE = re.compile(r"[a-z0-9]+")
CJK_RUN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
HIRAGANA_RE = re.compile(r"[\u3040-\u309f]+")
KANJI_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
STOPWORDS = frozenset(
    "a about after again am an and any are as at be been between by can could do does don for "
    "from get has have how i if in into is it its just know long many me much my need no not of on "
    "or our please should so take tell than that the their there this time to up us want "
    "was we were what when where which who why will with would you your".split()
)
# Suffixes dropped from English words (the longest that leaves MIN_STEM_CHARS), then a
# final "e": what is left is a substring of every form of the word.
SUFFIXES = (("ies", "y"), ("ing", ""), ("ed", ""), ("s", ""))
# Question words and endings, in hiragana (and the kanji 何): never what a question is about.
# Long forms only where a short one could sit inside a word ("から" in "からあげ").
GRAMMAR = (
    "でしょうか", "ありますか", "できますか", "いますか", "ますか", "ですか", "ください",
    "でしょう", "ありません", "ません", "ました", "でした", "ています", "しています",
    "について", "どうやって", "どうすれば", "すればいい", "すれば", "いいですか", "いくら",
    "いつまでに", "いつまで", "いつから", "いつ", "どこ", "どれ", "どちら", "どんな", "なん",
    "なに", "だれ", "まで", "ですが", "ますが", "です", "ます", "ある", "あり", "でき", "します",
    "何",
)  # fmt: skip


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
    for term in _all_terms(question):
        (indexed if len(term) >= MIN_INDEXED_CHARS else short).append(term)
    # The phrases first: a long question's terms are cut at MAX_TERMS.
    content = short_word_phrases(question) + [term for term in indexed if term not in STOPWORDS]
    substrings = [term for term in short if term not in STOPWORDS]
    if not content and not substrings:  # "what is this": stopwords are all there is
        content = indexed
    # A Japanese question's words in English, for English pages ("ヒープ": "heap"), within a
    # budget of their own: they must not push the question's own terms out, nor these them.
    english = _unique(list(_english_terms(question)))[:ENGLISH_TERMS]
    terms = _unique(content) + [term for term in english if term not in content]
    match = " OR ".join(_quote(term) for term in terms)
    return Query(match=match, substrings=tuple(_unique(substrings)))


def short_word_phrases(question: str) -> list[str]:
    """Each two-letter word that is not a stopword, with the word before it ("npm ci"), or
    after it when that one is a stopword ("the ls command" -> "ls command"): only words
    written next to each other, with one space between them."""
    words = list(LATIN_WORD_RE.finditer(question.lower()))
    phrases: list[str] = []
    for index, word in enumerate(words):
        if len(word.group()) != 2 or word.group() in STOPWORDS:
            continue
        before = words[index - 1] if index > 0 else None
        after = words[index + 1] if index + 1 < len(words) else None
        if before and before.group() not in STOPWORDS and before.end() + 1 == word.start():
            phrases.append(f"{before.group()} {word.group()}")
        elif after and after.group() not in STOPWORDS and word.end() + 1 == after.start():
            phrases.append(f"{word.group()} {after.group()}")
    return phrases


def _english_terms(question: str) -> Iterator[str]:
    for word in WORD_RE.findall(question.lower()):
        for run, is_cjk in script_runs(word):
            for _, _, forms in english_forms(run) if is_cjk else ():
                yield from (f for f in forms[:ENGLISH_PER_WORD] if len(f) >= MIN_INDEXED_CHARS)


def _all_terms(question: str) -> Iterator[str]:
    for word in WORD_RE.findall(question.lower()):
        for run, is_cjk in script_runs(word):
            yield from cjk_terms(run) if is_cjk else latin_terms(run)


def english_forms(run: str) -> list[tuple[int, int, tuple[str, ...]]]:
    """The dictionary words of a Japanese run (``glossary.py``) as (start, end, forms): each
    of its English glosses as the search and the needs look for it, a word's ending dropped
    ("memory leaks" is met by "memory leak") and a noun's made verb ("installation" by
    "install": the page says "npm install"); stopwords are no form."""
    words = shared_glossary().words(run, grammar_mask(run))
    return [(start, end, _english_forms(glosses)) for start, end, glosses in words]


def _english_forms(glosses: tuple[str, ...]) -> tuple[str, ...]:
    forms = []
    for gloss in glosses:
        *before, last = gloss.split()
        if not before and last in STOPWORDS:
            continue
        verb = _verb_of(last)
        forms.append(" ".join([*before, verb if verb != last else _stem(last)]))
    return tuple(dict.fromkeys(forms))


def _verb_of(noun: str) -> str:
    """ "installation" -> "install", "deletion" -> "dele", "execution" -> "execu": the stem
    a page's verb shares, when at least ``MIN_STEM_CHARS`` are left ("option" stays)."""
    for suffix in NOUN_SUFFIXES:
        if noun.endswith(suffix) and len(noun) - len(suffix) >= MIN_STEM_CHARS:
            return noun[: -len(suffix)]
    return noun


def script_runs(word: str) -> Iterator[tuple[str, bool]]:
    """Yield the CJK and non-CJK runs of a word ("python入門" -> "python", "入門")."""
    position = 0
    for cjk in CJK_RUN_RE.finditer(word):
        if cjk.start() > position:
            yield word[position : cjk.start()], False
        yield cjk.group(), True
        position = cjk.end()
    if position < len(word):
        yield word[position:], False


def latin_terms(run: str) -> list[str]:
    """One term, its ending dropped (a stopword stays whole); nothing for a single letter."""
    if len(run) < 2:
        return []
    return [run if run in STOPWORDS else _stem(run)]


def _stem(word: str) -> str:
    """A substring of the word's other forms: "opening" -> "open", "ferries" -> "ferry",
    "closes" -> "clos". Words of four letters or fewer stay whole."""
    if len(word) <= MIN_STEM_CHARS or word.endswith("ss"):
        return word
    for suffix, replacement in SUFFIXES:
        stem = word[: -len(suffix)] + replacement
        if word.endswith(suffix) and len(stem) >= MIN_STEM_CHARS:
            word = stem
            break
    if word.endswith("e") and len(word) > MIN_STEM_CHARS:
        word = word[:-1]
    return word


def cjk_terms(run: str) -> list[str]:
    """Trigrams, then bigrams; none touching the question's grammar ("何時まで", "ですか"),
    and no hiragana bigram (too short to tell a word from grammar). A hiragana word is
    found by its trigrams: "ようかんはいくらですか" -> "ようか", "うかん", "かんは"."""
    grammar = grammar_mask(run)
    if len(run) == 1:
        return [] if grammar[0] or HIRAGANA_RE.fullmatch(run) else [run]
    grams = [
        run[i : i + size]
        for size in (3, 2)
        for i in range(len(run) - size + 1)
        if not any(grammar[i : i + size])
    ]
    return [gram for gram in dict.fromkeys(grams) if len(gram) == 3 or not hiragana(gram)]


def hiragana(text: str) -> bool:
    return HIRAGANA_RE.fullmatch(text) is not None


def grammar_mask(run: str) -> list[bool]:
    """True for each character of ``run`` that belongs to a GRAMMAR form found in it."""
    mask = [False] * len(run)
    for form in GRAMMAR:
        start = run.find(form)
        while start >= 0:
            mask[start : start + len(form)] = [True] * len(form)
            start = run.find(form, start + 1)
    return mask


def _unique(terms: list[str]) -> list[str]:
    return list(dict.fromkeys(terms))[:MAX_TERMS]


def _quote(term: str) -> str:
    """A quoted FTS5 string: no character of the question can become query syntax."""
    return '"' + term.replace('"', '""') + '"'
