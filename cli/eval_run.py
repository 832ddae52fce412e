"""Running ``concierge eval``: each question through the real pipeline, then the report.

It asks the running engine through the broker, as ``concierge ask`` does, one question at a
time (so each answer's seconds are its own), in one space: each answer's sources are checked
against that space's site (``cli/eval_site.py``), and one off it is a leak. The questions and
the verdicts are ``cli/eval_scoring.py``'s; the command line is ``cli/eval.py``'s.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bots.ask import Ask
from bots.client import AskRefused, ConciergeClient
from bots.session import ReplyTimeout, Session
from bots.terminal.chat import one_off
from broker.answer_text import SOURCES_RE
from broker.peek import peek_queues
from broker.protocol import Cancelled, Done, Expired, Failed, HistoryTurn, Names
from cli.eval_scoring import (
    Case,
    CaseFileError,
    Reply,
    Result,
    Summary,
    judge,
    load_cases,
    summarize,
)
from cli.eval_site import SiteRule, site_rule
from config.settings import Settings
from config.spaces import DEFAULT_SPACE, Space, load_spaces
from config.text_helpers import shorten

EXIT_OK = 0
EXIT_BAD_INPUT = 2  # as argparse exits for a bad command line
EXIT_NO_ENGINE = 69  # EX_UNAVAILABLE
ASKER = "concierge-eval"
ANSWER_PREVIEW_CHARS = 60


@dataclass(frozen=True)
class EvalOptions:
    """Where to ask and which questions: ``space`` None is the terminal's space (as for
    ``concierge ask``); ``other_site``: the file is another site's, so each question is judged
    as one this site does not answer; ``first``: only that many questions of the file."""

    space: str | None = None
    other_site: bool = False
    first: int | None = None


async def run_eval(
    settings: Settings, path: Path, *, as_json: bool = False, options: EvalOptions | None = None
) -> int:
    """Raises ``UnknownSpace`` (exit 2) for a space the spaces file does not have."""
    options = options or EvalOptions()
    err = Console(stderr=True, soft_wrap=True)
    try:
        cases = chosen_cases(load_cases(path), options)
    except CaseFileError as error:
        err.print(f"concierge eval: {error}", markup=False, highlight=False)
        return EXIT_BAD_INPUT
    spaces = load_spaces(settings)
    space = spaces.named(options.space or spaces.space_for_place("terminal"))
    missing = await no_engine(settings)
    if missing:
        err.print(f"concierge eval: {missing}", markup=False, highlight=False)
        return EXIT_NO_ENGINE
    site = site_rule(space.settings)
    results = await ask_all(settings, cases, err, space.name, site)
    summary = summarize(results)
    if as_json:
        document = {
            "space": space.name,
            "site": list(site.prefixes) if site is not None else None,
            "other_site": options.other_site,
            "results": [r.model_dump() for r in results],
            "summary": summary.model_dump(),
        }
        sys.stdout.write(_json(document) + "\n")
    else:
        print_report(results, summary, Console(soft_wrap=True))
    say_leaks(results, space, site, err)
    return EXIT_OK


def chosen_cases(cases: list[Case], options: EvalOptions) -> list[Case]:
    """The first ``options.first`` cases; with ``other_site``, each turned into a question the
    site does not answer (nothing expected, nothing cited, its ``before`` kept)."""
    cases = cases[: options.first]
    if not options.other_site:
        return cases
    return [Case(id=c.id, question=c.question, not_on_site=True, before=c.before) for c in cases]


def say_leaks(results: list[Result], space: Space, site: SiteRule | None, err: Console) -> None:
    """A run with a leak says so on stderr, the table or the JSON aside: each leaked answer
    and the addresses off the site. With no site to judge by, says that instead."""
    if site is None:
        err.print(f"concierge eval: leaks not judged: space {space.name!r} names no site")
        return
    leaked = [result for result in results if result.leaks]
    if not leaked:
        return
    err.print(
        f"[bold red]LEAK: {len(leaked)} of {len(results)} answers in space {space.name!r} "
        f"cite addresses off its site ({', '.join(site.prefixes)}):[/]",
        highlight=False,
    )
    for result in leaked:
        err.print(f"  {result.id}: {' '.join(result.leaks or [])}", markup=False, highlight=False)


async def no_engine(settings: Settings) -> str | None:
    """Why no answer would come (no engine consumes the request queue), else None."""
    queue = Names(settings.prefix).request_queue
    (peek,) = await peek_queues(settings, [queue])
    if peek.state == "ok" and peek.consumers:
        return None
    return (
        f"no engine takes requests from the queue {queue!r}: start one "
        "(`concierge engine`) with the same CONCIERGE_PREFIX and broker"
    )


async def ask_all(
    settings: Settings,
    cases: list[Case],
    err: Console,
    space: str = DEFAULT_SPACE,
    site: SiteRule | None = None,
) -> list[Result]:
    """Each question in turn in ``space``, a line on stderr as each is judged."""
    results: list[Result] = []
    async with ConciergeClient(one_off(settings), "eval") as client:
        for number, case in enumerate(cases, start=1):
            history = await conversation_before(client, case.before, space)
            reply = await ask_one(client, case.question, history, space)
            result = judge(case, reply, settings.max_tokens, site)
            results.append(result)
            seconds = f"{result.elapsed_s:.1f} s" if result.elapsed_s is not None else "-"
            err.print(
                f"[dim][{number}/{len(cases)}] {case.id}: {_verdict(result)} · {seconds}[/]",
                highlight=False,
            )
    return results


async def conversation_before(
    client: ConciergeClient, questions: Sequence[str], space: str = DEFAULT_SPACE
) -> tuple[HistoryTurn, ...]:
    """Ask a follow-up's earlier questions in turn, each with the ones before; the history
    they make, each answer as a bot sends it back (without its sources list)."""
    history: tuple[HistoryTurn, ...] = ()
    for question in questions:
        reply = await ask_one(client, question, history, space)
        answer = SOURCES_RE.sub("", reply.text).strip()
        history += (HistoryTurn(role="user", text=question),)
        if answer:
            history += (HistoryTurn(role="assistant", text=answer),)
    return history


async def ask_one(
    client: ConciergeClient,
    question: str,
    history: tuple[HistoryTurn, ...] = (),
    space: str = DEFAULT_SPACE,
) -> Reply:
    started = time.monotonic()
    try:
        session = await client.ask(Ask(question, ASKER, history=history, space=space))
    except AskRefused as refusal:
        return Reply("refused", "", reason=str(refusal))
    try:
        end = await _terminal_event(session)
    except ReplyTimeout as error:
        return Reply("timeout", "", wall_s=time.monotonic() - started, reason=str(error))
    finally:
        client.forget(session)
    return _reply(end, time.monotonic() - started)


async def _terminal_event(session: Session) -> Done | Cancelled | Failed | Expired:
    while True:
        item = await session.next_item()
        if isinstance(item, Done | Cancelled | Failed | Expired):
            return item


def _reply(end: Done | Cancelled | Failed | Expired, wall_s: float) -> Reply:
    match end:
        case Done():
            return Reply(
                "done",
                end.text,
                tokens=end.tokens,
                ttft_s=end.ttft_s,
                elapsed_s=end.elapsed_s,
                wall_s=wall_s,
                finish_reason=end.finish_reason,
                sources=end.sources,
                not_on_site=end.not_on_site,
            )
        case Cancelled():
            return Reply("cancelled", end.text, tokens=end.tokens, wall_s=wall_s)
        case Failed():
            return Reply("failed", end.text, wall_s=wall_s, reason=end.reason)
        case Expired():
            return Reply("expired", "", wall_s=wall_s, reason=end.reason)


def _verdict(result: Result) -> str:
    if result.not_on_site:
        return "honest" if result.correct else "invented"
    if result.correct:
        return "right"
    return "said not on the site" if result.said_not_on_site else "wrong"


def print_report(results: list[Result], summary: Summary, console: Console) -> None:
    table = Table()
    widest_id = max(len(result.id) for result in results)
    table.add_column("question", no_wrap=True, min_width=widest_id)
    columns = (("verdict", 8), ("source", 6), ("leak", 4), ("loop", 4), ("tokens", 6))
    for name, width in (*columns, ("engine s", 8)):
        table.add_column(name, no_wrap=True, min_width=width)
    table.add_column("answer")  # what width is left, wrapped
    for result in results:
        table.add_row(
            result.id,
            _verdict(result),
            {True: "right", False: "wrong", None: "-"}[result.right_source],
            _leak(result),
            "loop" if result.looped else "",
            str(result.tokens),
            f"{result.elapsed_s:.1f}" if result.elapsed_s is not None else "-",
            _preview(result.answer),
        )
    console.print(table)
    for line in summary_lines(summary):
        console.print(line, highlight=False, markup=False)


def summary_lines(summary: Summary) -> list[str]:
    median, written = summary.engine_s_per_answer_median, summary.engine_s_per_model_answer_median
    return [
        f"right or honest: {summary.right_or_honest}/{summary.questions} "
        f"({summary.right_or_honest_rate:.0%})",
        f"right source: {summary.right_source}/{summary.right_source_of} "
        f"({summary.right_source_rate:.0%})",
        f"invented answers to not-on-site questions: {summary.invented}/"
        f"{summary.not_on_site_questions}",
        f"answerable questions answered 'not on the site': {summary.missed}",
        f"the model's own words right (before the quote): {summary.own_words_right}/"
        f"{summary.own_words_of} of the answers it wrote",
        f"answers whose model's words hold a number neither quoted nor asked: "
        f"{summary.unquoted_numbers}",
        "leaks (answers citing an address off the space's site): "
        + (str(summary.leaks) if summary.leaks is not None else "not judged (no site)"),
        f"loops (cut for repetition or at the token cap): {summary.loops}",
        f"no answer (failed, expired, timed out): {summary.failed}",
        f"engine seconds: {summary.engine_s_total:.1f} in all, "
        + (f"median {median:.1f} per answer" if median is not None else "no answers")
        + (f", {written:.1f} per answer the model wrote" if written is not None else ""),
    ]


def _leak(result: Result) -> str:
    """ "LEAK" and how many addresses, "" for none, "-" when the space names no site."""
    if result.leaks is None:
        return "-"
    return f"LEAK {len(result.leaks)}" if result.leaks else ""


def _preview(answer: str) -> str:
    return shorten(" ".join(answer.split()), ANSWER_PREVIEW_CHARS)


def _json(document: object) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2)
