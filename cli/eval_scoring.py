"""What ``concierge eval`` reads (one question per line) and how it judges each answer.

Pure functions over the reply that came back, so the rules can be read and tested without an
engine. See docs/quality.md for the file format and what each figure means.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from broker.protocol import MAX_HISTORY_TURNS
from cli.eval_site import SiteRule
from config.errors import EXIT_USAGE, ConciergeError
from engine.answering.numbers import NUMBER_RE, number_key
from engine.answering.wording import WORDING
from engine.generation.repetition import RepetitionDetector

# How the engine says the site does not answer a question, besides ``done.not_on_site``: the
# fixed sentences of phase 2 of issue 14, and the usual ways a model says it, in both languages.
NOT_ON_SITE_PHRASES = (
    "not on the site",
    "site does not cover",
    "site doesn't cover",
    "not covered",
    "i don't know",
    "i do not know",
    "does not say",
    "doesn't say",
    "no information",
    "not mentioned",
    "could not find",
    "couldn't find",
    "サイトには載っていません",
    "載っていません",
    "のっていません",
    "わかりません",
    "分かりません",
    "情報がありません",
    "見つかりません",
    "記載がありません",
)
SOURCES_HEADING = "Sources:"  # engine/answering/passages.py format_sources: "- Title <url>"
ADDRESS_RE = re.compile(r"<(https?://[^>\s]+)>")
CUT_REASONS = frozenset({"length", "repetition"})  # done.finish_reason of a cut answer
# Where the engine's quote of the article begins (engine/answering/wording.py, "From the site:
# ..."):
# what comes before it is the model's own words.
EVIDENCE_MARKERS = tuple(wording.evidence.split("{quote}")[0] for wording in WORDING.values())
# ... or the engine's sentence saying the model's words were left out (numbers.py): none of
# them is in the answer, so there are no own words to judge.
WITHDRAWN_MARKERS = tuple(text for wording in WORDING.values() for text in wording.withdrawals)
# Text split roughly as a tokenizer would (a Latin word with its space, a digit, any other
# character: a kana or a kanji), for noticing repetition when the engine does not report it.
APPROXIMATE_TOKEN_RE = re.compile(r"\s*[A-Za-z\u00c0-\u024f]+|\s*\d|\s*\S|\s+")


class CaseFileError(ConciergeError):
    """The questions file cannot be used; the message names the file and the line."""

    exit_code = EXIT_USAGE  # a bad input, as a bad command line is


class Case(BaseModel):
    """One line of the questions file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=100)
    question: str = Field(min_length=1)
    expect_any: tuple[str, ...] = ()  # a right answer contains one (case-insensitive)
    expect_source: str | None = None  # a substring of the address it must cite
    not_on_site: bool = False  # the right answer says the site does not cover it
    must_not: tuple[str, ...] = ()  # never in any answer
    # Earlier questions of the same conversation, asked first (not judged): this one is a
    # follow-up, sent with them and their answers as its history.
    before: tuple[str, ...] = Field((), max_length=MAX_HISTORY_TURNS // 2)

    @model_validator(mode="after")
    def _expectations_fit(self) -> Case:
        if self.not_on_site and (self.expect_any or self.expect_source):
            raise ValueError("a not_on_site question expects no answer and no source")
        if not self.not_on_site and not self.expect_any:
            raise ValueError("expect_any is empty: nothing would count as a right answer")
        return self


@dataclass(frozen=True)
class Reply:
    """How one question ended, as the client saw it."""

    outcome: str  # "done", "cancelled", "failed", "expired", "timeout" or "refused"
    text: str  # the whole message: the answer and what the engine appended
    tokens: int = 0
    ttft_s: float | None = None  # the engine's time to first token
    elapsed_s: float | None = None  # the engine's time on it (prompt and answer)
    wall_s: float = 0.0  # from asking to the end, queue and broker included
    finish_reason: str = "stop"  # done's: "stop", "length" (the token cap) or "repetition"
    sources: tuple[str, ...] = ()  # done's: the addresses the answer used
    not_on_site: bool = False  # done's: the knowledge base does not cover the question
    reason: str = ""  # why it failed


class Result(BaseModel):
    """One question's verdict: a line of the table, an item of the JSON document."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    not_on_site: bool
    outcome: str
    answer: str
    correct: bool
    cited: list[str]
    right_source: bool | None  # None: the question names no source
    leaks: list[str] | None  # cited addresses off the space's site; None: it names no site
    said_not_on_site: bool
    looped: bool
    must_not_found: list[str]
    own_words_right: bool | None  # the model's words alone hold the answer; None: it wrote none
    unquoted_numbers: list[str]  # numbers in the model's words found neither quoted nor asked
    tokens: int
    ttft_s: float | None
    elapsed_s: float | None
    wall_s: float


class Summary(BaseModel):
    model_config = ConfigDict(frozen=True)

    questions: int
    right_or_honest: int
    right_or_honest_rate: float
    right_source: int
    right_source_of: int
    right_source_rate: float
    invented: int  # not_on_site questions answered as if the site said
    not_on_site_questions: int
    missed: int  # answerable questions answered "not on the site"
    own_words_right: int  # answers whose model's words alone hold the answer...
    own_words_of: int  # ...of the answerable questions the model wrote words for
    unquoted_numbers: int  # answers whose model's words hold a number neither quoted nor asked
    leaks: int | None  # answers citing an address off the space's site; None: not judged
    loops: int
    failed: int  # no answer at all: failed, expired, timed out, refused
    engine_s_total: float
    engine_s_per_answer_median: float | None
    engine_s_per_model_answer_median: float | None  # of the answers the model wrote words for
    wall_s_total: float


def load_cases(path: Path) -> list[Case]:
    """Every question of a JSONL file; ``CaseFileError`` names the first bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise CaseFileError(f"{path}: cannot read it ({error})") from None
    cases: list[Case] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        case = _parse_line(path, number, line)
        if case.id in seen:
            raise CaseFileError(f"{path}:{number}: the id {case.id!r} is used twice")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise CaseFileError(f"{path}: no questions in it")
    return cases


def _parse_line(path: Path, number: int, line: str) -> Case:
    try:
        return Case.model_validate(json.loads(line))
    except json.JSONDecodeError as error:
        raise CaseFileError(f"{path}:{number}: not a JSON object: {error.msg}") from None
    except ValidationError as error:
        issue = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in issue["loc"])
        reason = f"{where}: {issue['msg']}" if where else issue["msg"]
        raise CaseFileError(f"{path}:{number}: {reason}") from None


