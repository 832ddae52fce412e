"""How a question becomes an answer: the steps in the order the engine takes them.

The default model (SmolLM2-135M) answers from whatever it is given and invents the rest, so
the site decides what the model may say, and most decisions are taken before it runs
(docs/quality.md, "Grounded answers"):

1. **Small talk** ("hi", "thanks!", ``smalltalk.py``): one friendly sentence in the
   message's language (to a greeting, the space's own ``greeting`` when it has one); no
   search, no model, no source.
2. **Search** the site for the question without its greeting, and, for a follow-up ("And
   how much is the ticket?", ``history.leans_on_earlier``), with the asker's last questions
   (``history.search_text``); a new question in a conversation is searched alone. The
   entries of the names it gives ("os.tmpdir()", "--watch") are looked up beside the search,
   for step 4; when the answer stands on such an entry, the model reads it alone.
3. **No articles yet** (no rescrape): nothing to stand on; the model answers as a general
   assistant and a note after it says that is not the site's answer.
4. **On the site?** (``on_site.py``, the one rule): if no section answers the question, one
   sentence says so in its language; no model, no source (costs nothing, invents nothing).
   The names and terms the question gives are looked up on the whole site first: one the
   site never mentions ("itertools.batched()", "CUDA", a command of a tool whose commands
   have a page each: "with npm deploy", a common word it never capitalises as a name: "a Go
   module", words in capitals it never writes together: "CREATE PROCEDURE") refuses it; one
   it mentions elsewhere ("YAML") must be in the answering article.
5. **The quote** that backs the answer (``evidence.py``): the section's sentence that best
   meets the question, shown with its link after the answer, so a reader can check it; of
   sentences that meet it as well, for a question in another language than the pages, the
   nearest in meaning (its words, Japanese, meet none of theirs). A question naming what its
   article is about by the article's title ("http.server — HTTP servers") reads the article's
   opening too, where a module's page says what matters most of it. A follow-up whose own
   words meet no sentence ("For how long can I keep them?") is quoted by the conversation's.
   A figure asked across languages ("…契約はいくらですか" of English pages) needs a quote that
   holds one; else it is not on the site.
6. **Who writes**: the model, when it writes the question's language
   (``CONCIERGE_MODEL_LANGUAGES``) and, for a yes/no question, when it can
   (``CONCIERGE_MODEL_ANSWERS_YES_NO``, ``yes_no.py``); otherwise the quote alone.
7. **The prompt** (``prompt.py``): system text, the conversation, the passages and the quote,
   the question. A new question in a conversation (not a follow-up, step 2) is answered as
   if asked first, without the turns: the model copies what it reads, an earlier answer's
   invented recipe too.

After the model, ``closing.py`` adds why it was cut (if it was), the quote and the sources;
when its words give a number or a command-line option nothing it read gives (``numbers.py``,
``options.py``), they are left out and the quote stands alone, after a sentence saying so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from broker.protocol import Request
from config.settings import Settings
from config.text_helpers import SENTENCE_ENDS, split_sentences
from engine.answering.evidence import (
    ASKS_WHAT_IT_DOES_RE,
    Evidence,
    asks_for_number,
    command_title,
    entries_named,
    find_evidence,
    has_number,
    is_entry_of,
    opening,
    quoted_name,
)
from engine.answering.history import (
    NO_HISTORY,
    FittedHistory,
    TokenCounter,
    as_messages,
    leans_on_earlier,
    search_text,
)
from engine.answering.needs import (
    acronyms,
    capital_phrases,
    code_names,
    command_titles,
    commands,
    entry_names,
    holds_every_need,
    lone_capitalised,
    met,
    mixed_case_names,
    named_terms,
    question_needs,
)
from engine.answering.on_site import PASSAGES_USED, on_site_passages
from engine.answering.passages import format_nearest
from engine.answering.prompt import PromptBuilder
from engine.answering.smalltalk import small_talk, without_small_talk
from engine.answering.wording import WORDING, Language, language_of
from engine.answering.yes_no import is_yes_no_question
from engine.backends.base import ChatMessage
from engine.knowledge.models import Passage
from engine.knowledge.store import KnowledgeBase

PASSAGES_SEARCHED = 8  # per question, best first; step 4 keeps those of the answering article
QUOTE_PROBE_CHARS = 40  # of a quote, what tells the passage it came from
ENTRY_CANDIDATES = 200  # passages whose heading holds a name the question gives, looked at
NAME_START_RE = re.compile(r"-*[A-Za-z_]")  # what an entry's name begins with
COMMAND_PAGES = 3  # pages titled "npm-…": the site documents npm's commands one per page
DESCRIPTION_WITHIN = 4  # a command's page says what it does in one of its first sections
SEE_PAGE_RE = re.compile(r"(?:[^\u2014]+ \u2014 )?See (?!also\b)(?:the )?(.+?)\.?")  # a pointer

# What the engine does with a question: the model writes (from the site's passages, or, with
# no articles yet, as a general assistant), or the engine answers alone.
Step = Literal["model", "no_articles", "quote_only", "not_on_site", "small_talk"]


@dataclass(frozen=True)
class Plan:
    """The decision for one question: who writes, from which passages, and what follows."""

    step: Step
    language: Language
    passages: tuple[Passage, ...] = ()  # the sections the answer stands on, best first
    evidence: Evidence | None = None  # the quote shown after the answer, with its link
    note: str = ""  # the engine's own sentence instead of a quote (not on the site, ...)
    messages: list[ChatMessage] = field(default_factory=list)  # what the model reads
    history: FittedHistory = NO_HISTORY  # the conversation's turns given to the model
    named: str = ""  # the name the quote gives to "which flag…": the model's words must say it
    # what a follow-up's prompt will begin with: the system text and the conversation's turns
    # (the read-ahead, engine/jobs/next_turn.py), whether or not the model read them this time;
    # a call, made only by an engine that reads ahead (it may count tokens: a fitting)
    lead: Callable[[], list[ChatMessage]] = list

    @property
    def asks_model(self) -> bool:
        return self.step in ("model", "no_articles")

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(passage.url for passage in self.passages))

    @property
    def not_on_site(self) -> bool:
        """No section of the site answers it (the wire's ``not_on_site``); small talk asks
        nothing, so it is not among them."""
        return self.step in ("not_on_site", "no_articles")


class AnswerPlanner:
    """Turns a request into a ``Plan``, reading the knowledge base at ``settings.kb_path``
    (one space's: the engine keeps one planner per space)."""

    def __init__(
        self, settings: Settings, count_tokens: TokenCounter, *, greeting: str | None = None
    ) -> None:
        self.settings = settings
        self.greeting = greeting
        self.kb = KnowledgeBase(settings.kb_path)
        self.prompts = PromptBuilder(settings, count_tokens)

    def plan(self, request: Request) -> Plan:
        """Steps 1 to 7 of the module's docstring, in order. Blocking (search, token
        counts): call it from a worker thread."""
        question, history = request.question, as_messages(request.history)
        if (said := small_talk(question)) is not None:  # 1
            language = language_of(question)
            own = self.greeting if said == "greeting" else None
            return Plan("small_talk", language, note=own or WORDING[language].small_talk(said))
        asked = without_small_talk(question)  # "Hi, when...": the site need not cover "hi"
        language = language_of(asked)
        words = WORDING[language]
        follow_up = bool(history) and leans_on_earlier(asked)  # 2: "And how much is it?"
        searched = search_text(asked, history) if follow_up else asked
        found = self.kb.search(searched, PASSAGES_SEARCHED, whole=holds_every_need(searched))
        if not found and self.kb.is_empty():  # 3
            messages, fitted = self.prompts.build(question, history)
            return Plan("no_articles", language, note=words.no_articles, messages=messages,
                        history=fitted, lead=partial(list, messages[:-1]))  # fmt: skip
        passages = self._on_site(asked, found, searched, self._entries_named(asked, found))  # 4
        if not passages:
            return _not_on_site(language, found)
        described = self._description(asked, passages)  # "What does cargo build do?"
        passages = self._with_opening(asked, passages, described)  # "http.server を本番環境で…"
        across = language != language_of(passages[0].text)  # its words cannot choose the quote
        nearness = self._nearness if across else None
        quoted = _with_rest_of_page(passages, found) if across else passages
        evidence = find_evidence(asked, quoted, nearness=nearness)  # 5
        if evidence is None and searched != asked:  # "For how long can I keep them?": the books
            evidence = find_evidence(searched, passages, nearness=nearness)
        evidence = evidence or opening(passages[0])
        if described is not None and _only_names(asked, described):
            evidence = opening(described)  # "What does cargo build do?": not its synopsis
        if referred := self._referred_page(evidence.quote):  # "See Cargo.toml vs Cargo.lock."
            passages = referred
            evidence = find_evidence(asked, passages, nearness=nearness) or opening(passages[0])
        passages = _with_quoted_section(passages, quoted, evidence)
        if across and asks_for_number(asked) and not has_number(evidence.quote):
            # "Valgrind の商用サポート契約はいくらですか": its words met in English ("support",
            # "contract"), but what answers a figure across languages holds one
            return _not_on_site(language, found)
        if named := entries_named(asked, passages):  # the entry asked about, not its neighbours:
            passages = [passages[rank] for rank in sorted(named)]  # "os.endianness() returns…"
        if not self._model_writes(question, language):  # 6
            return Plan("quote_only", language, tuple(passages), evidence)
        messages, fitted, lead = self._prompt(question, history, follow_up, passages, evidence)
        return Plan("model", language, tuple(passages), evidence, messages=messages,
                    history=fitted, named=quoted_name(asked, evidence.quote),
                    lead=lead)  # fmt: skip

    def _prompt(
        self,
        question: str,
        history: list[ChatMessage],
        follow_up: bool,
        passages: Sequence[Passage],
        evidence: Evidence,
    ) -> tuple[list[ChatMessage], FittedHistory, Callable[[], list[ChatMessage]]]:
        """Step 7: the model's messages, the turns they hold, and how to get the conversation
        a follow-up will begin with. A new question is answered as if asked first: SmolLM2
        copies what it reads, and gave an earlier answer's invented recipe to the next one."""
        read = history if follow_up else []
        messages, fitted = self.prompts.build(question, read, passages, evidence.quote)
        if history and not follow_up:
            return (
                messages,
                fitted,
                partial(self.prompts.lead, question, history, passages, evidence.quote),
            )
        return messages, fitted, partial(list, messages[:-1])

    def _on_site(
        self, asked: str, found: list[Passage], searched: str, looked_up: list[Passage]
    ) -> list[Passage]:
        """Step 4: the passages of the article that answers ``asked``, from those ``found``
        for the ``searched`` text (the question, or it with the asker's earlier ones) and the
        entries of the names it gives, ``looked_up``; [] when it is not on the site."""
        names = code_names(asked)  # "itertools.batched()" must be on the site,
        unknown = sorted(set(names) - self.kb.mentions(names, whole=True))
        unknown += sorted(set(acronyms(asked)) - self.kb.mentions(acronyms(asked)))  # "CUDA"
        mixed = mixed_case_names(asked)  # "PostgreSQL"; "WiFi", which the site writes "Wi-Fi"
        known = self.kb.mentions([way for ways in mixed for way in ways])
        unknown += [ways[0] for ways in mixed if not known.intersection(ways)]
        unknown += self._unknown_commands(asked)  # "npm deploy"
        runs = capital_phrases(asked)  # "CREATE PROCEDURE", where "procedure" is a word
        written = self.kb.mentions([way for ways in runs for way in ways])
        unknown += [ways[0] for ways in runs if not written.intersection(ways)]
        unknown += self._unknown_capitalised(asked)  # "a Go module", where "go" is a verb
        site_terms = self.kb.mentions(named_terms(question_needs(searched)))  # "YAML" on it
        return on_site_passages(
            asked,
            found,
            unknown_names=unknown,
            site_terms=site_terms,
            follow_up_of=searched if searched != asked else "",
            looked_up=looked_up,
        )

    def _unknown_capitalised(self, asked: str) -> list[str]:
        """The common words ``asked`` capitalises as names that the site never writes so,
        nor as the question's own phrase ("Release profile": the site's "release profile")."""
        named = lone_capitalised(asked)
        if not named:
            return []
        known = self.kb.capitalises([name.word for name in named])
        phrases = self.kb.mentions([phrase for name in named for phrase in name.phrases])
        known |= {name.word for name in named if phrases.intersection(name.phrases)}
        return sorted({name.word for name in named} - known)

    def _entries_named(self, asked: str, found: Sequence[Passage]) -> list[Passage]:
        """The entries of the names ``asked`` gives ("os.tmpdir()", "--watch") that the search
        did not find, at most ``PASSAGES_USED``: a Japanese question names the option and says
        the rest in words no English passage holds, so the search may rank its neighbours
        ("--watch-path") above it."""
        # a call, an option, a setting: not a file type (".mjs") or a version ("3.12")
        names = [name for name in entry_names(asked) if NAME_START_RE.match(name)]
        seen = {_section_text(p) for p in found}
        entries: list[Passage] = []
        for name in names:
            for passage in self.kb.headed(name.lower(), ENTRY_CANDIDATES):
                if _section_text(passage) not in seen and is_entry_of(passage, names):
                    seen.add(_section_text(passage))
                    entries.append(passage)
        return entries[:PASSAGES_USED]

    def _with_opening(
        self, asked: str, passages: list[Passage], described: Passage | None
    ) -> list[Passage]:
        """``passages`` after their article's opening when the question names what the article
        is about, as its title gives it ("http.server — HTTP servers"): a module's page says
        what matters most of it first ("http.server is not recommended for production"); or
        after ``described``, a command's description, when asked what the command does."""
        title = passages[0].title
        if " \u2014 " in title:
            subject = title.split(" \u2014 ", 1)[0].strip().lower()
            opening = self.kb.opening(passages[0].url) if _names(asked, subject) else None
        else:
            opening = described
        if opening is None or any(p.text == opening.text for p in passages):
            return passages
        return [opening, *passages][:PASSAGES_USED]

    def _description(self, asked: str, passages: Sequence[Passage]) -> Passage | None:
        """The description of the command whose page (``cargo-yank(1)``) answers ``asked``,
        when it asks what the command does: the first of the page's opening sections said in
        sentences, not its NAME or SYNOPSIS line; else None."""
        title = passages[0].title
        if not ASKS_WHAT_IT_DOES_RE.search(asked) or command_title(title) not in command_titles(
            asked
        ):
            return None
        openings = self.kb.openings(passages[0].url, DESCRIPTION_WITHIN)
        return next((p for p in openings if _says(p)), None)

    def _referred_page(self, quote: str) -> list[Passage]:
        """The first passages of the page a quote only points to ("See Cargo.toml vs
        Cargo.lock.", a glossary's entry naming the page that explains it), when the site has
        a page of that title; else []."""
        if not (see := SEE_PAGE_RE.fullmatch(quote.strip())):
            return []
        title = see.group(1).strip().lower()
        titled = [p for p in self.kb.headed(title, ENTRY_CANDIDATES) if p.title.lower() == title]
        return titled[:PASSAGES_USED]

    def _unknown_commands(self, asked: str) -> list[str]:
        """The commands ``asked`` runs ("with npm deploy") that a site documenting its tool's
        commands a page each (``COMMAND_PAGES`` of them or more) never mentions."""
        unknown = []
        for tool, command in commands(asked):
            forms = [f"{tool} {command}", f"{tool}-{command}"]
            if self.kb.command_pages(tool) >= COMMAND_PAGES and not self.kb.mentions(forms):
                unknown.append(forms[0])
        return unknown

    def _nearness(self, question: str, texts: Sequence[str]) -> list[float]:
        """Each text's cosine to the question, by the search's encoder."""
        vectors = self.kb.embedder.embed([question, *texts])
        return [float(v @ vectors[0]) for v in vectors[1:]]

    def _model_writes(self, question: str, language: Language) -> bool:
        """Whether the model writes the answer, or the quote stands alone (step 6)."""
        if language not in self.settings.model_languages:
            return False
        return self.settings.model_answers_yes_no or not is_yes_no_question(question)


def _with_rest_of_page(passages: list[Passage], found: list[Passage]) -> list[Passage]:
    """``passages``, then the others of their page the search found: across languages the
    question's words cannot rank a page's sections, so the search's order cut the answering
    one ("cargo yank を取り消すには": ``--undo``, the page's fourth) from the three a model
    would read, and the quote may come from any of them."""
    held = {_section_text(p) for p in passages}
    rest = [p for p in found if p.url == passages[0].url and _section_text(p) not in held]
    return [*passages, *rest]


def _with_quoted_section(
    passages: list[Passage], quoted: list[Passage], evidence: Evidence
) -> list[Passage]:
    """The passage quoted first when the quote came from past ``passages`` (the rest of the
    page, ``_with_rest_of_page``): the sources list it first, where the reader checks the
    quote, and a model reads it. A long section is several passages under one link: the one
    holding the quote's words."""
    holding = [p for p in quoted if p.link == evidence.link and _holds(p, evidence.quote)]
    if not holding or _section_text(holding[0]) in {_section_text(p) for p in passages}:
        return passages
    return [holding[0], *passages][:PASSAGES_USED]


def _section_text(passage: Passage) -> tuple[str, str, str]:
    """What makes two passages the same: a copy from another lookup (an opening, an entry)
    differs in its scores only."""
    return passage.url, passage.heading, passage.text


def _holds(passage: Passage, quote: str) -> bool:
    """Whether ``passage`` holds the quote's first words (after an entry's name the quote
    may begin with, "--undo — Undo a yank…"), spaces aside."""
    said = " ".join(quote.rsplit(" — ", 1)[-1].split())[:QUOTE_PROBE_CHARS].rstrip("…")
    return said in " ".join(passage.text.split())


def _not_on_site(language: Language, found: list[Passage]) -> Plan:
    """The plan that says the site does not answer, in the question's language; the nearest
    sections ``found`` still point a newcomer somewhere."""
    words = WORDING[language]
    nearest = format_nearest(words.nearest, found)
    return Plan("not_on_site", language, note=f"{words.not_on_site}\n\n{nearest}".strip())


def _only_names(asked: str, page: Passage) -> bool:
    """Whether ``asked`` says nothing but the name of the command ``page`` documents ("What
    does cargo build do?", not "What does npm ci do if package.json and package-lock.json do
    not match?", which its description does not answer)."""
    name = command_title(page.title).replace("-", " ")
    return all(need.optional or met(need, name) for need in question_needs(asked))


def _says(passage: Passage) -> bool:
    """Whether ``passage`` holds a sentence, not only names and lines ("cargo-yank — Remove a
    pushed crate from the index", "cargo yank [options] crate@version")."""
    return any(s.endswith(tuple(SENTENCE_ENDS)) for s in split_sentences(passage.text))


def _names(question: str, subject: str) -> bool:
    """Whether ``question`` names ``subject`` as a word of its own ("http.server", not the
    "server" of "http.server" or "servers")."""
    pattern = rf"(?<![A-Za-z0-9_.]){re.escape(subject)}(?![A-Za-z0-9_]|\.[A-Za-z0-9_])"
    return re.search(pattern, question.lower()) is not None
