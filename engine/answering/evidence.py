"""The sentences that back an answer: quoted with the link, so a reader can check the claim.

A small model may garble the fact it was given (or write Japanese poorly); the passage's own
sentence does not. The best sentence is the one that meets most of the question's needs (read
as the search reads them, Japanese included), a need the article's title holds counting a
quarter (it names what every sentence is about); on a tie, the one that also meets its
optional needs (its particles and framing words), then the one nearest the question in
meaning when the caller can tell (``nearness``: a Japanese question about English pages meets
them only by its Latin words, "npm" in every line of a synopsis), each read after the sentence
before it on its line ("this list" says little alone), else the first and shortest.
When the question asks for a number ("how much", "いくら", "何秒"), only sentences holding
one are considered, if there are any. The sentence next to the best one in its paragraph is
added when it meets needs the first does not, or is about the same thing (its context, not a
fact from elsewhere), and the quote stays short. To a question asking how, a sentence saying
only that the thing can be done ("GitHub Pages includes support for using a Custom Domain…")
takes the one after it.
A sentence that announces what follows ("The following example rounds pi to three places:")
takes the line after it, the example being the answer; one that begins the line after a
command ("$ cargo test -- --test-threads=1", then "We set the number of test threads to
1…") takes the command before it. A line that only names what is asked
about ("npm prune [[<@scope>/]<pkg>...]", the synopsis, for "What does npm prune do?") says
nothing of it: another is quoted, else the opening of a passage that says something.
Documentation describes a function in an entry under its signature ("shutil.rmtree(path,
...)" then "Delete an entire directory tree"), so a quote from an entry starts with the entry's
signature, or its name when the signature is long: the sentence alone does not say what it
describes. And a question that calls
a function by name (or names a setting: "fetch-timeout") is answered by that entry, not by
another that mentions it in passing: by its sentence meeting the question, else by its opening
("fetch-timeout の既定値は": none of the entry's sentences holds the question's words).
Every sentence of that entry is about its name, which it need not repeat ("Returns the
operating system's default directory for temporary files" in ``os.tmpdir()``'s), so among them
the first the entry says in words (not "Added in: v0.9.9", "Returns: <string>" or a line of
code) is what it is or does. An entry is found by its anchor or its heading ("os.tmpdir()",
whose Node.js anchor is "ostmpdir"), or a command's page by its title ("cargo-yank(1)"); it
gives way to a section that says its name and more of the question (the release profile's
"opt-level = 3" for the release profile's default opt-level). A question about a default
that no sentence gives with a figure takes one that states it in words ("Defaults to the
number of logical CPUs."); one asking which variable, flag or key takes a list's entry that
defines a name ("CARGO_PKG_VERSION — The full version of your package.").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from config.text_helpers import SENTENCE_RE, shorten
from engine.answering.english import is_common_word
from engine.answering.needs import Need, command_titles, entry_names, met, question_needs
from engine.answering.wording import JAPANESE_RE
from engine.knowledge.models import PATH_SEPARATOR, Passage
from engine.knowledge.query import LATIN_WORD_RE

TITLE_SHARE = 0.25  # a need the title holds tells the article's sentences apart less
MAX_QUOTE_CHARS = 280  # two short sentences: more is reading the article, not checking a claim
EXAMPLE_LINES = 3  # an example announced by a colon: its first lines, as many as fit
MAX_SIGNATURE_CHARS = 160  # an entry's signature before its quote; a longer one gives its name
ASKS_FOR_NUMBER_RE = re.compile(  # not "when": "the first Sunday of the month" is an answer
    r"\bhow (?:much|many|long|late|early|old)\b|\bwhat time\b"
    # not "いくつか", "何日か前", "何人かから" ("some", "a few days ago") or "何度も" ("again and
    # again"), but "何日かかりますか" (takes) and "何時から"; a unit: "何バイト", "何ミリ秒"
    r"|いくら|いくつ(?!か)|何(?:[時日分秒週円歳回個人件年点倍番度行桁台枚本冊階%\uff05]|文字)"
    r"(?!も|か(?!ら|か[りるっ]))|何[ヶカか]月|何[ァ-ヺー]{2,}",
    re.I,
)
# A question that asks for a name ("Which cargo tree flag shows…", "Which key of the
# [workspace] table lists…"): a list's entry defining one answers it, a sentence about it not.
NAME_KINDS = r"(?:environment variable|variable|flag|option|key|field|setting|function|method)s?"
ASKS_FOR_NAME_RE = re.compile(  # not "What does the --watch flag do?": that names it
    rf"\bwhich (?:[\w\[\].-]+ ){{0,3}}?{NAME_KINDS}\b|\bwhat {NAME_KINDS}\b", re.I
)
# ... or for a command: "Which command deploys my documentation to GitHub Pages?" (a sentence
# that gives one says the word: "… run the following command: mkdocs gh-deploy")
ASKS_FOR_COMMAND_RE = re.compile(  # "Which git command…" too; not "What command line option…"
    r"\b(?:which|what) (?:[\w.-]+ ){0,2}?commands?\b(?![ -]line)", re.I
)
# A command asked for: the sentences that say "command" and meet at least this share of what
# the best candidate meets of the rest of the question ("Every command writes a log." not)
COMMAND_SENTENCE_SHARE = 0.5
# A figure asked for: the sentences holding one answer it if the best of them meets at least
# this share of what the best sentence meets; else none does (a log line's "15:50:43" is no
# answer to how often a server checks for changes), and across languages it is not on the site
NUMBER_SENTENCE_SHARE = 0.5
DEFINED_NAME_RE = re.compile(r"[\w.:+-]+(?: [\w<>\[\].=-]+)? \u2014 \S")  # "members — …"
QUOTED_NAME_RE = re.compile(r"[\w.:+-]*\w")  # the name it defines: "--invert" of "--invert spec"
CODE_MARK_RE = re.compile(r"[-._(]|[a-z][A-Z]")  # "opt-level", "json.dumps", "setTimeout"
MAN_SECTION_RE = re.compile(r"\(\d\w*\)$")  # "(1)" of "cargo-yank(1)"
DEFAULT_RE = re.compile(r"\bdefault|既定|デフォルト", re.I)  # a question about a default
DEFAULT_STATED_RE = re.compile(
    r"\bdefaults? (?:to|is|value is)\b|\bdefault:|\bby default\b|既定値は|デフォルトは", re.I
)
# A question in Japanese asking what a thing is or does ("--watch オプションは何をしますか"): its
# entry's description answers it, whatever sentence is nearest in meaning.
DEFAULT_LINE_RE = re.compile(r"default:\s*\S", re.I)  # a section's line "default: gh-pages"
ASKS_WHAT_IT_IS_RE = re.compile(r"何をします|何をする|とは(?:何|なん)|って何")
ASKS_WHAT_IT_DOES_RE = re.compile(  # ... and in English: "What does cargo yank do?"
    rf"\bwhat (?:does|do) .+ do\b|\bwhat is .+ for\?|{ASKS_WHAT_IT_IS_RE.pattern}",
    re.I,
)
# A sentence that names its subject by pointing back ("calling this function is the best
# practice"): the sentence before it says what "this function" is.
REFERS_BACK_RE = re.compile(
    r"\b(?:this|these|that|those|such) (?:function|method|class|module|option|argument|"
    r"parameter|attribute|decorator|command|flag|approach|way|style|technique|value|purpose)s?\b"
    # or goes on from it: "For instance, dns.lookup() will almost always resolve…"
    r"|^(?:for (?:instance|example)|however|otherwise|instead|therefore|thus|in that case)\b",
    re.I,
)
# A sentence that promises what the next one says: "… you need to take one additional step so
# that MkDocs will work with your custom domain." (the step: "You need to add a CNAME file…")
ANNOUNCES_RE = re.compile(
    r"\b(?:one|an|another|a few|two|three) (?:additional |extra |more )?steps?\b"
    r"(?! (?:above|before|earlier|described))|\bas follows\b",
    re.I,
)
# A question asking how to do something, and a sentence saying only that it can be done
# (a verb before には: "使うには", not "Windows には"; "方法を", not "どの方法が")
ASKS_HOW_RE = re.compile(
    r"\bhow (?:do|can|should|would|to)\b|どうすれば|どうしたら|どうやって|どのように|やり方|手順"
    r"|方法を|[うくぐすつぬぶむる]には",
    re.I,
)
CAN_BE_DONE_RE = re.compile(
    r"\b(?:includes?|has|have|provides?|offers?|adds?|comes with) (?!no\b)(?:\w+ )?support for\b"
    r"|\b(?:is|are) (?:fully |also )?supported\b|^\S+(?: \S+)? supports\b",
    re.I,
)
NUMBER_RE = re.compile(r"[0-9\uff10-\uff19\u3007一二三四五六七八九十百千万]")  # and kanji numerals
# A line typed at a prompt ("(tutorial-env) $ python -m pip install -r requirements.txt",
# ">>> round(2.5)"): it meets the question's words as commands, not as what they do, so the
# sentence that says what it is for (and brings the example after its colon) comes first.
PROMPT_LINE_RE = re.compile(r"(?:\([\w.-]+\)\s*)?(?:\$|>>>|%|C:\\>)\s")
PROMPT_LINE_SHARE = 0.85
# A line of an example, not a sentence: it opens or ends a block or a statement, or is an arrow
# function or a comment ("setTimeout(100, 'result').then((res) => {", "const a = 1;").
CODE_LINE_RE = re.compile(r"[{;]\s*$|=>|^\s*(?://|#|const |let |var |import |def |>>> )")
SENTENCE_ENDS = (".", "!", "?", "\u3002", "\uff01", "\uff1f")
PLACEHOLDER_RE = re.compile(r"<[^<>]*>")  # "<pkg>" in a synopsis
# An entry's heading after its name: the arguments of a signature ("child_process.exec(command[,
# options])"), an option's value ("--max-old-space-size=SIZE (in MiB)", "--inspect[=[host:]port]").
SIGNATURE_REST_RE = re.compile(r"[(\[=].*$")
# What a reference writes before an entry's name: "Class: Buffer", "Static method: Buffer.from()".
ENTRY_KIND_RE = re.compile(r"^(?:class|static method|event|property|method):\s*", re.I)
# A line of an entry's facts that says nothing of what it does: "Added in: v0.9.9", "Stability:
# 2 - Stable", "Returns: <string>" (the type alone; "Returns the directory..." is the answer).
ENTRY_LABEL_RE = re.compile(
    r"(?:Added in|Deprecated since|Stability|Returns|Type)\s*:"
    r"(?:\s|,|v?\d[\d.]*|-|\||Stable|Experimental|Deprecated|Legacy)*\.?"
)
# A fact an entry's list item gives under a label, after its description: "Default: 1024 * 1024."
LABELLED_FACT_RE = re.compile(r"[A-Z][A-Za-z ]{1,20}: \S.{0,80}$")
# What a question calls the thing it names ("the --watch flag", "the os.cpus() function"): the
# entry's sentences need not say it, since the entry is that thing.
ENTRY_KINDS = frozenset(
    "flag flags option options function functions method methods property class event "
    "command setting variable module".split()
)


@dataclass(frozen=True, slots=True)
class Evidence:
    """A quote from one article: ``quote`` is at most ``MAX_QUOTE_CHARS`` long, from the
    section at ``link``."""

    title: str
    url: str
    quote: str
    link: str = ""


@dataclass(frozen=True, slots=True)
class _Sentence:
    rank: int  # its passage's place in the search results
    index: int  # its place among the passage's sentences
    paragraph: int  # its line in the passage
    text: str
    met: frozenset[int]  # indexes of the needs it meets
    has_number: bool
    implied: frozenset[int] = frozenset()  # of them, met by its entry's name, not its words
    by_name: frozenset[int] = frozenset()  # the needs its entry's name meets, in its words or not


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
    named = entries_named(question, passages)
    if named:  # "What does the --watch flag do?": the entry says what it does, not "flag"
        needs = [need for need in needs if not set(need.forms) & ENTRY_KINDS]
    sentences = [
        s for rank, p in enumerate(passages) for s in _sentences(rank, p, needs, rank in named)
    ]
    score = _Scorer(needs, sentences, " ".join(dict.fromkeys(p.title for p in passages)))
    candidates = [s for s in sentences if score.required(s.met) > 0]
    if named and not any(s.rank in named and score.required(s.met - s.implied) for s in sentences):
        # "fetch-timeout の既定値は?": the entry asked about, though none of its sentences
        # meets the question's other words (its name is its heading), over a neighbour's.
        return opening(passages[min(named)], max_chars, with_name=True)
    if not candidates:
        return None
    if not (candidates := [s for s in candidates if not _restates(s, passages, question)]):
        # "What does npm dedupe do?": its synopsis "npm dedupe" meets every word of it
        openings = (opening(passage, max_chars) for passage in passages)
        return next((found for found in openings if not _says_nothing(found.quote, question)), None)
    candidates = _narrowed(candidates, question, named, score)
    firsts = _saying_a_command(candidates, question, needs, score)  # "Which command…"

    def met_score(s: _Sentence) -> tuple[float, float]:
        weight = PROMPT_LINE_SHARE if PROMPT_LINE_RE.match(s.text) else 1.0
        return score.required(s.met) * weight, score.optional(s.met)

    best = max(met_score(s) for s in firsts)
    tied = [s for s in firsts if met_score(s) == best]
    if any(s.rank in named for s in tied) and (
        nearness is None or ASKS_WHAT_IT_IS_RE.search(question)
    ):
        # Every sentence of the entry meets its name: what it says first is what it is or does
        # (in other words than the page's, the meaning picks the one asked about: "既定値")
        first = max(  # the entry's own sentence, not one of a neighbour that names it
            tied,
            key=lambda s: (
                s.rank in named,
                _is_prose(s.text),
                score.required(s.met - s.by_name),
                -s.rank,
                -s.index,
            ),
        )
    elif len(tied) > 1 and nearness is not None:
        closeness = nearness(question, [_in_context(s, sentences) for s in tied])
        first = max(zip(tied, closeness, strict=True), key=lambda pair: pair[1])[0]
    else:
        first = max(tied, key=lambda s: (-s.rank, -len(s.text)))
    first = _described(first, passages[first.rank], sentences)
    chosen = [first, *_neighbour(first, candidates, score, max_chars)]
    if len(chosen) == 1 and ASKS_HOW_RE.search(question) and CAN_BE_DONE_RE.search(first.text):
        # "How do I use a custom domain…?": "GitHub Pages includes support for using a Custom
        # Domain for your site." says it can be done, the sentence after it how
        chosen += _beside_if_room(first, sentences, max_chars - len(first.text) - 1)
    chosen += _referred_to(first, chosen, sentences, max_chars - len(_join(chosen)) - 1)
    chosen.sort(key=lambda s: s.index)
    chosen += _carried_on(chosen[-1], sentences, max_chars - len(_join(chosen)) - 1)
    chosen += _announced(chosen[-1], sentences, max_chars - len(_join(chosen)))
    chosen = _after_command(chosen[0], sentences, max_chars - len(_join(chosen)) - 1) + chosen
    if DEFAULT_RE.search(question):
        chosen = _with_default_line(chosen, sentences, max_chars)
    passage = passages[first.rank]
    quote = shorten(_join(chosen), max_chars)
    return Evidence(passage.title, passage.url, _with_entry_name(passage, quote), passage.link)


def asks_for_number(question: str) -> bool:
    """Whether the answer to ``question`` is a figure ("how much", "いくら", "何バイト")."""
    return ASKS_FOR_NUMBER_RE.search(question) is not None


def has_number(text: str) -> bool:
    """Whether ``text`` holds a figure, in digits or kanji numerals."""
    return NUMBER_RE.search(text) is not None


def _narrowed(
    candidates: list[_Sentence], question: str, named: set[int], score: _Scorer
) -> list[_Sentence]:
    """The candidates that can answer what is asked: those holding a number when it asks
    for one (if one of them meets enough of it: ``NUMBER_SENTENCE_SHARE``); those of the
    entry it names, if any, and of them not its facts' labels."""
    numbered = [s for s in candidates if s.has_number]
    stated = [s for s in candidates if _states_default(s)] if DEFAULT_RE.search(question) else []
    if not any(s.has_number for s in stated):  # a default in words: "the number of CPUs"
        numbered += [s for s in stated if not s.has_number]
    best = max(score.required(s.met) for s in candidates)
    if numbered and max(score.required(s.met) for s in numbered) < NUMBER_SENTENCE_SHARE * best:
        numbered = []  # "mkdocs serve は何秒ごとに…": not "[I 160402 15:50:43] Serving on…"
    if numbered and asks_for_number(question):  # "how much", "いくら": the answer is a number,
        # said in words, not an example's argument ("setTimeout(100, 'result').then(…")
        candidates = [s for s in numbered if not CODE_LINE_RE.search(s.text)] or numbered
    if asks_for_name(question) and (defined := [s for s in candidates if _defines(s)]):
        candidates = defined  # "Which environment variable holds my package's version?"
    if entry := [s for s in candidates if s.rank in named]:
        candidates = entry  # "What does tempfile.mkdtemp() return?": its entry says
        # not "Added in: v0.9.9" for what it does, unless asked when it was added
        if said := [s for s in entry if not _label_only(s)]:
            candidates = said
    return candidates