def judge(case: Case, reply: Reply, max_tokens: int, site: SiteRule | None = None) -> Result:
    """The verdict on one reply; ``max_tokens`` is the engine's cap (CONCIERGE_MAX_TOKENS),
    ``site`` the space's site its sources must be on (cli/eval_site.py)."""
    answer, listed = split_sources(reply.text)
    cited = list(reply.sources) or listed
    lowered = answer.lower()
    said_not_on_site = reply.not_on_site or says_not_on_site(without_withdrawal(answer))
    refused = said_not_on_site and not cited
    must_not_found = [text for text in case.must_not if text.lower() in lowered]
    if case.not_on_site:
        correct = refused and not must_not_found
    else:
        # a refusal is never right, though the nearest sections it points to may name the
        # answer ("- OS > os.cpus() <…#oscpus>" for "how many processors…")
        expected = any(text.lower() in lowered for text in case.expect_any)
        correct = reply.outcome == "done" and not refused and expected and not must_not_found
    return Result(
        id=case.id,
        question=case.question,
        not_on_site=case.not_on_site,
        outcome=reply.outcome if not reply.reason else f"{reply.outcome}: {reply.reason}",
        answer=answer,
        correct=correct,
        cited=cited,
        right_source=_right_source(case, cited),
        leaks=site.leaks(cited) if site is not None else None,
        said_not_on_site=said_not_on_site,
        looped=looped(reply, answer, max_tokens),
        must_not_found=must_not_found,
        own_words_right=_own_words_right(case, reply, answer),
        unquoted_numbers=unquoted_numbers(case, answer) if reply.tokens else [],  # no model
        tokens=reply.tokens,
        ttft_s=reply.ttft_s,
        elapsed_s=reply.elapsed_s,
        wall_s=reply.wall_s,
    )


def split_sources(text: str) -> tuple[str, list[str]]:
    """(the answer, the addresses it cites): the engine appends "Sources:" and one
    "- Title <address>" line per article after the answer."""
    head, heading, tail = text.rpartition("\n" + SOURCES_HEADING + "\n")
    if not heading:
        return text.strip(), []
    return head.strip(), list(dict.fromkeys(ADDRESS_RE.findall(tail)))


def without_withdrawal(answer: str) -> str:
    """``answer`` without the engine's sentence saying the model's words were left out
    ("…a number that is not on the site."): the answer is the quote after it, not a refusal."""
    for marker in WITHDRAWN_MARKERS:
        answer = answer.replace(marker, "")
    return answer


