"""The SQLite layout, in one place, and how to open a knowledge base file.

Passages live in one FTS5 table with the trigram tokenizer: it needs no word breaks, so
Japanese text is found as well as English. Each passage is part of one section of a page and
carries the section's heading path and anchor. ``vectors`` holds each passage's embedding
(engine/knowledge/embedding.py), by the passage's rowid, for the search by meaning.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = 2  # 2: sections (heading, anchor) and vectors
# ``links`` (each article's links, for a crawl: engine/knowledge/scrape/crawl.py) came later
# without a new version: a file without it is read as one whose links are unknown.

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE articles (
    url TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    etag TEXT,
    last_modified TEXT,
    fetched_at TEXT NOT NULL
);
CREATE VIRTUAL TABLE passages USING fts5(
    title, heading, body, url UNINDEXED, anchor UNINDEXED, seq UNINDEXED, tokenize = 'trigram'
);
CREATE TABLE vectors (passage INTEGER PRIMARY KEY, vector BLOB NOT NULL);
CREATE TABLE links (url TEXT NOT NULL, target TEXT NOT NULL);
"""

# bm25 column weights: a word in the page's title or the section's headings counts double
TITLE_WEIGHT = 2.0
HEADING_WEIGHT = 2.0
BODY_WEIGHT = 1.0


def open_readonly(path: Path) -> sqlite3.Connection:
    """Open without ever creating the file; every call gets its own connection (thread-safe)."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def open_for_build(path: Path) -> sqlite3.Connection:
    """A fresh file that is thrown away on failure, so it needs no journal."""
    conn = sqlite3.connect(path.resolve().as_uri(), uri=True)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.executescript(SCHEMA)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return conn


def has_current_schema(conn: sqlite3.Connection) -> bool:
    """An older layout is not read: it is rebuilt from scratch by the next rescrape."""
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return version == SCHEMA_VERSION