def asks_for_name(question: str) -> bool:
    """Whether ``question`` asks which flag, variable, key… without naming one itself ("Which
    cargo tree flag shows the reverse dependencies?", not "What does the --watch flag do?")."""
    return ASKS_FOR_NAME_RE.search(question) is not None and not entry_names(question)


def _saying_a_command(
    candidates: list[_Sentence], question: str, needs: Sequence[Need], score: _Scorer
) -> list[_Sentence]:
    """The candidates to begin the quote with: when ``question`` asks which command does
    something ("Which command deploys my documentation to GitHub Pages?"), those that say
    "command" ("… run the following command: mkdocs gh-deploy") and meet about as much of the
    rest of it as the best; else all of them. Not when it names one, or asks for a name that
    a list's entry defines ("What command line option…")."""
    if not ASKS_FOR_COMMAND_RE.search(question) or entry_names(question):
        return candidates
    command = frozenset(i for i, need in enumerate(needs) if "command" in need.forms)
    if not command or asks_for_name(question):
        return candidates
    best = max(score.required(s.met - command) for s in candidates)
    saying = [
        s
        for s in candidates
        if command <= s.met and score.required(s.met - command) >= best * COMMAND_SENTENCE_SHARE
    ]
    return saying or candidates


def quoted_name(question: str, quote: str) -> str:
    """The name ``quote`` defines when ``question`` asks which one ("--invert" of "--invert
    spec — Show the reverse dependencies…" for "Which cargo tree flag shows…"), else "": not a
    word a sentence begins with ("Note — …")."""
    found = QUOTED_NAME_RE.match(quote)
    if not asks_for_name(question) or not DEFINED_NAME_RE.match(quote) or found is None:
        return ""
    name = found.group()
    return "" if name[:1].isupper() and name[1:].islower() else name


