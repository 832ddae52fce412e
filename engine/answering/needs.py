"""What a question asks about, read as the search reads it: its *needs*.

Both decisions after the search use them: whether the site answers the question
(``on_site.py``: the share of needs one article meets) and which sentence to quote
(``evidence.py``). The terms come from ``engine.knowledge.query``, so a need is met by the
same forms the search looked for.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.answering.english import is_common_word
from engine.knowledge.models import Passage
from engine.knowledge.query import (
    KANJI_RE,
    STOPWORDS,
    WORD_RE,
    cjk_terms,
    english_forms,
    grammar_mask,
    hiragana,
    latin_terms,
    script_runs,
)

PARTICLES = frozenset("のはがをにでともへやかね")  # they join words: met or not, they say little
# How a question asks, not what about: an article answers "Are dogs allowed on the ferry?"
# without "allowed", and "How much does X cost?" with a price, not the word: optional needs.
# Attributes that name the fact asked ("hours", "phone") are not among them, nor is "stand"
# in "What does EAFP stand for?" (the glossary says "Easier to ask for forgiveness...").
FRAMING_WORDS = frozenset(
    "allow allowed allows arrive arrives able available bring brings brought buy buys bought "
    "charge charges come comes cost costs fee fees find go goes going got happen happens "
    "happened leave leaves leaving mean meaning means ok okay paid pay possible price prices "
    "stand stands use used uses using".split()
)
# A character asked about by its name, which pages write as itself ("a pattern that starts
# with an exclamation mark": gitignore's 'An optional prefix "!" which negates the pattern'),
# by the stem the search reads the name as ("tild" of "tilde").
CHARACTER_NAMES = {
    "exclamation": "!", "asterisk": "*", "tild": "~", "caret": "^", "backslash": "\\",
    "backtick": "`", "ampersand": "&", "semicolon": ";", "underscor": "_",
}  # fmt: skip
# Words a page meets in other words of its own: "What is the difference between Cargo.toml
# and Cargo.lock?" is the page titled "Cargo.toml vs Cargo.lock", which never says
# "difference" (the Cargo Book, tried in `concierge chat`).
ALSO_MET_BY = {
    "differenc": ("vs", "versus", "compar"),
    **{name: (character,) for name, character in CHARACTER_NAMES.items()},
}
WHOLE_WORD_CHARS = 3  # a Latin form this short is met only as a word of its own
KANJI_WEIGHT = 2.0  # a kanji says about as much as two kana or two Latin letters


@dataclass(frozen=True, slots=True)
class Need:
    """One thing a question asks about, met when a text holds any of ``forms`` (lowercase).

    An English word is one need weighing its length; a Japanese character is one need (a
    kanji weighs double), met by any of the question's terms that contain it. An
    ``optional`` need (a particle, a verb, a framing word) is how the question asks, not
    what it asks about: the relevance decision leaves it out, the evidence uses it to
    choose between sentences that meet the same required needs. A ``named`` need is an
    English word outside the common vocabulary (``english.py``): a name or a term, which an
    answer holds as it is."""

    forms: tuple[str, ...]
    weight: float
    optional: bool = False
    named: bool = False  # a word rare in English: a name or a term ("yaml", "mkdtemp")


# Two capitals ("an AI model", "UI"): a name, weighed as a word is, not as two letters (the
# weight of a need is its length): a page that lacks it must lack something of weight. Not
# after a number ("4 PM": the ferry's timetable says "16:50").
SHORT_CAPITALS_RE = re.compile(r"(?<![\w/-])(?<!\d )([A-Z]{2})(?![\w/-])")
SHORT_CAPITALS_WEIGHT = 6


def question_needs(question: str) -> list[Need]:
    """What a passage must hold to answer ``question``, as the search reads it; [] for a
    question of stopwords and grammar only."""
    needs: list[Need] = []
    capitals = {m.group(1).lower() for m in SHORT_CAPITALS_RE.finditer(question)}
    for word in WORD_RE.findall(question.lower()):
        for run, is_cjk in script_runs(word):
            if is_cjk:
                needs += _cjk_needs(run)
            elif run not in STOPWORDS:
                optional = run in FRAMING_WORDS
                named = not optional and not is_common_word(run)
                weight = SHORT_CAPITALS_WEIGHT if run in capitals else len(run)
                needs += [
                    Need((term, *ALSO_MET_BY.get(term, ())), weight, optional, named)
                    for term in latin_terms(run)
                ]
    # A version named is a name: on a page that answers, as it is ("3.12", not "12").
    needs += [Need((version,), len(version), named=True) for version in version_names(question)]
    return needs


def named_terms(needs: Sequence[Need]) -> list[str]:
    """The forms of the ``named`` needs: the terms a site either uses or does not."""
    return list(dict.fromkeys(form for need in needs if need.named for form in need.forms))


def holds_every_need(question: str) -> Callable[[Passage], bool]:
    """Whether a passage holds every word ``question`` needs, in its title, heading or text:
    the search keeps such a passage that its words rank high, however far its meaning ranks
    it (``KnowledgeBase.search``)."""
    required = [need for need in question_needs(question) if not need.optional]

    def holds(passage: Passage) -> bool:
        text = f"{passage.title}\n{passage.heading}\n{passage.text}".lower()
        return bool(required) and all(met(need, text) for need in required)

    return holds


def met(need: Need, text: str) -> bool:
    """Whether ``text`` (lowercased by the caller) holds one of the need's forms. A Latin
    form begins a word there ("lock" is in "lockfile", not in "block"), and one of three
    letters or fewer is the whole word, with its endings: "log" is in "logging", "pro" is not
    in "project", nor "bun" in "bundle". A Japanese form is found anywhere: the script has no
    spaces."""
    return any(_form_in(form, text) for form in need.forms)


@functools.lru_cache(maxsize=4096)
def _latin_form_re(form: str) -> re.Pattern[str]:
    # A short word's own endings, its last consonant doubled or not: "log" in "logging",
    # "run" in "running", "set" in "settings"; not "pro" in "project".
    whole = r"(?:[a-z]?(?:ing|ed|er)|e?s)?s?(?![a-z0-9])" if len(form) <= WHOLE_WORD_CHARS else ""
    return re.compile(rf"(?<![a-z0-9]){re.escape(form)}{whole}")


def _form_in(form: str, text: str) -> bool:
    if form not in text:
        return False
    return not form.isascii() or _latin_form_re(form).search(text) is not None


def _cjk_needs(run: str) -> list[Need]:
    """One need per character that is not grammar, met by the run's terms that hold it or by
    the English of the dictionary word it is part of ("ヒープ": "heap", ``glossary.py``), so a
    Japanese question can meet an English page; particles and verbs ("買え" in "買えますか")
    are optional."""
    terms = cjk_terms(run)
    grammar = grammar_mask(run)
    verb = _verb_mask(run, grammar)
    english: dict[int, tuple[str, ...]] = {}
    for start, end, forms in english_forms(run):
        plain = tuple(form for form in forms if form not in FRAMING_WORDS)  # "use", "cost"
        english |= dict.fromkeys(range(start, end), plain)
    covering = _covering(run, terms)
    needs: list[Need] = []
    for index, char in enumerate(run):
        if grammar[index]:
            continue
        forms = covering[index]
        if forms:  # else no search term holds it: the search cannot look for it either
            forms += english.get(index, ())  # after its own: ``forms[0]`` tells the script
            weight = KANJI_WEIGHT if KANJI_RE.fullmatch(char) else 1.0
            optional = char in PARTICLES or verb[index]
            needs.append(Need(forms, weight, optional))
    return needs


def _verb_mask(run: str, grammar: list[bool]) -> list[bool]:
    """True for the verb before a grammar ending: the hiragana right before it ("つかえ" in
    "つかえますか") and one kanji stem before those ("買" in "買えますか"). Hiragana ending
    in a particle is a noun's ("ようかんは" in "ようかんはありますか"), not a verb."""
    mask = [False] * len(run)
    for end in range(1, len(run)):
        if not grammar[end] or grammar[end - 1] or run[end - 1] in PARTICLES:
            continue
        start = end
        while start > 0 and not grammar[start - 1] and hiragana(run[start - 1]):
            start -= 1
        if start == end:
            continue  # a noun right before the ending: "予約できますか"
        stem = start - 1
        if (
            stem >= 0
            and KANJI_RE.fullmatch(run[stem])
            and not (stem > 0 and KANJI_RE.fullmatch(run[stem - 1]))
        ):
            start = stem
        mask[start:end] = [True] * (end - start)
    return mask


