"""Writing a complete new knowledge base file, next to the one in use.

Unchanged articles are copied from the old file with their passages, vectors, validators and
links,
so a rescrape that downloads nothing new still produces a whole knowledge base. New articles
are stored without the text the site repeats (dedupe.py), a section at a time: each section
is cut into passages that carry its heading path and anchor.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing
from datetime import datetime
from pathlib import Path

from engine.knowledge.embedding import Embedder, shared_embedder, to_blob
from engine.knowledge.models import Article, Section, Validators
from engine.knowledge.schema import has_current_schema, open_for_build, open_readonly
from engine.knowledge.scrape.dedupe import without_repeats
from engine.knowledge.scrape.passages import split_passages

EMBED_BATCH = 256  # passages embedded and written at a time


def load_validators(path: Path) -> dict[str, Validators]:
    """ETag and Last-Modified of every stored article. Empty before the first rescrape, and
    for an old or damaged file: the rescrape then rebuilds everything and replaces it."""
    if not path.exists():
        return {}
    try:
        with closing(open_readonly(path)) as conn:
            if not has_current_schema(conn):
                return {}
            rows = conn.execute("SELECT url, etag, last_modified FROM articles")
            return {url: (etag, modified) for url, etag, modified in rows}
    except sqlite3.DatabaseError:
        return {}


def load_links(path: Path) -> dict[str, tuple[str, ...]]:
    """The links stored with every article, for a crawl. Empty before the first rescrape and
    for a file from before links were stored: its pages' links are unknown, not none."""
    if not path.exists():
        return {}
    try:
        with closing(open_readonly(path)) as conn:
            if not has_current_schema(conn) or not _has_table(conn, "main", "links"):
                return {}
            articles = conn.execute("SELECT url FROM articles")
            links: dict[str, list[str]] = {url: [] for (url,) in articles}
            for url, target in conn.execute("SELECT url, target FROM links ORDER BY rowid"):
                links.setdefault(url, []).append(target)
            return {url: tuple(targets) for url, targets in links.items()}
    except sqlite3.DatabaseError:
        return {}


def build_kb(
    target: Path,
    previous: Path,
    articles: list[Article],
    kept: list[str],
    now: datetime,
    embedder: Embedder | None = None,
) -> tuple[int, int]:
    """Fill the empty file ``target``; return its (article, passage) counts. CPU-bound (the
    vectors of new passages): call it from a worker thread. The pages go in by address, not
    in the order their fetches ended: two rescrapes of one site give the same file (which of
    two identical pages is kept, the passages' order that breaks the search's ties)."""
    with closing(open_for_build(target)) as conn:
        if kept:
            _copy_kept(conn, previous, kept)
        with conn:
            by_address = sorted(articles, key=lambda article: article.url)
            _insert_articles(conn, without_repeats(by_address, kept), now)
            _embed_new_passages(conn, embedder or shared_embedder())
            conn.execute("INSERT INTO meta VALUES ('rescraped_at', ?)", (now.isoformat(),))
        counts = (
            conn.execute("SELECT count(*) FROM articles").fetchone()[0],
            conn.execute("SELECT count(*) FROM passages").fetchone()[0],
        )
    _fsync(target)  # on disk before the rename makes it the knowledge base
    return counts


def _copy_kept(conn: sqlite3.Connection, previous: Path, urls: Iterable[str]) -> None:
    conn.execute("ATTACH DATABASE ? AS old", (f"{previous.resolve().as_uri()}?mode=ro",))
    with conn:
        conn.execute("CREATE TEMP TABLE kept (url TEXT PRIMARY KEY)")
        conn.executemany("INSERT OR IGNORE INTO kept VALUES (?)", ((url,) for url in urls))
        conn.execute("INSERT INTO articles SELECT * FROM old.articles WHERE url IN temp.kept")
        conn.execute(
            "INSERT INTO passages (rowid, title, heading, body, url, anchor, seq) "
            "SELECT rowid, title, heading, body, url, anchor, seq FROM old.passages "
            "WHERE url IN temp.kept"
        )
        conn.execute(
            "INSERT INTO vectors SELECT v.* FROM old.vectors AS v JOIN old.passages AS p "
            "ON p.rowid = v.passage WHERE p.url IN temp.kept"
        )
        if _has_table(conn, "old", "links"):
            conn.execute(
                "INSERT INTO links SELECT url, target FROM old.links "
                "WHERE url IN temp.kept ORDER BY rowid"
            )
    conn.execute("DETACH DATABASE old")


def _insert_articles(conn: sqlite3.Connection, articles: list[Article], now: datetime) -> None:
    for article in articles:
        conn.execute(
            "INSERT INTO articles VALUES (?, ?, ?, ?, ?)",
            (article.url, article.title, article.etag, article.last_modified, now.isoformat()),
        )
        conn.executemany(
            "INSERT INTO passages (title, heading, body, url, anchor, seq) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                (article.title, heading, text, article.url, anchor, seq)
                for seq, (heading, anchor, text) in enumerate(_passages(article))
            ),
        )
        conn.executemany(
            "INSERT INTO links VALUES (?, ?)", ((article.url, link) for link in article.links)
        )


def _passages(article: Article) -> Iterator[tuple[str, str | None, str]]:
    """(heading path, anchor, text) of each passage of the article, in page order."""
    sections = article.sections or (Section((article.title,), None, article.text),)
    for section in sections:
        for text in split_passages(section.text):
            yield section.heading, section.anchor, text


def _embed_new_passages(conn: sqlite3.Connection, embedder: Embedder) -> None:
    """A vector for every passage that has none (the new ones: the kept ones were copied)."""
    rows = conn.execute(
        "SELECT rowid, heading, body FROM passages "
        "WHERE rowid NOT IN (SELECT passage FROM vectors) ORDER BY rowid"
    ).fetchall()
    for start in range(0, len(rows), EMBED_BATCH):
        batch = rows[start : start + EMBED_BATCH]
        vectors = embedder.embed([f"{heading}\n{body}" for _, heading, body in batch])
        conn.executemany(
            "INSERT INTO vectors VALUES (?, ?)",
            (
                (rowid, to_blob(vector))
                for (rowid, _, _), vector in zip(batch, vectors, strict=True)
            ),
        )


def _has_table(conn: sqlite3.Connection, database: str, table: str) -> bool:
    """Whether ``database`` (main, or an attached one) has ``table``."""
    query = f"SELECT 1 FROM {database}.sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(query, (table,)).fetchone() is not None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