def _defines(sentence: _Sentence) -> bool:
    """Whether ``sentence`` is a list's entry that defines a name ("CARGO_PKG_VERSION — The
    full version of your package.", "members — Packages to include in the workspace.")."""
    return DEFINED_NAME_RE.match(sentence.text) is not None


def _states_default(sentence: _Sentence) -> bool:
    """Whether ``sentence`` says what a default is: "Defaults to the number of logical
    CPUs." answers "How many parallel jobs does cargo build run by default?" without a
    figure, where a figure elsewhere ("cargo build -j1 may or may not build…") does not; a
    default said with its figure is better still ("By default … more than 10 listeners")."""
    return DEFAULT_STATED_RE.search(sentence.text) is not None


def opening(
    passage: Passage, max_chars: int = MAX_QUOTE_CHARS, *, with_name: bool = False
) -> Evidence:
    """The passage's first paragraph, shortened: the quote of an article that covers the
    question by its title, with no sentence of its own meeting a need; ``with_name``: after
    the name of the entry it opens ("fetch-timeout — Default: 300000 (5 minutes)")."""
    lines = [line.strip() for line in passage.text.splitlines() if line.strip()]
    # not "Added in: v8.2.0", the first line of a Node.js entry
    first = next((line for line in lines if not ENTRY_LABEL_RE.fullmatch(_bare(line))), "")
    quote = shorten(first, max_chars)
    if with_name:
        quote = _with_entry_name(passage, quote)
    return Evidence(passage.title, passage.url, quote, passage.link)


