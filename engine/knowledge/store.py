"""Reading the knowledge base: search and stats.

The search is hybrid: the trigram index finds the question's own words (names, numbers,
Japanese), the vectors find its meaning (a paraphrase, a Japanese question about English
pages); the two rankings are fused by reciprocal rank (RRF), which needs no calibration
between two kinds of score. Each passage found carries its cosine with the question, which
the on-site rule reads (engine/answering/on_site.py). Fusion favours a passage both rankings
found: one the words rank first and the meaning far down ("the STRICT keyword at the end of a
CREATE TABLE statement", SQLite's STRICT tables, 92nd by meaning) lost its place to any that
both ranked; the caller may say which of the words' first ones are kept whatever the meaning
(``search``'s ``whole``: those holding every word of the question).

Every call opens its own read-only connection, so a ``KnowledgeBase`` can be shared by
threads, and a call made after a rescrape's switch reads the new file.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from config.texts import t
from engine.knowledge.embedding import Embedder, shared_embedder
from engine.knowledge.models import KbStats, Passage
from engine.knowledge.query import Query, latin_terms, parse_query
from engine.knowledge.schema import (
    BODY_WEIGHT,
    HEADING_WEIGHT,
    TITLE_WEIGHT,
    has_current_schema,
    open_readonly,
)
from engine.knowledge.vectors import VectorCache

# After a general answer given before the first rescrape: it says the answer is not the site's
# (in English; engine/answering/wording.py picks the question's language).
NO_ARTICLES_MESSAGE = t("engine.answer.no_articles", "en")

COLUMNS = "rowid, title, url, body, heading, anchor"
CANDIDATES = 30  # from each ranking, before they are fused
RRF_K = 60  # reciprocal rank fusion's damping: the usual value
# Nearer than this in meaning, or not found by meaning: below it every passage of a site is
# "near" a question about nothing on it (a cosine of 0.1 is two unrelated texts).
MEANING_FLOOR = 0.25
WORDS_KEPT = 3  # of the words' ranking, the first ones ``whole`` may keep in the results
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
SHORT_NAME_CHARS = 3  # "Go" is a name of its own, not the start of "Google"
HIT_SQL = "(instr(lower(title || ' ' || heading || ' ' || body), ?) > 0)"
MENTION_SQL = f"SELECT 1 FROM passages WHERE {HIT_SQL} LIMIT 1"
COMMAND_PAGES_SQL = "SELECT count(DISTINCT url) FROM passages WHERE lower(title) LIKE ?"
CASED_TEXTS_SQL = f"SELECT title || '\n' || heading || '\n' || body FROM passages WHERE {HIT_SQL}"
MENTION_TEXTS_SQL = f"""
SELECT lower(title || ' ' || heading || ' ' || body) FROM passages WHERE {HIT_SQL}
"""
HEADED_SQL = (
    f"SELECT {COLUMNS}, 0.0 FROM passages WHERE instr(lower(heading), ?) > 0"
    " ORDER BY url, CAST(seq AS INTEGER) LIMIT ?"
)
RESCRAPED_AT_SQL = "SELECT value FROM meta WHERE key = 'rescraped_at'"
OPENING_SQL = (
    f"SELECT {COLUMNS}, 0.0 FROM passages WHERE url = ? ORDER BY CAST(seq AS INTEGER) LIMIT ?"
)


class KnowledgeBase:
    """The articles of the last successful rescrape, as stored at ``path``."""

    def __init__(self, path: Path, embedder: Embedder | None = None) -> None:
        self.path = path
        self.embedder = embedder or shared_embedder()
        self._vectors = VectorCache()

    def search(
        self, query: str, limit: int, whole: Callable[[Passage], bool] | None = None
    ) -> list[Passage]:
        """The best passages for a question, best first, each with its cosine to the
        question; [] when nothing matches. Of the words' first ``WORDS_KEPT``, those ``whole``
        says answer all of it are among them, last if fusion left them out."""
        parsed = parse_query(query)
        if limit <= 0 or not self.path.exists():
            return []
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return []
            lexical = _match(conn, parsed, CANDIDATES)
            if len(lexical) < CANDIDATES and parsed.substrings:
                lexical += _substring_fill(conn, parsed, CANDIDATES, lexical)
            matrix = self._vectors.matrix(conn, self.path)
            if not len(matrix.rowids):
                return [p for _, p in lexical[:limit]]
            question = self.embedder.embed([query])[0]
            dense = [n for n in matrix.nearest(question, CANDIDATES) if n[1] >= MEANING_FLOOR]
            fused = _fused([rowid for rowid, _ in lexical], [rowid for rowid, _ in dense])[:limit]
            if whole is not None:
                fused = _with_whole(fused, lexical[:WORDS_KEPT], whole, limit)
            rows = dict(lexical)
            rows |= _rows(conn, [rowid for rowid in fused if rowid not in rows])
            cosine = matrix.similarity(question, fused)
        return [replace(rows[r], similarity=cosine.get(r, 0.0)) for r in fused if r in rows]

    def mentions(self, names: list[str], *, whole: bool = False) -> set[str]:
        """Which of ``names`` (lowercase) some passage holds, as a substring of its text; with
        ``whole``, as a name of its own: "requests.get" is not in "self.requests.get(url)"."""
        if not names or not self.path.exists():
            return set()
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return set()
            if not whole:
                return {name for name in names if conn.execute(MENTION_SQL, (name,)).fetchone()}
            return {name for name in names if _names_whole(conn, name)}

    def capitalises(self, words: list[str]) -> set[str]:
        """Which of ``words`` (lowercase) some passage writes capitalised other than as a
        sentence's first word, as a name: "Go" is no name on a page that says "go" and
        "Go to the next step." alone; "Monday" and "Python" are."""
        if not words or not self.path.exists():
            return set()
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return set()
            return {word for word in words if _capitalises(conn, word)}

    def command_pages(self, tool: str) -> int:
        """How many pages are titled as one of ``tool``'s commands ("npm-install", "npm-ci"):
        a reference that gives each command a page of its own."""
        if not self.path.exists():
            return 0
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return 0
            return int(conn.execute(COMMAND_PAGES_SQL, (f"{tool}-%",)).fetchone()[0])

    def opening(self, url: str) -> Passage | None:
        """The first passage of the article at ``url``: what a page says before its sections
        (a module's summary and warnings); None when it is not stored."""
        return next(iter(self.openings(url, 1)), None)

    def openings(self, url: str, limit: int) -> list[Passage]:
        """The first ``limit`` passages of the article at ``url``, in the page's order (a man
        page's NAME, SYNOPSIS and DESCRIPTION); [] when it is not stored."""
        if not self.path.exists():
            return []
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return []
            rows = conn.execute(OPENING_SQL, (url, limit)).fetchall()
        return [_passage(row) for row in rows]

    def headed(self, fragment: str, limit: int) -> list[Passage]:
        """Passages whose heading path holds ``fragment`` (lowercase), in page order: the
        entries a question names ("os.tmpdir", "--watch"), whatever the search ranked."""
        if not self.path.exists():
            return []
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return []
            rows = conn.execute(HEADED_SQL, (fragment, limit)).fetchall()
        return [_passage(row) for row in rows]

    def stats(self) -> KbStats:
        """Counts for ``concierge kb stats``; zeros before the first rescrape."""
        if not self.path.exists():
            return KbStats(articles=0, passages=0, last_rescrape_at=None, db_bytes=0)
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return KbStats(0, 0, None, self.path.stat().st_size)
            articles = conn.execute("SELECT count(*) FROM articles").fetchone()[0]
            passages = conn.execute("SELECT count(*) FROM passages").fetchone()[0]
            row = conn.execute(RESCRAPED_AT_SQL).fetchone()
        return KbStats(
            articles=articles,
            passages=passages,
            last_rescrape_at=datetime.fromisoformat(row[0]) if row else None,
            db_bytes=self.path.stat().st_size,
        )

    def rescraped_at(self) -> datetime | None:
        """When the last successful rescrape saved it (None before the first): without the
        counts, which read every passage."""
        if not self.path.exists():
            return None
        with closing(open_readonly(self.path)) as conn:
            if not has_current_schema(conn):
                return None
            row = conn.execute(RESCRAPED_AT_SQL).fetchone()
        return datetime.fromisoformat(row[0]) if row else None

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


Found = list[tuple[int, Passage]]  # (rowid, passage), best first


def _match(conn: sqlite3.Connection, query: Query, limit: int) -> Found:
    if not query.match:
        return []
    rows = conn.execute(MATCH_SQL, (query.match, limit)).fetchall()
    return [(row[0], _passage(row)) for row in rows]


def _fused(*rankings: list[int]) -> list[int]:
    """Rowids by reciprocal rank fusion: each ranking gives 1 / (RRF_K + rank)."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, rowid in enumerate(ranking, start=1):
            score[rowid] = score.get(rowid, 0.0) + 1 / (RRF_K + rank)
    return sorted(score, key=lambda rowid: -score[rowid])


def _with_whole(
    fused: list[int], lexical: Found, whole: Callable[[Passage], bool], limit: int
) -> list[int]:
    """``fused`` with every ``lexical`` passage that ``whole`` keeps: those fusion left out
    take the places of the last ones it found that are not kept themselves, at the end, in
    the words' order (at most ``limit`` in all)."""
    kept = [rowid for rowid, passage in lexical if whole(passage)]
    if all(rowid in fused for rowid in kept):
        return fused
    others = [rowid for rowid in fused if rowid not in kept][: max(0, limit - len(kept))]
    found = [rowid for rowid in fused if rowid in kept or rowid in others]
    return [*found, *(rowid for rowid in kept if rowid not in fused)][:limit]


def _rows(conn: sqlite3.Connection, rowids: list[int]) -> dict[int, Passage]:
    if not rowids:
        return {}
    marks = ", ".join("?" * len(rowids))
    rows = conn.execute(f"SELECT {COLUMNS}, 0.0 FROM passages WHERE rowid IN ({marks})", rowids)
    return {row[0]: _passage(row) for row in rows}


def _substring_fill(conn: sqlite3.Connection, query: Query, limit: int, found: Found) -> Found:
    """Passages holding the most short terms, for what the trigram index cannot match."""
    sql = SUBSTRING_SQL.format(hits=" + ".join([HIT_SQL] * len(query.substrings)))
    rows = conn.execute(sql, (*query.substrings, limit + len(found))).fetchall()
    seen = {rowid for rowid, _ in found}
    return [(row[0], _passage(row)) for row in rows if row[0] not in seen][: limit - len(found)]


def _passage(row: tuple[int, str, str, str, str, str | None, float]) -> Passage:
    _, title, url, body, heading, anchor, score = row
    return Passage(title, url, body, score, heading, anchor)


def _names_whole(conn: sqlite3.Connection, name: str) -> bool:
    """Whether a passage holds ``name`` (lowercase) as a name of its own: no name character
    just after it, and just before it no name character, nor a dot if it is dotted itself
    ("requests.get" is not "self.requests.get"; "mkdtemp" is in "tempfile.mkdtemp"; a file
    type, ".xlsx", may follow a file's name)."""
    if name.startswith("."):
        before = ""
    else:
        before = r"(?<![\w.])" if "." in name else r"(?<!\w)"
    return _any_text_matches(conn, MENTION_TEXTS_SQL, name, rf"{before}{re.escape(name)}(?!\w)")


def _any_text_matches(conn: sqlite3.Connection, texts_sql: str, term: str, pattern: str) -> bool:
    """Whether a passage holding ``term`` (the index narrows them) matches ``pattern``, in the
    text ``texts_sql`` gives of it (lowercased, or as written)."""
    matcher = re.compile(pattern)
    return any(matcher.search(text) for (text,) in conn.execute(texts_sql, (term,)))


def _capitalises(conn: sqlite3.Connection, word: str) -> bool:
    """Whether a passage writes ``word`` (lowercase; its other endings too: "Monday" of
    "mondays", "Ferry" of "ferries") capitalised after a word of its sentence."""
    # the letters shared with its stem ("ferr" of "ferries" and "ferry"); strings, not paths
    stem = os.path.commonprefix([word, *latin_terms(word)[:1]])  # noqa: RUF071
    stem = stem[:-1] if stem.endswith("y") and len(stem) > SHORT_NAME_CHARS + 1 else stem
    ending = r"(?!\w)" if len(stem) <= SHORT_NAME_CHARS else r"\w*"
    # after a word of its sentence: not after a mark that begins one, a table cell or an item
    after_a_word = r"(?<=[^\s.!?:|\-\u2022] )"
    return _any_text_matches(
        conn, CASED_TEXTS_SQL, stem, rf"{after_a_word}{re.escape(stem.capitalize())}{ending}"
    )