def says_not_on_site(answer: str) -> bool:
    lowered = answer.lower()
    return any(phrase in lowered for phrase in NOT_ON_SITE_PHRASES)


def looped(reply: Reply, answer: str, max_tokens: int) -> bool:
    """Cut for repetition or at the token cap, as ``done`` says; or, for an engine that does
    not say (its ``finish_reason`` is always "stop"), an answer at the cap or holding a
    repetition. ``tokens`` counts text pieces: Japanese reaches the cap with fewer pieces
    than tokens, so the count alone misses it."""
    if reply.finish_reason in CUT_REASONS:
        return True
    return reply.tokens >= max_tokens or repeats_itself(answer)


def repeats_itself(text: str) -> bool:
    detector = RepetitionDetector()
    return any(detector.feed(piece) for piece in APPROXIMATE_TOKEN_RE.findall(text))


def own_words(answer: str) -> str:
    """The answer before the engine's quote of the article: what the model wrote."""
    return answer[: _quote_start(answer)].strip()


def _quote_start(answer: str) -> int:
    markers = (*WITHDRAWN_MARKERS, *EVIDENCE_MARKERS)
    return min((answer.find(m) for m in markers if m in answer), default=len(answer))


def unquoted_numbers(case: Case, answer: str) -> list[str]:
    """Numbers in the model's words that are in neither the engine's quote after them nor
    the questions: most likely invented ("a session can last from 12 hours (3 days) to 48
    hours" above a quote that says 60 minutes). A proxy: the article may hold such a number
    outside the quote; the quote alone is what the reader can check. An address (``<http…>``,
    the sections pointed to after "not on the site") claims nothing."""
    start = _quote_start(answer)
    given = " ".join((answer[start:], case.question, *case.before))
    seen = {number_key(n) for n in NUMBER_RE.findall(given)}
    found = [number_key(n) for n in NUMBER_RE.findall(ADDRESS_RE.sub("", answer[:start]))]
    return list(dict.fromkeys(n for n in found if n not in seen))


def _own_words_right(case: Case, reply: Reply, answer: str) -> bool | None:
    """For an answerable question the model answered: its words hold an expected text and no
    forbidden one (the quote after them is the article's, not the model's)."""
    words = own_words(answer).lower()
    if case.not_on_site or reply.outcome != "done" or not reply.tokens or not words:
        return None
    expected = any(text.lower() in words for text in case.expect_any)
    return expected and not any(text.lower() in words for text in case.must_not)


def _right_source(case: Case, cited: list[str]) -> bool | None:
    """Cites nothing for a question the site does not answer; else cites the expected
    article and no other (an unrelated source misleads as much as a missing one)."""
    if case.not_on_site:
        return not cited
    if case.expect_source is None:
        return None
    return bool(cited) and all(case.expect_source in address for address in cited)


def summarize(results: Sequence[Result]) -> Summary:
    judged_sources = [r.right_source for r in results if r.right_source is not None]
    answered = [r.elapsed_s for r in results if r.elapsed_s is not None]
    written = [r.elapsed_s for r in results if r.elapsed_s is not None and r.tokens]
    not_on_site = [r for r in results if r.not_on_site]
    return Summary(
        questions=len(results),
        right_or_honest=sum(r.correct for r in results),
        right_or_honest_rate=_rate(sum(r.correct for r in results), len(results)),
        right_source=sum(judged_sources),
        right_source_of=len(judged_sources),
        right_source_rate=_rate(sum(judged_sources), len(judged_sources)),
        invented=sum(1 for r in not_on_site if r.outcome == "done" and not r.said_not_on_site),
        not_on_site_questions=len(not_on_site),
        missed=sum(1 for r in results if not r.not_on_site and r.said_not_on_site),
        own_words_right=sum(r.own_words_right is True for r in results),
        own_words_of=sum(r.own_words_right is not None for r in results),
        unquoted_numbers=sum(bool(r.unquoted_numbers) for r in results),
        leaks=None
        if any(r.leaks is None for r in results)
        else sum(bool(r.leaks) for r in results),
        loops=sum(r.looped for r in results),
        failed=sum(1 for r in results if not r.outcome.startswith("done")),
        engine_s_total=round(sum(answered), 3),
        engine_s_per_answer_median=_median(answered),
        engine_s_per_model_answer_median=_median(written),
        wall_s_total=round(sum(r.wall_s for r in results), 3),
    )


def _median(seconds: Sequence[float]) -> float | None:
    return round(statistics.median(seconds), 3) if seconds else None


def _rate(count: int, total: int) -> float:
    return round(count / total, 3) if total else 0.0