def _sentences(
    rank: int, passage: Passage, needs: Sequence[Need], is_entry: bool = False
) -> list[_Sentence]:
    """The passage's sentences, without its title (repeated as a heading). Each sentence of an
    entry the question names meets the needs its name meets: "Returns the operating system's
    default directory for temporary files" is about ``os.tmpdir()`` though it never says so."""
    name = entry_name(passage).lower() if is_entry else ""
    # "retries" of "fetch-retries" is the question's "retry" too: read as a question reads it
    name_forms = {form for need in question_needs(name) for form in need.forms} if name else set()
    implied = frozenset(
        i
        for i, need in enumerate(needs)
        if name and (met(need, name) or name_forms & set(need.forms))
    )
    found: list[_Sentence] = []
    for index, match in enumerate(SENTENCE_RE.finditer(passage.text)):
        text = match.group().strip()
        if not text or text == passage.title.strip():
            continue
        lowered = text.lower()
        said = frozenset(i for i, need in enumerate(needs) if met(need, lowered))
        paragraph = passage.text.count("\n", 0, match.start())
        has_number = NUMBER_RE.search(text) is not None
        found.append(
            _Sentence(
                rank, index, paragraph, text, implied | said, has_number, implied - said, implied
            )
        )
    return found


def _in_context(sentence: _Sentence, sentences: Sequence[_Sentence]) -> str:
    """The sentence after the one before it on its line, as the encoder reads it: a sentence
    alone may say little ("A common convention is to put this list in a requirements.txt
    file:" after "python -m pip freeze will produce a similar list of the installed
    packages…")."""
    before = _beside(sentence, sentences, -1)
    return f"{before.text} {sentence.text}" if before is not None else sentence.text


