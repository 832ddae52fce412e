"""Is the question on the site? The one rule, decided on the search's passages before the
model runs. The wire calls a question it refuses ``not_on_site``.

The search always returns something, and a small model answers from whatever it is given:
"When does the ferry to Osaka leave?" retrieves the ferry timetable and gets its times. So
the site must show that it answers the question, in one of two ways:

- **its words**: one article holds most of what the question asks about, the weighted share
  of its needs (``needs.question_needs``: its content words, the characters of its Japanese
  terms) at least ``WORDS_SHARE``; a share, not a bm25 score, which would depend on the size
  of the knowledge base;
- **its meaning, across languages**: a question in another language than the pages (a
  Japanese question about English documentation) shares no words with its answer, so there
  the nearest passage's vector must be close to the question's, a cosine of at least
  ``MEANING_COSINE``. Within one language a cosine does not tell a question the site
  answers from one merely about the same thing ("Does the onsen have a sauna?" is as close
  to the onsen's page as its opening hours are), so words decide there. A Japanese
  question's words also meet English pages through a dictionary's English
  (``engine/knowledge/glossary.py``: "メモリリーク", "memory leak"), as an English question's
  would; a question asking for a figure ("いくら", "何バイト") is never on the site by its
  meaning alone ("npm の有料プランは月いくら" is near npm's pages).

A question that names an entry of the site by its anchor (a function, a setting:
``fetch-timeout``), or a command whose page is titled by it ("npm publish": ``npm-publish``),
is about that entry, whatever its other words: the entry's article answers
when it meets the question as well as the best one ("round(2.5) が 3 ではなく 2 になるのはなぜ":
round()'s entry, not the tutorial's page on floating point, which meets "round" as well), and
the entry comes first among the passages used: across languages the meaning of
"fetch-timeout の既定値はいくつ" is far from the entry's "Default: 300000 (5 minutes)".

And a question that names something the site never mentions (a function, a flag, a file type:
``itertools.batched()``, ``--tls-cert``, ``.xlsx``) is not on it, however close the rest of
its words: documentation answers about what it documents. Likewise a question naming a term
the site does use elsewhere ("Which function parses a YAML file into a dict?": a word rare in
English, ``needs.named_terms``) is answered only by an article that holds it: the JSON page
meets every other word of that question. A rare word the site never uses is left to the rule
before (it may be a typo: "enviroment"). The thresholds were chosen on the project's eval
(docs/quality.md, "Is it on the site?").

A follow-up ("and how much is the ticket?") rarely names its subject: when the question
alone is not on the site, the question with the asker's earlier ones (as the search read
it) may be.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, replace

from engine.answering.english import is_common_word
from engine.answering.evidence import asks_for_number, entries_named, entry_name, is_entry_of
from engine.answering.needs import CODE_WORD_RE, Need, entry_names, met, question_needs
from engine.answering.wording import language_of
from engine.knowledge.models import Passage

WORDS_SHARE = 0.7
# 0.40 before the dictionary (engine/knowledge/glossary.py) met Japanese words on English pages;
# with it, of the four real sites' Japanese questions only four were still on by meaning alone,
# and the two below 0.45 were a trap (an Excel sheet, 0.413) and a wrong page (0.403).
MEANING_COSINE = 0.45
MEANING_TIE = 0.02  # cosines this close are as near: the search's order decides
PASSAGES_USED = 3  # of the answering article, best first: what the model reads


@dataclass(frozen=True, slots=True)
class BestArticle:
    """The article that answers the question best, and how: the share of the question's
    needs its passages meet, and its best passage's cosine with the question."""

    url: str | None
    share: float
    cosine: float = 0.0
    across_languages: bool = False  # the question is not in the language of the passage
    latin_share: float = 1.0  # ... and the share of its words in Latin letters the article has
    asks_number: bool = False  # "いくら": an answer is a figure, which meaning cannot vouch for

    @property
    def on_site(self) -> bool:
        # across languages, the Latin names must be on the page whatever the English met
        names_met = not self.across_languages or self.latin_share >= WORDS_SHARE
        by_words = self.share >= WORDS_SHARE and names_met
        by_meaning = (
            self.across_languages
            and self.cosine >= MEANING_COSINE
            and self.latin_share >= WORDS_SHARE
            and not self.asks_number  # "npm の有料プランは月いくら": the npm page is near
        )
        return self.url is not None and (by_words or by_meaning)