def _covering(run: str, terms: Sequence[str]) -> list[tuple[str, ...]]:
    """For each position of ``run``, the ``terms`` an occurrence of which spans it, in
    ``terms``' order: one pass per term, not one per term and position (a 4,000-character
    question has about 8,000 terms)."""
    rank = {term: position for position, term in enumerate(terms)}
    spans: list[set[str]] = [set() for _ in run]
    for term in terms:
        start = run.find(term)
        while start >= 0:
            for index in range(start, start + len(term)):
                spans[index].add(term)
            start = run.find(term, start + 1)
    return [tuple(sorted(span, key=rank.__getitem__)) for span in spans]


# Functions a question calls by name ("itertools.batched()", "Path.walk()", "backup()"), file
# types (".xlsx") and long options ("--leak-check-depth") it names: documentation that never
# mentions one does not answer about it (a tool's manual documents every option it has).
# Names without parentheses are left alone: "out.txt" in a question is usually the asker's own.
CODE_NAME_RE = re.compile(
    r"(?<![\w.-])(?:"
    # a call, maybe dotted, maybe with its arguments ("round(2.5)"; not a plural's "file(s)")
    r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\((?!e?s\))(?:[^()\s]+(?:, ?[^()\s]+)*)?\)"
    r"|(\.[A-Za-z][A-Za-z0-9]{1,5})(?=[\s,;:?!)]|$)"  # a file type on its own
    r"|(--[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*)(?![\w-])"  # a long option
    r")"
)
# A dotted name without the call's parentheses ("requests.get", "http.server"): each part two
# letters or more ("e.g." is none), and not a file's name ("requirements.txt", "data.csv":
# the asker's own files, which the site need not name).
DOTTED_NAME_RE = re.compile(
    r"(?<![\w./:@-])([A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+)(?![A-Za-z0-9_(.]|\.\w)"
)
FILE_EXTENSIONS = frozenset(
    "txt csv json yaml yml toml ini cfg conf xml html htm md rst py pyc pyw log db sqlite "
    "sqlite3 xlsx xls pdf png jpg jpeg gif zip gz tar whl exe sh bat env lock".split()
)


