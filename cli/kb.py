"""``concierge kb stats`` and ``concierge kb search``: what the bot knows, for an operator.

They read the knowledge base file directly (read-only), so they work with the engine stopped.
``CONCIERGE_KB_PATH`` is relative to the current directory by default: the path shown is the
absolute one, and a missing file is said to be missing rather than shown as empty. ``stats``
also reads the feedback database (``CONCIERGE_FEEDBACK_PATH``, read-only, never created here):
the articles whose answers got the most 👎, so an admin sees which pages produce bad answers.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from config.settings import Settings
from config.text_helpers import shorten
from engine.feedback.store import FeedbackReport, read_report
from engine.knowledge.store import KnowledgeBase

NOT_FOUND_HINT = "run this where the engine runs, or build it with 'concierge rescrape'"
EXCERPT_CHARS = 300
MOST_DOWNVOTED_SHOWN = 10


def kb_stats(settings: Settings) -> int:
    console = Console(soft_wrap=True)
    path = _existing(settings, console)
    if path is not None:
        console.print(f"[bold]{escape(str(path))}[/]: {KnowledgeBase(path).stats().text}")
    feedback_path = settings.feedback_path.resolve()
    report = read_report(feedback_path, MOST_DOWNVOTED_SHOWN)
    _print_votes(console, feedback_path, report, KnowledgeBase(settings.kb_path.resolve()))
    return 0 if path is not None else 1


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


def kb_search(settings: Settings, words: str, limit: int = 5) -> int:
    console = Console()
    path = _existing(settings, console)
    if path is None:
        return 1
    passages = KnowledgeBase(path).search(words, limit)
    if not passages:
        console.print("no passage matches")
        return 1
    table = Table("meaning\n(cosine, higher\nis closer)", "section", "passage", show_lines=True)
    for passage in passages:
        excerpt = shorten(passage.text, EXCERPT_CHARS)
        where = f"{passage.heading or passage.title}\n{passage.link}"
        table.add_row(f"{passage.similarity:.2f}", escape(where), escape(excerpt))
    console.print(table)
    return 0


def _existing(settings: Settings, console: Console) -> Path | None:
    """The knowledge base's absolute path, or None (said on ``console``) when there is none."""
    path = settings.kb_path.resolve()
    if path.exists():
        return path
    console.print(f"no knowledge base at {path} (CONCIERGE_KB_PATH); {NOT_FOUND_HINT}")
    return None