def _beside(sentence: _Sentence, sentences: Sequence[_Sentence], offset: int) -> _Sentence | None:
    """The sentence ``offset`` places from ``sentence`` in its paragraph (-1: the one before)."""
    place = (sentence.rank, sentence.paragraph, sentence.index + offset)
    return next((s for s in sentences if (s.rank, s.paragraph, s.index) == place), None)


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

    in_line = [
        s
        for s in candidates
        if (s.rank, s.paragraph) == (first.rank, first.paragraph)
        and s.index != first.index
        and len(s.text) <= room
    ]
    neighbours = [s for s in in_line if abs(s.index - first.index) == 1]
    best = max(neighbours, key=gain, default=None)
    if best is not None and gain(best)[0] > 0:
        return [best]
    # A list item's facts further on its line: "maxBuffer <number> Largest amount of data…",
    # then two sentences on, "Default: 1024 * 1024."
    further = [
        s
        for s in in_line
        if s.index > first.index and gain(s)[0] > 0 and LABELLED_FACT_RE.match(s.text)
    ]
    if further:
        return [max(further, key=lambda s: (gain(s)[0], -abs(s.index - first.index)))]
    return [best] if best is not None and any(gain(best)) else []


def _referred_to(
    first: _Sentence, chosen: Sequence[_Sentence], sentences: Sequence[_Sentence], room: int
) -> list[_Sentence]:
    """The sentence before ``first`` in its paragraph, when ``first`` points back to what it
    names ("this function") and the quote has room for it."""
    if not REFERS_BACK_RE.search(first.text):
        return []
    before = _beside(first, sentences, -1)
    if before is None or before in chosen or len(before.text) > room:
        return []
    return [before]


