"""The feedback database: how each answer ended, the articles it cited, and people's votes.

One SQLite file (``CONCIERGE_FEEDBACK_PATH``), apart from the knowledge base (a rescrape
replaces that file; votes must outlive it), created on first write, in WAL mode so that
``concierge kb stats`` reads while the engine writes. It keeps the latest ``MAX_ANSWERS``
answers, and the votes on them; a vote whose answer it never saw (answered by an engine with
another file, or before the file was made) is kept under the outcome ``unknown``.

Not thread-safe: the engine calls it from one thread of its own (``engine/feedback/recorder.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MAX_ANSWERS = 100_000  # answers kept, with their sources and votes: the oldest go first
MAX_VOTES = 1_000_000  # votes kept, the oldest first (votes on unknown answers have no bound else)
BUSY_TIMEOUT_MS = 5_000  # two engines on one host may share the file
UNKNOWN = "unknown"  # the outcome of a vote whose answer is not in the file
SCHEMA_VERSION = 1

Vote = Literal["up", "down"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL UNIQUE,
    outcome TEXT NOT NULL,
    platform TEXT NOT NULL,
    finished_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS answer_sources (
    session_id TEXT NOT NULL,
    url TEXT NOT NULL,
    PRIMARY KEY (session_id, url)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS answer_sources_by_url ON answer_sources (url);
CREATE TABLE IF NOT EXISTS votes (
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    vote TEXT NOT NULL CHECK (vote IN ('up', 'down')),
    platform TEXT NOT NULL,
    voted_at REAL NOT NULL,
    PRIMARY KEY (session_id, user_id)
);
"""

VOTES_BY_OUTCOME_SQL = f"""
SELECT v.vote, coalesce(a.outcome, '{UNKNOWN}'), count(*)
FROM votes v LEFT JOIN answers a ON a.session_id = v.session_id
GROUP BY 1, 2
"""
VOTES_BY_ARTICLE_SQL = """
SELECT s.url, v.vote, count(*)
FROM votes v JOIN answer_sources s ON s.session_id = v.session_id
GROUP BY 1, 2
"""
MOST_DOWNVOTED_SQL = """
SELECT s.url, sum(v.vote = 'down') AS down, sum(v.vote = 'up') AS up,
       (SELECT count(*) FROM answer_sources c WHERE c.url = s.url) AS answers
FROM answer_sources s JOIN votes v ON v.session_id = s.session_id
GROUP BY s.url HAVING down > 0
ORDER BY down DESC, up ASC, s.url
LIMIT ?
"""


@dataclass(frozen=True)
class AnswerRecord:
    """How one answer ended: its terminal event's type, and the articles it cited."""

    session_id: str
    outcome: str  # done, cancelled, failed or expired
    sources: tuple[str, ...]
    platform: str
    finished_at: float


@dataclass(frozen=True)
class VoteTotals:
    """The votes in the file now: by vote and outcome, and by vote and cited article."""

    by_outcome: dict[tuple[str, str], int]  # (vote, outcome) → votes
    by_article: dict[tuple[str, str], int]  # (article URL, vote) → votes

    @property
    def votes(self) -> int:
        return sum(self.by_outcome.values())


NO_VOTES = VoteTotals({}, {})


@dataclass(frozen=True)
class ArticleVotes:
    """One article for ``concierge kb stats``: the votes on the answers that cited it."""

    url: str
    down: int
    up: int
    answers: int  # answers citing it, voted on or not


class FeedbackStore:
    """The feedback file at ``path``; opened on first use, created on first write."""

    def __init__(self, path: Path, *, max_answers: int = MAX_ANSWERS) -> None:
        self.path = path
        self.max_answers = max_answers
        self._conn: sqlite3.Connection | None = None

    def _writer(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable but for a power cut
            with conn:
                conn.executescript(SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def record_answer(self, answer: AnswerRecord) -> None:
        """Keep how an answer ended; the first end counts (a redelivery ends it again)."""
        conn = self._writer()
        with conn:
            inserted = conn.execute(
                "INSERT OR IGNORE INTO answers (session_id, outcome, platform, finished_at) "
                "VALUES (?, ?, ?, ?)",
                (answer.session_id, answer.outcome, answer.platform, answer.finished_at),
            )
            if not inserted.rowcount:
                return
            conn.executemany(
                "INSERT OR IGNORE INTO answer_sources (session_id, url) VALUES (?, ?)",
                [(answer.session_id, url) for url in answer.sources],
            )
            _forget_old_answers(conn, inserted.lastrowid or 0, self.max_answers)

    def vote(
        self,
        session_id: str,
        user_id: str,
        vote: Vote | Literal["none"],
        platform: str,
        voted_at: float,
    ) -> None:
        """One vote per person on an answer: a new one replaces theirs, ``none`` removes it."""
        conn = self._writer()
        with conn:
            if vote == "none":
                conn.execute(
                    "DELETE FROM votes WHERE session_id = ? AND user_id = ?", (session_id, user_id)
                )
                return
            cursor = conn.execute(
                "INSERT INTO votes (session_id, user_id, vote, platform, voted_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, user_id) DO UPDATE SET "
                "vote = excluded.vote, platform = excluded.platform, voted_at = excluded.voted_at",
                (session_id, user_id, vote, platform, voted_at),
            )
            if cursor.lastrowid and cursor.lastrowid > MAX_VOTES:
                conn.execute("DELETE FROM votes WHERE rowid <= ?", (cursor.lastrowid - MAX_VOTES,))

    def totals(self) -> VoteTotals:
        """The votes now; none when the file does not exist yet (it is not created here)."""
        if self._conn is None and not self.path.exists():
            return NO_VOTES
        return read_totals(self._writer())


def _forget_old_answers(conn: sqlite3.Connection, newest: int, keep: int) -> None:
    """Drop the answers older than the latest ``keep``, with their sources and votes."""
    old = "SELECT session_id FROM answers WHERE seq <= ?"
    cutoff = (newest - keep,)
    if cutoff[0] <= 0:
        return
    conn.execute(f"DELETE FROM answer_sources WHERE session_id IN ({old})", cutoff)
    conn.execute(f"DELETE FROM votes WHERE session_id IN ({old})", cutoff)
    conn.execute("DELETE FROM answers WHERE seq <= ?", cutoff)


def read_totals(conn: sqlite3.Connection) -> VoteTotals:
    by_outcome: Iterable[tuple[str, str, int]] = conn.execute(VOTES_BY_OUTCOME_SQL)
    by_article: Iterable[tuple[str, str, int]] = conn.execute(VOTES_BY_ARTICLE_SQL)
    return VoteTotals(
        {(vote, outcome): count for vote, outcome, count in by_outcome},
        {(url, vote): count for url, vote, count in by_article},
    )


@dataclass(frozen=True)
class FeedbackReport:
    """What ``concierge kb stats`` shows of the votes."""

    votes: int
    most_downvoted: list[ArticleVotes]


def read_report(path: Path, limit: int = 10) -> FeedbackReport | None:
    """The votes in the file at ``path``, read-only; None when there is no such file yet."""
    if not path.exists():
        return None
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        try:
            votes: int = conn.execute("SELECT count(*) FROM votes").fetchone()[0]
            rows: Iterable[tuple[str, int, int, int]] = conn.execute(MOST_DOWNVOTED_SQL, (limit,))
            return FeedbackReport(votes, [ArticleVotes(*row) for row in rows])
        except sqlite3.OperationalError:  # made but not written yet (no tables)
            return FeedbackReport(0, [])
