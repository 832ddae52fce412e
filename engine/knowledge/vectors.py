"""The search by meaning: every passage's vector, held in memory, compared with a question's.

A thousand sections are 2 MB of vectors: a plain matrix product finds the nearest in
milliseconds, so no vector index is needed at this size (docs/quality.md, "Search by
meaning"). The matrix is read once per knowledge base file: a rescrape replaces the file,
and the next search reads the new one.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.knowledge.embedding import DIMENSIONS, Vectors, from_blobs

FileStamp = tuple[int, int, float]  # inode, size, modification time


@dataclass(frozen=True)
class VectorMatrix:
    rowids: np.ndarray  # the passages' rowids, one per row of ``vectors``
    vectors: Vectors

    def nearest(self, query: np.ndarray, count: int) -> list[tuple[int, float]]:
        """The ``count`` passages nearest ``query`` (rowid, cosine), nearest first."""
        if not len(self.rowids) or count <= 0:
            return []
        similarity = self.vectors @ query
        top = np.argsort(-similarity)[:count]
        return [(int(self.rowids[i]), float(similarity[i])) for i in top]

    def similarity(self, query: np.ndarray, rowids: list[int]) -> dict[int, float]:
        """The cosine of ``query`` with each of ``rowids`` that has a vector."""
        position = {int(rowid): i for i, rowid in enumerate(self.rowids)}
        rows = [position[r] for r in rowids if r in position]
        values = self.vectors[rows] @ query if rows else np.zeros(0)
        return {
            int(self.rowids[row]): float(value) for row, value in zip(rows, values, strict=True)
        }


EMPTY = VectorMatrix(np.zeros(0, dtype=np.int64), np.zeros((0, DIMENSIONS), dtype=np.float32))


class VectorCache:
    """The vectors of the knowledge base file at ``path``, read again when the file changes."""

    def __init__(self) -> None:
        self._stamp: FileStamp | None = None
        self._matrix = EMPTY
        self._lock = threading.Lock()

    def matrix(self, conn: sqlite3.Connection, path: Path) -> VectorMatrix:
        stat = path.stat()
        stamp = (stat.st_ino, stat.st_size, stat.st_mtime)
        with self._lock:
            if stamp != self._stamp:
                rows = conn.execute("SELECT passage, vector FROM vectors ORDER BY passage")
                pairs = rows.fetchall()
                rowids = np.array([rowid for rowid, _ in pairs], dtype=np.int64)
                self._matrix = VectorMatrix(rowids, from_blobs([blob for _, blob in pairs]))
                self._stamp = stamp
            return self._matrix
