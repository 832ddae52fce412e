"""The sentences that back an answer: quoted with the link, so a reader can check the claim.

A small model may garble the fact it was given (or write Japanese poorly); the passage's own
sentence does not. The best sentence is the one that meets most of the question's needs (read
as the search reads them, Japanese included), a need the article's title holds counting a
quarter (it names what every sentence is about); on a tie, the one that also meets its
optional needs (its particles and framing words), then the one nearest the question in
meaning when the caller can tell (``nearness``: a Japanese question about English pages meets
them only by its Latin words, "npm" in every line of a synopsis), each read after the sentence
before it on its line ("this list" says little alone), else the first and shortest.
When the question asks for a number ("how much", "いくら"), only sentences holding one are
considered, if there are any. The sentence next to the best one in its paragraph is added
when it meets needs the first does not, or is about the same thing (its context, not a fact
from elsewhere), and the quote stays short.
A sentence that announces what follows ("The following example rounds pi to three places:")
takes the line after it, the example being the answer. A line that only names what is asked
about ("npm prune [[<@scope>/]<pkg>...]", the synopsis, for "What does npm prune do?") says
nothing of it: another is quoted, else the opening of a passage that says something.
Documentation describes a function in an entry under its signature ("shutil.rmtree(path,
...)" then "Delete an entire directory tree"), so a quote from an entry starts with the entry's
signature, or its name when the signature is long: the sentence alone does not say what it
describes. And a question that calls
a function by name (or names a setting: "fetch-timeout") is answered by that entry, not by
another that mentions it in passing: by its sentence meeting the question, else by its opening
("fetch-timeout の既定値は": none of the entry's sentences holds the question's words).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from config.text_helpers import SENTENCE_RE, shorten
from engine.answering.needs import Need, command_titles, entry_names, met, question_needs
from engine.answering.wording import JAPANESE_RE
from engine.knowledge.models import PATH_SEPARATOR, Passage
from engine.knowledge.query import LATIN_WORD_RE

TITLE_SHARE = 0.25  # a need the title holds tells the article's sentences apart less
MAX_QUOTE_CHARS = 280  # two short sentences: more is reading the article, not checking a claim
EXAMPLE_LINES = 3  # an example announced by a colon: its first lines, as many as fit
MAX_SIGNATURE_CHARS = 160  # an entry's signature before its quote; a longer one gives its name
ASKS_FOR_NUMBER_RE = re.compile(  # not "when": "the first Sunday of the month" is an answer
    r"\bhow (?:much|many|long|late|early|old)\b|\bwhat time\b|いくら|何[時日分円歳回]", re.I
)
# A sentence that names its subject by pointing back ("calling this function is the best
# practice"): the sentence before it says what "this function" is.
REFERS_BACK_RE = re.compile(
    r"\b(?:this|these|that|those|such) (?:function|method|class|module|option|argument|"
    r"parameter|attribute|decorator|command|flag|approach|way|style|technique|value)s?\b",
    re.I,
)
NUMBER_RE = re.compile(r"[0-9\uff10-\uff19\u3007一二三四五六七八九十百千万]")  # and kanji numerals
SENTENCE_ENDS = (".", "!", "?", "\u3002", "\uff01", "\uff1f")
PLACEHOLDER_RE = re.compile(r"<[^<>]*>")  # "<pkg>" in a synopsis


@dataclass(frozen=True, slots=True)
class Evidence:
    """A quote from one article: ``quote`` is at most ``MAX_QUOTE_CHARS`` long."""

    title: str
    url: str
    quote: str


@dataclass(frozen=True, slots=True)
class _Sentence:
    rank: int  # its passage's place in the search results
    index: int  # its place among the passage's sentences
    paragraph: int  # its line in the passage
    text: str
    met: frozenset[int]  # indexes of the needs it meets
    has_number: bool


class _Scorer:
    """Weights a sentence by the required needs it meets, each by its weight times its rarity
    among the sentences (a word every sentence holds, like the article's subject, tells them
    apart less than the one word only the answer holds), and by a quarter when the article's
    title holds it: the title names what the whole article is about ("みなと温泉" in "みなと温泉は
    何時まで営業していますか"), the rest of the question what the sentence must say ("営業")."""

    def __init__(self, needs: Sequence[Need], sentences: Sequence[_Sentence], title: str) -> None:
        self.needs = needs
        total = len(sentences)
        counts = [sum(1 for s in sentences if i in s.met) for i in range(len(needs))]
        self.in_title = frozenset(i for i, need in enumerate(needs) if met(need, title.lower()))
        self.value = [
            need.weight * math.log(1 + total / count) * (TITLE_SHARE if i in self.in_title else 1)
            if count
            else 0.0
            for i, (need, count) in enumerate(zip(needs, counts, strict=True))
        ]

    def required(self, met: frozenset[int]) -> float:
        return sum(self.value[i] for i in met if not self.needs[i].optional)

    def optional(self, met: frozenset[int]) -> float:
        return sum(self.value[i] for i in met if self.needs[i].optional)

    def specific(self, met: frozenset[int]) -> frozenset[int]:
        """The required needs met that the title does not hold: what the sentence is about."""
        return frozenset(i for i in met - self.in_title if not self.needs[i].optional)


Nearness = Callable[[str, Sequence[str]], Sequence[float]]  # each text's cosine to the question


def find_evidence(
    question: str,
    passages: Sequence[Passage],
    max_chars: int = MAX_QUOTE_CHARS,
    nearness: Nearness | None = None,
) -> Evidence | None:
    """The one or two sentences of one passage that best match ``question``; the opening of
    the entry it names when none of the entry's sentences meets it; None when no sentence
    meets any of its required needs."""
    needs = question_needs(question)
    sentences = [s for rank, p in enumerate(passages) for s in _sentences(rank, p, needs)]
    score = _Scorer(needs, sentences, " ".join(dict.fromkeys(p.title for p in passages)))
    candidates = [s for s in sentences if score.required(s.met) > 0]
    named = entries_named(question, passages)
    if named and not any(s.rank in named for s in candidates):
        # "fetch-timeout の既定値は?": the entry asked about, though none of its sentences
        # meets the question's other words (its name is its heading), over a neighbour's.
        return opening(passages[min(named)], max_chars, with_name=True)
    if not candidates:
        return None
    if not (candidates := [s for s in candidates if not _restates(s, passages, question)]):
        # "What does npm dedupe do?": its synopsis "npm dedupe" meets every word of it
        openings = (opening(passage, max_chars) for passage in passages)
        return next((found for found in openings if not _says_nothing(found.quote, question)), None)
    numbered = [s for s in candidates if s.has_number]
    if numbered and ASKS_FOR_NUMBER_RE.search(question):
        candidates = numbered  # "how much", "いくら": the answer is a number
    if entry := [s for s in candidates if s.rank in named]:
        candidates = entry  # "What does tempfile.mkdtemp() return?": its entry says

    def met_score(s: _Sentence) -> tuple[float, float]:
        return score.required(s.met), score.optional(s.met)

    best = max(met_score(s) for s in candidates)
    tied = [s for s in candidates if met_score(s) == best]
    if len(tied) > 1 and nearness is not None:
        closeness = nearness(question, [_in_context(s, sentences) for s in tied])
        first = max(zip(tied, closeness, strict=True), key=lambda pair: pair[1])[0]
    else:
        first = max(tied, key=lambda s: (-s.rank, -len(s.text)))
    first = _described(first, passages[first.rank], sentences)
    chosen = [first, *_neighbour(first, candidates, score, max_chars)]
    chosen += _referred_to(first, chosen, sentences, max_chars - len(_join(chosen)) - 1)
    chosen.sort(key=lambda s: s.index)
    chosen += _announced(chosen[-1], sentences, max_chars - len(_join(chosen)))
    passage = passages[first.rank]
    quote = shorten(_join(chosen), max_chars)
    return Evidence(passage.title, passage.url, _with_entry_name(passage, quote))


def opening(
    passage: Passage, max_chars: int = MAX_QUOTE_CHARS, *, with_name: bool = False
) -> Evidence:
    """The passage's first paragraph, shortened: the quote of an article that covers the
    question by its title, with no sentence of its own meeting a need; ``with_name``: after
    the name of the entry it opens ("fetch-timeout — Default: 300000 (5 minutes)")."""
    first = next((line.strip() for line in passage.text.splitlines() if line.strip()), "")
    quote = shorten(first, max_chars)
    if with_name:
        quote = _with_entry_name(passage, quote)
    return Evidence(passage.title, passage.url, quote)


def _sentences(rank: int, passage: Passage, needs: Sequence[Need]) -> list[_Sentence]:
    """The passage's sentences, without its title (repeated as a heading)."""
    found: list[_Sentence] = []
    for index, match in enumerate(SENTENCE_RE.finditer(passage.text)):
        text = match.group().strip()
        if not text or text == passage.title.strip():
            continue
        lowered = text.lower()
        hits = frozenset(i for i, need in enumerate(needs) if met(need, lowered))
        paragraph = passage.text.count("\n", 0, match.start())
        has_number = NUMBER_RE.search(text) is not None
        found.append(_Sentence(rank, index, paragraph, text, hits, has_number))
    return found


def _in_context(sentence: _Sentence, sentences: Sequence[_Sentence]) -> str:
    """The sentence after the one before it on its line, as the encoder reads it: a sentence
    alone may say little ("A common convention is to put this list in a requirements.txt
    file:" after "python -m pip freeze will produce a similar list of the installed
    packages…")."""
    before = (
        s.text
        for s in sentences
        if (s.rank, s.paragraph, s.index) == (sentence.rank, sentence.paragraph, sentence.index - 1)
    )
    return " ".join([*before, sentence.text])


def _neighbour(
    first: _Sentence, candidates: Sequence[_Sentence], score: _Scorer, max_chars: int
) -> list[_Sentence]:
    """The sentence before or after the first, in its paragraph, if both fit: one meeting
    required needs the first does not, or else one about the same thing (every need the first
    meets beyond the title's: "The museum is closed on Mondays." before "When a Monday is a
    public holiday, the museum opens that day")."""
    room = max_chars - len(first.text) - 1
    about = score.specific(first.met)

    def gain(sentence: _Sentence) -> tuple[float, bool]:
        return score.required(sentence.met - first.met), bool(about) and about <= sentence.met

    neighbours = [
        s
        for s in candidates
        if (s.rank, s.paragraph) == (first.rank, first.paragraph)
        and abs(s.index - first.index) == 1
        and len(s.text) <= room
    ]
    best = max(neighbours, key=gain, default=None)
    return [best] if best is not None and any(gain(best)) else []


def _referred_to(
    first: _Sentence, chosen: Sequence[_Sentence], sentences: Sequence[_Sentence], room: int
) -> list[_Sentence]:
    """The sentence before ``first`` in its paragraph, when ``first`` points back to what it
    names ("this function") and the quote has room for it."""
    if not REFERS_BACK_RE.search(first.text):
        return []
    before = [
        s
        for s in sentences
        if (s.rank, s.paragraph, s.index) == (first.rank, first.paragraph, first.index - 1)
        and s not in chosen
        and len(s.text) <= room
    ]
    return before[:1]


def entries_named(question: str, passages: Sequence[Passage]) -> set[int]:
    """The ranks of the passages that are the entries of the functions ``question`` calls by
    name, or of the settings it names with their hyphens ("fetch-timeout", not its neighbour
    "fetch-retry-maxtimeout", whose sentences meet the question's words as well): the entry's
    anchor is the name, or ends with it after a module's or class's dot. A command's page is
    its entry too ("npm publish": the page titled "npm-publish")."""
    names = entry_names(question)
    titles = command_titles(question)

    def names_it(passage: Passage) -> bool:
        anchor = (passage.anchor or "").lower()
        if anchor and any(anchor == name or anchor.endswith(f".{name}") for name in names):
            return True
        return passage.title.strip().lower() in titles

    return {rank for rank, passage in enumerate(passages) if names_it(passage)}


def _restates(sentence: _Sentence, passages: Sequence[Passage], question: str) -> bool:
    """Whether ``sentence`` names what is asked about and says nothing of it ("npm dedupe",
    "npm prune [[<@scope>/]<pkg>...]" for "What does npm dedupe do?"). Not an entry's name
    alone ("EAFP"): what follows it is quoted instead (``_described``)."""
    heading = passages[sentence.rank].heading.rsplit(PATH_SEPARATOR, 1)[-1].strip()
    return sentence.text != heading and _says_nothing(sentence.text, question)


def _says_nothing(text: str, question: str) -> bool:
    """Whether ``text`` is a line like a synopsis (not a sentence: no closing stop, no
    Japanese) that holds no word and no number the question does not hold; placeholders in
    angle brackets are no words. "The museum is closed on Mondays." says something to "Is the
    museum closed on Mondays?": it is the answer."""
    if NUMBER_RE.search(text) or JAPANESE_RE.search(text) or text.rstrip().endswith(SENTENCE_ENDS):
        return False
    words = LATIN_WORD_RE.findall(PLACEHOLDER_RE.sub(" ", text.lower()))
    asked = set(LATIN_WORD_RE.findall(question.lower()))
    return bool(words) and all(word in asked for word in words)


def _described(first: _Sentence, passage: Passage, sentences: Sequence[_Sentence]) -> _Sentence:
    """The sentence after ``first`` when ``first`` is only its entry's name ("EAFP", the line
    a glossary term or an API entry begins with): the name says nothing, what follows it is
    the answer (``_with_entry_name`` puts the name back before it)."""
    if first.text != passage.heading.rsplit(PATH_SEPARATOR, 1)[-1].strip():
        return first
    following = (s for s in sentences if s.rank == first.rank and s.index == first.index + 1)
    return next(following, first)


def _announced(last: _Sentence, sentences: Sequence[_Sentence], room: int) -> list[_Sentence]:
    """The lines after a sentence ending in a colon (the example or list it announces), up
    to ``EXAMPLE_LINES`` of them, as many as fit in ``room``."""
    if not last.text.endswith((":", "\uff1a")):  # and the full-width colon
        return []
    following = sorted(
        (s for s in sentences if s.rank == last.rank and s.index > last.index),
        key=lambda s: s.index,
    )
    taken: list[_Sentence] = []
    for sentence in following[:EXAMPLE_LINES]:
        room -= len(sentence.text) + 1
        if room < 0:
            break
        taken.append(sentence)
    return taken


def _with_entry_name(passage: Passage, quote: str) -> str:
    """``quote`` after the signature (or the name) of the API entry or glossary term that
    ``passage`` belongs to; as it is for a passage of an ordinary section."""
    name = passage.heading.rsplit(PATH_SEPARATOR, 1)[-1].strip()
    bare = name.removesuffix("()")
    looks_like_code = (
        any(mark in name for mark in "._(")
        or ("-" in name and name.islower())
        or (passage.anchor or "").startswith("term-")
    )
    # An option's anchor holds its name without the dashes ("--num-callers", "opt.num-callers")
    named_by_anchor = bare.lstrip("-").lower() in (passage.anchor or "").lower()
    if not (bare and looks_like_code and named_by_anchor):
        return quote
    signature = passage.text.split("\n", 1)[0].strip()
    if signature.startswith(bare) and len(signature) <= MAX_SIGNATURE_CHARS:
        name = signature
    if quote.startswith(name) or quote.startswith(bare):
        return quote
    return f"{name} — {quote}"


def _join(sentences: Sequence[_Sentence]) -> str:
    """Sentences as one quote: Japanese ones need no space between them."""
    quote = ""
    for sentence in sentences:
        spaced = quote and quote[-1].isascii() and sentence.text[0].isascii()
        quote += (" " if spaced else "") + sentence.text
    return quote