def _beside_if_room(
    sentence: _Sentence, sentences: Sequence[_Sentence], room: int
) -> list[_Sentence]:
    """The sentence after ``sentence`` in its paragraph, if it fits in ``room``."""
    after = _beside(sentence, sentences, 1)
    return [after] if after is not None and len(after.text) <= room else []


def _carried_on(last: _Sentence, sentences: Sequence[_Sentence], room: int) -> list[_Sentence]:
    """The sentence after ``last`` in its paragraph, when it points back to it, or ``last``
    announces it, and the quote has room: "os.cpus().length should not be used to calculate
    the amount of parallelism…" goes on "Use os.availableParallelism() for this purpose.",
    which is the answer; "…you need to take one additional step…" goes on with the step."""
    after = _beside_if_room(last, sentences, room)
    if after and (REFERS_BACK_RE.search(after[0].text) or ANNOUNCES_RE.search(last.text)):
        return after
    return []


def entries_named(question: str, passages: Sequence[Passage]) -> set[int]:
    """The ranks of the passages that are the entries of the functions ``question`` calls by
    name, or of the settings it names with their hyphens ("fetch-timeout", not its neighbour
    "fetch-retry-maxtimeout", whose sentences meet the question's words as well): the entry's
    anchor is the name, or ends with it after a module's or class's dot. A command's page is
    its entry too ("npm publish": the page titled "npm-publish")."""
    names = entry_names(question)
    titles = command_titles(question)

    def names_it(passage: Passage) -> bool:
        return is_entry_of(passage, names) or command_title(passage.title) in titles

    named = {rank for rank, passage in enumerate(passages) if names_it(passage)}
    # "setTimeout" is the global setTimeout(), not timersPromises.setTimeout(), when both came
    exact = {rank for rank in named if is_entry_of(passages[rank], names, exactly=True)}
    if exact and _outsaid(question, passages, asked=exact, entries=named):
        return set()
    return exact or named