# A version a question asks about ("Python 3.12", "UUID version 7"): documentation that never
# mentions it was written before it, or is about another thing. A bare number is left alone:
# "round(2.5)" asks about the number, not a release.
VERSION_RE = re.compile(
    r"\b(?:python\s+(\d+\.\d+(?:\.\d+)?)|(version\s+\d+(?:\.\d+)*))(?![\w.])", re.IGNORECASE
)


def code_names(question: str) -> list[str]:
    """The functions, file types, long options and versions ``question`` names, lowercase,
    without parentheses."""
    names = [m.group(1) or m.group(2) or m.group(3) for m in CODE_NAME_RE.finditer(question)]
    names += [
        m.group(1)
        for m in DOTTED_NAME_RE.finditer(question)
        if m.group(1).rsplit(".", 1)[-1].lower() not in FILE_EXTENSIONS
    ]
    names += version_names(question)
    return list(dict.fromkeys(name.lower() for name in names))


# A setting or an option a question names with its hyphens ("fetch-timeout", "--save-exact"):
# a reference documents it in an entry of that name. Not a name the site must have: "one-line"
# or "time-ordered" are English too.
HYPHENATED_RE = re.compile(  # Japanese may touch it: "fetch-timeoutの既定値"
    r"(?<![A-Za-z0-9_-])-{0,2}([A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+)(?![A-Za-z0-9_-])"
)


# A name in code a reference gives an entry: joined by underscores ("SHARE_HISTORY",
# "max_connections") or a shell's variable ("$HISTSIZE"); or a name the question calls by its
# kind ("the zmv function", "the REPORTTIME parameter", "the strict setting"), or, with a
# word between ("the N glob qualifier"), unless it is in small letters ("the npm install
# command": npm-install's page, not npm's).
CODE_WORD_RE = re.compile(
    r"(?<![A-Za-z0-9_.$-])\$?([A-Za-z0-9]*[A-Za-z0-9]_[A-Za-z0-9_]*)(?![A-Za-z0-9_-])"
    r"|(?<![A-Za-z0-9_.$-])\$([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_-])"
)
KIND_NAMED_RE = re.compile(
    r"\bthe ([^\s\"'“”`]+) (?:([a-z]+) )?(?:option|function|parameter|variable|flag|setting|"
    r"command|builtin|widget|module|qualifier|escape|key|hook|style)s?\b"
)


def entry_names(question: str) -> list[str]:
    """The names an entry of a reference may have that ``question`` gives: the functions it
    calls, the dotted names, the settings it joins with hyphens or underscores, the names in
    capitals and those it calls by their kind."""
    words = [m.group(1) or m.group(2) for m in CODE_WORD_RE.finditer(question)]
    for match in KIND_NAMED_RE.finditer(question):
        name, between = match.group(1).strip("?,.:;()$"), match.group(2)
        code = name.isupper() or "_" in name  # "N", "AUTO_CD"
        if name and (code or not between):  # "the strict setting": MkDocs' "strict"
            words.append(name)
    names = code_names(question) + hyphenated_names(question) + [w.lower() for w in words]
    return list(dict.fromkeys(names))


