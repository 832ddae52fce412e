"""``concierge kb stats`` and ``concierge kb search``: what the bot knows, for an operator.

They read the knowledge base file directly (read-only), so they work with the engine stopped.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from config.settings import Settings
from engine.knowledge import KnowledgeBase


def kb_stats(settings: Settings) -> int:
    stats = KnowledgeBase(settings.kb_path).stats()
    Console(soft_wrap=True).print(f"[bold]{settings.kb_path}[/]: {stats.text}")
    return 0


def kb_search(settings: Settings, words: str, limit: int = 5) -> int:
    passages = KnowledgeBase(settings.kb_path).search(words, limit)
    console = Console()
    if not passages:
        console.print("no passage matches")
        return 1
    table = Table("score", "article", "passage", show_lines=True)
    for passage in passages:
        excerpt = passage.text if len(passage.text) < 300 else passage.text[:300] + "…"
        table.add_row(f"{passage.score:.2f}", f"{passage.title}\n{passage.url}", excerpt)
    console.print(table)
    return 0