def _outsaid(
    question: str, passages: Sequence[Passage], asked: set[int], entries: set[int]
) -> bool:
    """Whether a section that is no entry of the question's names (``entries``, of which
    ``asked`` are the ones asked about) is headed by another thing the question names and
    says, in its own words, the entries' name and more of the question than any of them:
    "What is the default opt-level of the release profile?" is answered by the release
    profile's section ("The default settings for the release profile are: … opt-level = 3"),
    not by opt-level's entry, which says what it does. Not a section that only says more of
    the site's own words ("What does json.dumps() return in Python?")."""
    needs = [
        n for n in question_needs(question) if not n.optional and not set(n.forms) & ENTRY_KINDS
    ]

    def said(text: str) -> frozenset[int]:
        return frozenset(i for i, need in enumerate(needs) if met(need, text.lower()))

    by_name = frozenset().union(*(said(entry_name(passages[rank])) for rank in asked))
    most = max(len(said(passages[rank].text) | by_name) for rank in asked)
    return any(
        by_name <= (others := said(passage.text))
        and len(others) > most
        and said(entry_name(passage)) - by_name  # headed by what the question also names
        for rank, passage in enumerate(passages)
        if rank not in entries
        and not _is_an_entry(passage)  # not another entry
        and not any(_holds(passage, passages[rank]) for rank in asked)  # "the N glob qualifier"
    )


def _holds(section: Passage, entry: Passage) -> bool:
    """Whether ``entry`` is one of ``section``'s entries: "Glob Qualifiers > N" of "Glob
    Qualifiers", the kind of thing the question calls N, not another thing it names."""
    return entry.url == section.url and entry.heading.startswith(section.heading + PATH_SEPARATOR)


def _is_an_entry(passage: Passage) -> bool:
    """Whether ``passage`` is an entry under a name as code writes it ("opt-level",
    "setTimeout(callback[, delay])", "json.dumps()"), not a section headed in words
    ("release", "Caret requirements")."""
    name = SIGNATURE_REST_RE.sub("", entry_name(passage)).strip()
    return bool(name) and " " not in name and CODE_MARK_RE.search(entry_name(passage)) is not None


def command_title(title: str) -> str:
    """A page's title as a command's name, lowercase: "cargo-yank" of a man page's
    "cargo-yank(1)", "npm-publish" as it is."""
    return MAN_SECTION_RE.sub("", title.strip().lower())


def is_entry_of(passage: Passage, names: Sequence[str], *, exactly: bool = False) -> bool:
    """Whether ``passage`` is the entry of one of ``names`` (``needs.entry_names``): its
    anchor is the name, or its heading's signature ("os.tmpdir()", whose Node.js anchor is
    "ostmpdir"), or either ends with it after a module's or class's dot (not ``exactly``)."""
    texts = [(passage.anchor or "").lower(), *_heading_names(passage)]
    return any(
        text and (text == name or (not exactly and text.endswith(f".{name}")))
        for text in texts
        for name in names
    )


def _heading_names(passage: Passage) -> list[str]:
    """The names an entry's heading gives, lowercase: "os.tmpdir" of "os.tmpdir()",
    "--require" and "-r" of "-r, --require module", "buffer" of "Class: Buffer"; none of a
    heading in words ("bytes-like object", "http.server — HTTP servers")."""
    names = []
    for alias in ENTRY_KIND_RE.sub("", entry_name(passage)).split(", "):
        name = SIGNATURE_REST_RE.sub("", alias).strip()
        if name.startswith("-"):  # an option with its value's name: "--require module"
            name = name.split(" ", 1)[0]
        if name and " " not in name:
            names.append(name.lower())
    return names


def entry_name(passage: Passage) -> str:
    """The last part of the passage's heading path: an API entry's signature, a section's
    heading."""
    return passage.heading.rsplit(PATH_SEPARATOR, 1)[-1].strip()


def _label_only(sentence: _Sentence) -> bool:
    """Whether ``sentence`` is a label of its entry's facts ("Added in: v0.9.9", "Returns:
    <string>") that meets nothing of the question but the entry's name."""
    return ENTRY_LABEL_RE.fullmatch(_bare(sentence.text)) is not None and not (
        sentence.met - sentence.by_name
    )


def _letters(name: str) -> str:
    """``name`` lowercase, with only its letters, digits and hyphens: as an anchor writes it."""
    return re.sub(r"[^a-z0-9-]", "", name.lower())


def _is_prose(text: str) -> bool:
    """A sentence of the documentation's own words, not a line of code ("const f =
    util.callbackify(fn);") or a list's label: words ending with a stop."""
    bare = _bare(text)
    comment = bare.startswith(("//", "#", "/*", "*"))
    words = " " in bare or JAPANESE_RE.search(bare) is not None
    return words and bare.endswith(SENTENCE_ENDS) and not comment


def _bare(text: str) -> str:
    """``text`` without its placeholders ("<string>"), trimmed."""
    return PLACEHOLDER_RE.sub("", text).strip()