# Two words as a tool's command is written ("npm publish", "git commit"): a reference that gives
# each command a page titles it with a hyphen ("npm-publish").
COMMAND_WORDS_RE = re.compile(
    r"(?<![A-Za-z0-9_.-])([a-z][a-z0-9]+) (?=([a-z][a-z0-9-]*[a-z0-9])(?![A-Za-z0-9_.-]))"
)


def command_titles(question: str) -> list[str]:
    """The page titles of the commands ``question`` may name: "npm-publish" for "npm
    publish"; none of stopwords ("with npm" is no command)."""
    pairs = ((m.group(1), m.group(2)) for m in COMMAND_WORDS_RE.finditer(question))
    return list(dict.fromkeys(f"{a}-{b}" for a, b in pairs if not {a, b} & STOPWORDS))


def hyphenated_names(question: str) -> list[str]:
    """The words ``question`` joins with hyphens, lowercase, without leading dashes."""
    return list(dict.fromkeys(m.group(1).lower() for m in HYPHENATED_RE.finditer(question)))


# A product's release, named after the question's first word ("on Windows 11", "Ubuntu 22.04"):
# a capitalised name and a number of two digits or a dotted one ("Pier 3" is a place).
RELEASE_RE = re.compile(r"(?<=\S )([A-Z][A-Za-z]+ (?:\d{2,}|\d+\.\d+)(?:\.\d+)*)(?![\w.])")


def version_names(question: str) -> list[str]:
    """The versions ``question`` names: "3.12" of "Python 3.12", "version 7" as it is, and a
    product's release ("windows 11")."""
    names = [(m.group(1) or m.group(2)).lower() for m in VERSION_RE.finditer(question)]
    releases = (m.group(1).lower() for m in RELEASE_RE.finditer(question))
    return names + [name for name in releases if not name.startswith("python ")]


# A name written in capitals ("CUDA", "GPU", "TLS"): a technology or a product, not a typo of a
# word the site has, so documentation that never mentions it does not answer about it ("How do
# I check CUDA GPU memory leaks with Memcheck?" meets Memcheck's page in every other word).
ACRONYM_RE = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]{2,7})(?![\w-])")


def acronyms(question: str) -> list[str]:
    """The names ``question`` writes in capitals, three letters or more, lowercase; none in a
    question written all in capitals (shouted, not named)."""
    if question.upper() == question:
        return []
    found = (m.group(1) for m in ACRONYM_RE.finditer(question))
    return list(dict.fromkeys(name.lower() for name in found if not name.isdigit()))


# A word with a capital after a small letter inside it is a product's or a format's name as
# its makers write it ("PostgreSQL", "JavaScript", "macOS", "GitHub"): no word of the language,
# so a site that never writes it does not answer about it ("Which zsh module connects to a
# PostgreSQL database?" met zsh's database module in every other word, and the model said it
# did). Not "UUIDs" or "APIs" (acronyms, plural), nor "OAuth" or "IPv6" (written many ways).
MIXED_CASE_RE = re.compile(r"(?<![\w-])(?=\w{4})([A-Za-z]*[a-z][A-Z][A-Za-z0-9]*)(?![\w-])")
CASE_HUMP_RE = re.compile(r"(?<=[a-z])(?=[A-Z])")


def mixed_case_names(question: str) -> list[tuple[str, ...]]:
    """The names ``question`` writes with a capital after a small letter, each as the ways a
    site may write it, lowercase: "postgresql", "postgre-sql", "postgre sql"; "wifi", "wi-fi",
    "wi fi" (the site's "Free Wi-Fi")."""
    found = dict.fromkeys(m.group(1) for m in MIXED_CASE_RE.finditer(question))
    return [
        tuple(dict.fromkeys(CASE_HUMP_RE.sub(mark, name).lower() for mark in ("", "-", " ")))
        for name in found
    ]


# A common word the question capitalises inside a sentence, on its own, is a name: "a Go module",
# "on Windows", "an npm Pro account", "to Osaka". Not after "the" ("the Museum", as people
# write a place they mean), nor beside another capitalised word ("Bicycle Rental", "Nishi
# Island"), nor in a question that capitalises most of its words. Any mark but a comma or an
# apostrophe ends a sentence here ("a version - Any tips?", "`cargo build` Fails").
CAPITALISED_WORD_RE = re.compile(r"[A-Za-z](?:[A-Za-z'.]*[A-Za-z])?|\n|[^\sA-Za-z0-9',]")


