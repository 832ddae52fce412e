"""Reading the knowledge base: search and stats.

Every call opens its own read-only connection, so a ``KnowledgeBase`` can be shared by
threads, and a call made after a rescrape's switch reads the new file.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path

from config.texts import t
from engine.knowledge.models import KbStats, Passage
from engine.knowledge.query import Query, parse_query
from engine.knowledge.schema import (
    BODY_WEIGHT,
    HEADING_WEIGHT,
    TITLE_WEIGHT,
    has_current_schema,
    open_readonly,
)

# After a general answer given before the first rescrape: it says the answer is not the site's
# (in English; engine/answering/wording.py picks the question's language).
NO_ARTICLES_MESSAGE = t("engine.answer.no_articles", "en")

COLUMNS = "title, url, body, heading, anchor"
MATCH_SQL = f"""
SELECT {COLUMNS}, -bm25(passages, {TITLE_WEIGHT}, {HEADING_WEIGHT}, {BODY_WEIGHT}) AS score
FROM passages WHERE passages MATCH ? ORDER BY score DESC LIMIT ?
"""
# instr(), not LIKE: FTS5's trigram LIKE shortcut misses two-character CJK patterns.
SUBSTRING_SQL = f"""
SELECT {COLUMNS}, 0.0 FROM (
    SELECT {COLUMNS}, {{hits}} AS hits FROM passages
) WHERE hits > 0 ORDER BY hits DESC LIMIT ?
"""
HIT_SQL = "(instr(lower(title || ' ' || heading || ' ' || body), ?) > 0)"


class KnowledgeBase:
    """The articles of the last successful rescrape, as stored at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def search(self, query: str, limit: int) -> list[Passage]:
        """The best passages for a question, best first; [] when nothing matches."""
        parsed = parse_query(query)
        if limit <= 0 or not self.path.exists():
            return []
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return []
            found = _match(conn, parsed, limit)
            if len(found) < limit and parsed.substrings:
                found += _substring_fill(conn, parsed, limit, found)
        return found

    def stats(self) -> KbStats:
        """Counts for ``concierge kb stats``; zeros before the first rescrape."""
        if not self.path.exists():
            return KbStats(articles=0, passages=0, last_rescrape_at=None, db_bytes=0)
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return KbStats(0, 0, None, self.path.stat().st_size)
            articles = conn.execute("SELECT count(*) FROM articles").fetchone()[0]
            passages = conn.execute("SELECT count(*) FROM passages").fetchone()[0]
            row = conn.execute("SELECT value FROM meta WHERE key = 'rescraped_at'").fetchone()
        return KbStats(
            articles=articles,
            passages=passages,
            last_rescrape_at=datetime.fromisoformat(row[0]) if row else None,
            db_bytes=self.path.stat().st_size,
        )

    def titles(self, urls: list[str]) -> dict[str, str]:
        """The titles of the articles at ``urls`` that the knowledge base holds."""
        if not urls or not self.path.exists():
            return {}
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return {}
            marks = ", ".join("?" * len(urls))
            rows = conn.execute(f"SELECT url, title FROM articles WHERE url IN ({marks})", urls)
            return {url: title for url, title in rows if title}

    def is_empty(self) -> bool:
        """True before the first rescrape: answer with ``NO_ARTICLES_MESSAGE``."""
        return self.stats().articles == 0


def _match(conn: sqlite3.Connection, query: Query, limit: int) -> list[Passage]:
    if not query.match:
        return []
    rows = conn.execute(MATCH_SQL, (query.match, limit)).fetchall()
    return [_passage(row) for row in rows]


def _substring_fill(
    conn: sqlite3.Connection, query: Query, limit: int, found: list[Passage]
) -> list[Passage]:
    """Passages holding the most short terms, for what the trigram index cannot match."""
    sql = SUBSTRING_SQL.format(hits=" + ".join([HIT_SQL] * len(query.substrings)))
    rows = conn.execute(sql, (*query.substrings, limit + len(found))).fetchall()
    seen = {(p.url, p.text) for p in found}
    extra = [_passage(row) for row in rows]
    return [p for p in extra if (p.url, p.text) not in seen][: limit - len(found)]


def _passage(row: tuple[str, str, str, str, str | None, float]) -> Passage:
    title, url, body, heading, anchor, score = row
    return Passage(title, url, body, score, heading, anchor)