def _restates(sentence: _Sentence, passages: Sequence[Passage], question: str) -> bool:
    """Whether ``sentence`` names what is asked about and says nothing of it ("npm dedupe",
    "npm prune [[<@scope>/]<pkg>...]" for "What does npm dedupe do?"). Not an entry's name
    alone ("EAFP"): what follows it is quoted instead (``_described``)."""
    heading = entry_name(passages[sentence.rank])
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
    if first.text != entry_name(passage):
        return first
    following = (s for s in sentences if s.rank == first.rank and s.index == first.index + 1)
    return next(following, first)


def _after_command(first: _Sentence, sentences: Sequence[_Sentence], room: int) -> list[_Sentence]:
    """The command line just before ``first`` when ``first`` begins the paragraph after it,
    and fits in ``room``: documentation shows a command, then says what it did ("$ cargo test
    -- --test-threads=1" then "We set the number of test threads to 1…")."""
    before = [s for s in sentences if (s.rank, s.paragraph) == (first.rank, first.paragraph - 1)]
    starts = _beside(first, sentences, -1) is None
    command = before[0] if len(before) == 1 else None
    if starts and command and PROMPT_LINE_RE.match(command.text) and len(command.text) < room:
        return [command]
    return []


def _with_default_line(
    chosen: list[_Sentence], sentences: Sequence[_Sentence], max_chars: int
) -> list[_Sentence]:
    """``chosen`` with its section's line that gives the default ("default: '127.0.0.1:8000'"
    under MkDocs' dev_addr, "default: gh-pages"), when the question asks for a default and no
    chosen sentence gives one with its value: the line alone says too little to be chosen
    ("Allows a custom default to be set…" meets more of the question's words). The first
    sentence and the line, if the rest leaves no room."""
    if any(DEFAULT_LINE_RE.match(s.text) or (_states_default(s) and s.has_number) for s in chosen):
        return chosen
    rank = chosen[0].rank
    line = next((s for s in sentences if s.rank == rank and DEFAULT_LINE_RE.match(s.text)), None)
    if line is None or line in chosen:
        return chosen
    kept = chosen if len(_join([*chosen, line])) <= max_chars else chosen[:1]
    return sorted([*kept, line], key=lambda s: s.index)


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
    name = entry_name(passage)
    bare = name.removesuffix("()")
    first_name = bare.split(", ", 1)[0]  # "%d" of "%d, %/", the page's first line
    first_line, more = passage.text.partition("\n")[::2]
    opens_with_it = (  # a term on its own line ("HISTSIZE <S>"), not a sentence that names it
        first_line.startswith(first_name)
        and bool(more)
        and not first_line.rstrip().endswith(SENTENCE_ENDS)
        and len(first_line) <= MAX_SIGNATURE_CHARS
    )
    looks_like_code = (
        any(mark in name for mark in "._(%$")  # "%d, %/": zsh's prompt escapes
        or ("-" in name and name.islower())
        or (passage.anchor or "").startswith("term-")
        or (opens_with_it and _is_code_word(bare))  # "HISTSIZE", "zmv"; not "DESCRIPTION"
    )
    # An option's anchor holds its name without the dashes ("--num-callers", "opt.num-callers"),
    # Node.js's without the dots and brackets ("os.tmpdir()": "ostmpdir")
    named_by_anchor = _letters(bare.lstrip("-")) in _letters(passage.anchor or "")
    # or, with no anchor of its own (a manual page's "--amend", "gc.auto"), by its first line
    named = named_by_anchor or bare.startswith("-") or opens_with_it
    if not (bare and looks_like_code and named):
        return quote
    signature = first_line.strip()
    if signature.startswith(bare) and len(signature) <= MAX_SIGNATURE_CHARS:
        name = signature
    if quote.startswith(name) or quote.startswith(bare):
        return quote
    return f"{name} — {quote}"


def _is_code_word(name: str) -> bool:
    """A name in capitals or no word of a language, in Latin letters: "HISTSIZE", "zmv"."""
    return (
        name.isascii() and " " not in name and (name.isupper() or not is_common_word(name.lower()))
    )


def _join(sentences: Sequence[_Sentence]) -> str:
    """Sentences as one quote: Japanese ones need no space between them, and "…" stands for
    those left out between two."""
    quote, before = "", None
    for sentence in sentences:
        gap = before is not None and sentence.index > before.index + 1
        latin = sentence.text[0].isascii()
        spaced = quote and (quote[-1].isascii() or gap) and latin
        quote += (" …" if latin else "…") if gap else ""  # sentences left out between them
        quote += (" " if spaced else "") + sentence.text
        before = sentence
    return quote