@dataclass(frozen=True, slots=True)
class Capitalised:
    """A common word a question capitalises as a name, and it with each neighbour word (not a
    stopword) as the question writes them, lowercase ("go"; "go module"): a site whose own
    words are such a phrase ("release mode") was only written with a capital for emphasis."""

    word: str
    phrases: tuple[str, ...]


def lone_capitalised(question: str) -> list[Capitalised]:
    """The common English words ``question`` capitalises as a name of their own: a language,
    a product, a place, which a site either names or does not ("How do I add a Go module as a
    dependency?": "go" is on every page, the language Go on none)."""
    tokens = CAPITALISED_WORD_RE.findall(question)
    words = [token for token in tokens[1:] if token[0].isalpha() and token != "I"]
    if sum(word[0].isupper() for word in words) * 2 > len(words):
        return []  # "How Do I Add A Dependency?": capitals of style, not names
    found: dict[str, Capitalised] = {}
    for at, token in enumerate(tokens):
        before = tokens[at - 1] if at else "."
        after = tokens[at + 1] if at + 1 < len(tokens) else "."
        word = token if token.lower() == "let's" else token.removesuffix("'s")
        if not word.istitle() or word in ("I", "Let's") or not before[0].isalpha():
            continue  # lowercase, in capitals ("XML": ``acronyms``), a sentence's first word
        if before.lower() == "the" or before[0].isupper() or after[0].isupper():
            continue
        if is_common_word(word.lower()) and word.lower() not in found:
            pairs = [f"{near} {token}" if at_left else f"{token} {near}"
                     for near, at_left in ((before, True), (after, False))
                     if near[0].isalpha() and near.lower() not in STOPWORDS]  # fmt: skip
            found[word.lower()] = Capitalised(word.lower(), tuple(p.lower() for p in pairs))
    return list(found.values())


# Words in capitals side by side are one name: a statement or a constant ("CREATE PROCEDURE",
# "INTEGER PRIMARY KEY"), which a site that documents it writes as it is. Acronyms side by
# side ("CUDA GPU", "JSON API": no word of five letters) are names of their own (``acronyms``).
CAPITALS_RUN_RE = re.compile(
    r"(?<![A-Za-z0-9_-])[A-Z][A-Z0-9_]+(?:[ ][A-Z][A-Z0-9_]+)+(?![A-Za-z0-9_-])"
)
PHRASE_WORD_CHARS = 5
CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def capital_phrases(question: str) -> list[tuple[str, ...]]:
    """The runs of two or more words in capitals ``question`` gives, each as the ways a site
    may write it, lowercase: the whole run, then its shorter runs of two words or more that
    hold a word of five letters ("INTEGER PRIMARY KEY REALLY": "integer primary key" too, the
    last word said loud). None in a question shouted: no lowercase, no Japanese."""
    if not re.search(r"[a-z]", question) and not CJK_RE.search(question):
        return []
    phrases = []
    for run in (m.group().lower().split() for m in CAPITALS_RUN_RE.finditer(question)):
        ways = [
            " ".join(run[start:end])
            for length in range(len(run), 1, -1)
            for start in range(len(run) - length + 1)
            if max(map(len, run[start : (end := start + length)])) >= PHRASE_WORD_CHARS
        ]
        if ways:
            phrases.append(tuple(ways))
    return list(dict.fromkeys(phrases))


# A tool's command, written as one runs it ("with npm deploy", "run `git frob`"): after a verb
# or a preposition that takes a command, or a backtick. Not "How does npm handle...": npm is
# the subject there. A reference that documents each command on a page of its own ("npm-ci",
# "git-commit") answers only about the commands it has (pipeline step 4).
COMMAND_RE = re.compile(
    r"(?:\b(?:with|using|use|run|running|via|try|type|typing|execute|call|calling)\s+|`)"
    r"([a-z][a-z0-9]+) ([a-z][a-z0-9-]*[a-z0-9])\b"
)


def commands(question: str) -> list[tuple[str, str]]:
    """The (tool, command) pairs ``question`` writes as one runs them: ("npm", "deploy")."""
    found = ((m.group(1), m.group(2)) for m in COMMAND_RE.finditer(question))
    return list(dict.fromkeys(pair for pair in found if not set(pair) & STOPWORDS))