def on_site_passages(
    question: str,
    found: Sequence[Passage],
    *,
    unknown_names: Sequence[str] = (),
    site_terms: Set[str] = frozenset(),
    follow_up_of: str = "",
    looked_up: Sequence[Passage] = (),
) -> list[Passage]:
    """The best passages of the article that answers ``question``, in rank order; [] when it
    is not on the site (say so, and cite nothing). ``unknown_names`` are the names the
    question gives that the site never mentions; ``site_terms`` the terms it names that the
    site does use (an answering article must hold those); ``looked_up`` the entries of the
    names it gives that the search did not find (``pipeline``): they answer it by their name
    alone only across languages, where no other word can meet the page; in the page's
    language its words decide ("How do I set the maximum number of redirects that http.get()
    follows?": http.get()'s entry never speaks of redirects)."""
    if unknown_names:
        return []
    best = best_article(question, found, site_terms)
    if not best.on_site and follow_up_of:
        best = best_article(follow_up_of, found, site_terms)
    entries = [found[rank] for rank in sorted(entries_named(question, found))]
    if best.on_site and (rival := _entry_article(question, best, entries, found, site_terms)):
        best = rival  # "round(2.5) が…": round()'s entry, not the tutorial's page as near
    named = [e for e in entries if _heading_is_a_name(e)]
    if same_language := [e for e in named if _named_by_title(e, question)]:
        # a command's page, by its title alone, in the page's own language: its words decide
        named = [e for e in named if e not in same_language]  # ("heap size for cargo test")
    looked = [e for e in looked_up if _heading_is_a_name(e)]
    if not best.on_site and not named and looked:
        named = looked if language_of(question) != language_of(looked[0].text) else []
    if not best.on_site and named:
        entries = named  # "fetch-timeout の既定値は" names npm's entry
        best = BestArticle(named[0].url, share=1.0)
    if not best.on_site:
        return []
    entries = [entry for entry in [*entries, *looked] if entry.url == best.url]  # none in both
    # the option's own entry before the other sections of its command's page ("git gc --auto")
    names = entry_names(question)
    # ... and its opening (its name, then what it is) before its later sections ("zmv": its
    # "Further examples" after its options)
    entries.sort(key=lambda entry: (not is_entry_of(entry, names), not _opens_entry(entry)))
    rest = [p for p in found if p.url == best.url and all(p is not e for e in entries)]
    return [*entries, *rest][:PASSAGES_USED]


def _opens_entry(entry: Passage) -> bool:
    """Whether ``entry``'s text begins with the name its heading gives: the entry's first
    section, not the rest of it after a list of its own options."""
    name = entry_name(entry).split(", ", 1)[0].removesuffix("()").lower()
    return bool(name) and entry.text.lower().startswith(name)


def best_article(
    question: str, passages: Sequence[Passage], site_terms: Set[str] = frozenset()
) -> BestArticle:
    """The article whose passages meet the largest share of the question's needs, when one
    meets enough; else the article of the passage the meaning decides on (``_nearest``).
    An article without one of ``site_terms`` the question names meets none."""
    needs = question_needs(question)
    articles = _articles(passages)
    asked_in = language_of(question)
    # The names a Japanese question writes in Latin letters ("requests", "timeout") are the
    # page's words: neither the meaning nor a dictionary's English may answer "PyPI の requests
    # で timeout を…" from a page that only names requests. (An English question's words are
    # all Latin: not these.)
    latin = [need for need in needs if need.forms[0].isascii()] if asked_in == "ja" else []
    asks_number = asks_for_number(question)

    def judged(url: str, share: float, cosine: float, passage: Passage) -> BestArticle:
        latin_share = share_met(latin, articles[url], site_terms) if latin else 1.0
        across = asked_in != language_of(passage.text)
        return BestArticle(url, share, cosine, across, latin_share, asks_number)

    by_words = BestArticle(url=None, share=0.0)
    for url, text in articles.items() if needs else ():
        share = share_met(needs, text, site_terms)
        if share > by_words.share:
            first = next(p for p in passages if p.url == url)
            by_words = judged(url, share, _cosine(url, passages), first)
    if by_words.on_site or not passages:
        return by_words
    nearest = _nearest(passages)
    share = share_met(needs, articles[nearest.url], site_terms) if needs else 0.0
    cosine = max(passage.similarity for passage in passages)  # the tie's winner may be a hair less
    return judged(nearest.url, share, cosine, nearest)


