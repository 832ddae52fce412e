"""``concierge kb stats`` and ``concierge kb search``: what the bot knows, for an operator.

They read the knowledge base file directly (read-only), so they work with the engine stopped.
``CONCIERGE_KB_PATH`` is relative to the current directory by default: the path shown is the
absolute one, and a missing file is said to be missing rather than shown as empty. ``stats``
also reads the feedback database (``CONCIERGE_FEEDBACK_PATH``, read-only, never created here):
the articles whose answers got the most 👎, so an admin sees which pages produce bad answers.

Both fit a pipe: ``--json`` prints one JSON document (its shape is in the README, "kb
commands"), and the tables, when stdout is not a terminal, are never cut to a width.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from config.settings import Settings
from config.text_helpers import shorten
from engine.feedback.store import FeedbackReport, read_report
from engine.health import iso_utc
from engine.knowledge.models import Passage
from engine.knowledge.store import KnowledgeBase

NOT_FOUND_HINT = "run this where the engine runs, or build it with 'concierge rescrape'"
EXCERPT_CHARS = 300
MOST_DOWNVOTED_SHOWN = 10
# In a pipe rich would assume 80 columns and cut a long address to "http://…/arti…": wide
# enough that a line is as long as its longest cell, and nothing is cut or wrapped.
PIPE_WIDTH = 100_000


def output_console() -> Console:
    """Rich fitted to the terminal; in a pipe or a file, never cutting a line.

    The same table either way (rather than tab-separated lines in a pipe): what a person
    reads at the terminal is what ``grep`` or ``less`` gets, and ``--json`` is the form
    for programs."""
    console = Console(soft_wrap=True)
    return console if console.is_terminal else Console(soft_wrap=True, width=PIPE_WIDTH)


def kb_stats(settings: Settings, *, as_json: bool = False) -> int:
    path = settings.kb_path.resolve()
    feedback_path = settings.feedback_path.resolve()
    report = read_report(feedback_path, MOST_DOWNVOTED_SHOWN)
    kb = KnowledgeBase(path)
    if as_json:
        _print_json(stats_document(kb, feedback_path, report))
        return 0 if _existing(path, None) else 1
    console = output_console()
    if _existing(path, console):
        console.print(f"[bold]{escape(str(path))}[/]: {kb.stats().text}")
    _print_votes(console, feedback_path, report, kb)
    return 0 if path.exists() else 1


def stats_document(
    kb: KnowledgeBase, feedback_path: Path, report: FeedbackReport | None
) -> dict[str, Any]:
    """``kb stats --json``: the knowledge base's counts and the most 👎 articles."""
    stats = kb.stats()
    downvoted = report.most_downvoted if report is not None else []
    titles = kb.titles([article.url for article in downvoted])
    return {
        "knowledge_base": {
            "path": str(kb.path),
            "exists": kb.path.exists(),
            "articles": stats.articles,
            "passages": stats.passages,
            "last_rescrape": iso_utc(stats.last_rescrape_at),
            "bytes": stats.db_bytes,
        },
        "feedback": {
            "path": str(feedback_path),
            "votes": report.votes if report is not None else 0,
            "most_downvoted": [
                {
                    "url": article.url,
                    "title": titles.get(article.url),
                    "down": article.down,
                    "up": article.up,
                    "answers": article.answers,
                }
                for article in downvoted
            ],
        },
    }


def _print_votes(
    console: Console, path: Path, report: FeedbackReport | None, kb: KnowledgeBase
) -> None:
    """The most 👎 articles, or plainly why there are none to show."""
    where = escape(f"in {path} (CONCIERGE_FEEDBACK_PATH)")
    if report is None or not report.votes:
        console.print(f"feedback: no votes yet {where}")
        return
    votes = f"{report.votes} vote{'s' * (report.votes != 1)}"
    if not report.most_downvoted:
        console.print(f"feedback: {votes} {where}, and no 👎 on an article an answer cited")
        return
    console.print(f"feedback: {votes} {where}; the articles with the most 👎:")
    titles = kb.titles([article.url for article in report.most_downvoted])
    table = Table("article", "👎", "👍", "answers\nciting it")
    for article in report.most_downvoted:
        title = titles.get(article.url)
        shown = f"{escape(title)}\n{escape(article.url)}" if title else escape(article.url)
        table.add_row(shown, str(article.down), str(article.up), str(article.answers))
    console.print(table)


def kb_search(settings: Settings, words: str, limit: int = 5, *, as_json: bool = False) -> int:
    path = settings.kb_path.resolve()
    console = None if as_json else output_console()
    passages = KnowledgeBase(path).search(words, limit) if _existing(path, console) else []
    if console is None:
        found = [passage_document(passage) for passage in passages]
        _print_json({"path": str(path), "words": words, "passages": found})
    elif passages:
        _print_passages(console, passages)
    elif path.exists():
        console.print("no passage matches")
    return 0 if passages else 1


def passage_document(passage: Passage) -> dict[str, Any]:
    """One passage of ``kb search --json``: whole, with the addresses of its section and
    article."""
    return {
        "similarity": round(passage.similarity, 4),
        "title": passage.title,
        "heading": passage.heading,
        "url": passage.link,
        "article_url": passage.url,
        "text": passage.text,
    }


def _print_passages(console: Console, passages: list[Passage]) -> None:
    table = Table("meaning\n(cosine, higher\nis closer)", "section", "passage", show_lines=True)
    for passage in passages:
        excerpt = shorten(passage.text, EXCERPT_CHARS)
        where = f"{passage.heading or passage.title}\n{passage.link}"
        table.add_row(f"{passage.similarity:.2f}", escape(where), escape(excerpt))
    console.print(table)


def _print_json(document: dict[str, Any]) -> None:
    print(json.dumps(document, ensure_ascii=False, indent=2))


def _existing(path: Path, console: Console | None) -> bool:
    """Whether the knowledge base file is there; when not, said on ``console`` (on stderr
    when None: stdout then carries JSON only)."""
    if path.exists():
        return True
    message = f"no knowledge base at {path} (CONCIERGE_KB_PATH); {NOT_FOUND_HINT}"
    if console is None:
        print(message, file=sys.stderr)
    else:
        console.print(escape(message))
    return False
