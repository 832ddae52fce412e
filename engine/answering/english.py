"""Which English words are common: a newcomer's words, as against names and terms.

A question that names a term ("YAML", "TLS", "mkdtemp") asks about that thing, and a page
without it does not answer it, however many of the question's other words it holds. A common
word ("lottery", "folder", "remove") says nothing so sure: the page may say it in other words.
What counts as common is wordfreq's English list (words seen at least once per million, about
29,000; its data is CC BY-SA 4.0, read from the installed package, nothing fetched): only
that list is kept, about 4 MB, not the library, which would load every form of every word.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
from pathlib import Path

import msgpack

COMMON_CENTIBELS = 600  # once per million words (zipf 3): the small list's own floor
LIST_FILE = Path("data") / "small_en.msgpack.gz"  # wordfreq's "cBpack": a header, then buckets


def is_common_word(word: str) -> bool:
    """Whether ``word`` (lowercase) is among the common English words; digits and words of
    one or two letters count as common (they name nothing on their own)."""
    return len(word) < 3 or word.isdigit() or word in _common_words()


@functools.cache
def _common_words() -> frozenset[str]:
    """The list, read once: bucket ``i`` holds the words seen with frequency 10^(-i/100)."""
    spec = importlib.util.find_spec("wordfreq")  # the package's data, without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("wordfreq is not installed: pip install wordfreq")
    path = Path(spec.submodule_search_locations[0]) / LIST_FILE
    with gzip.open(path, "rb") as packed:
        header, *buckets = msgpack.unpack(packed, raw=False)
    if header != {"format": "cB", "version": 1}:
        raise RuntimeError(f"{path}: not a word list this code reads ({header})")
    return frozenset(word for bucket in buckets[: COMMON_CENTIBELS + 1] for word in bucket)