def _nearest(passages: Sequence[Passage]) -> Passage:
    """The passage nearest in meaning; of passages as near (within ``MEANING_TIE``), the
    search's first, since the search also weighed the words (a Japanese question's Latin ones:
    "requirements.txt" picks the tutorial's pip section over the venv module's page, a
    thousandth nearer)."""
    nearest = max(passage.similarity for passage in passages)
    return next(p for p in passages if p.similarity >= nearest - MEANING_TIE)


def share_met(needs: Sequence[Need], text: str, site_terms: Set[str] = frozenset()) -> float:
    """The weighted share of the required ``needs`` met by ``text`` (optional ones, the
    particles and the framing words, do not count: met or not, they say nothing of the topic);
    0 when ``text`` lacks a named need the site uses (``site_terms``)."""
    lowered = text.lower()
    required = [need for need in needs if not need.optional]
    if any(_lacks_site_term(need, lowered, site_terms) for need in required):
        return 0.0
    total = sum(need.weight for need in required)
    met_weight = sum(need.weight for need in required if met(need, lowered))
    return met_weight / total if total else 0.0


def _lacks_site_term(need: Need, lowered: str, site_terms: Set[str]) -> bool:
    return need.named and not met(need, lowered) and any(f in site_terms for f in need.forms)


def _entry_article(
    question: str,
    best: BestArticle,
    entries: Sequence[Passage],
    found: Sequence[Passage],
    site_terms: Set[str],
) -> BestArticle | None:
    """The article of an entry the question names, when it meets the question as well as
    ``best`` does (a tie the search's order would otherwise break), or, across languages,
    its names as well: the other words are met only through a dictionary's English
    ("--num-callers の既定値は": 既定値 is "default value", which release notes say, "now
    has a default value of 12", where the option's entry says "[default: 12]"). None when
    ``best`` holds one already."""
    if any(entry.url == best.url for entry in entries):
        return None
    for entry in filter(_heading_is_a_name, entries):
        own = [passage for passage in found if passage.url == entry.url]
        rival = best_article(question, own, site_terms)
        if rival.share >= best.share:
            return rival
        if best.across_languages and rival.latin_share >= best.latin_share:
            return replace(rival, share=1.0)
    return None


def _heading_is_a_name(entry: Passage) -> bool:
    """Whether the entry's heading is a name as code writes it ("fetch-timeout",
    "json.dumps()"), not words ("Check-in"): only a name alone puts a question on the site.
    A command's page (its Synopsis, under the title "npm-publish") is named by its title."""
    heading = entry_name(entry)  # "class collections.deque()"
    title = entry.title.strip()  # "npm-publish", not "json — JSON encoder and decoder"
    return _is_a_name(heading) or (" " not in title and _is_a_name(title))


def _named_by_title(entry: Passage, question: str) -> bool:
    """Whether ``entry``, which ``question`` names, is named by its page's title only (a
    command's page: "cargo test", not the section's own "--tests"), in the page's language."""
    by_heading = is_entry_of(entry, entry_names(question))
    return not by_heading and language_of(question) == language_of(entry.text)


def _is_a_name(text: str) -> bool:
    """ "fetch-timeout", "json.dumps()"; "SHARE_HISTORY", "REPORTTIME" (zsh's, in code); "zmv",
    a word of no language."""
    if text == text.lower() and any(mark in text for mark in "-._("):
        return True
    return (
        CODE_WORD_RE.fullmatch(text) is not None
        or (text.isupper() and text.isalnum())
        or (text.isalpha() and text.islower() and not is_common_word(text))
    )


def _cosine(url: str, passages: Sequence[Passage]) -> float:
    return max(passage.similarity for passage in passages if passage.url == url)


def _articles(passages: Sequence[Passage]) -> dict[str, str]:
    """Each article's title, headings and retrieved passages as one text, in rank order."""
    texts: dict[str, list[str]] = {}
    for passage in passages:
        texts.setdefault(passage.url, [passage.title]).extend((passage.heading, passage.text))
    return {url: "\n".join(parts) for url, parts in texts.items()}
