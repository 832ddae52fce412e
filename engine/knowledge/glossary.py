"""Japanese words in English, so a Japanese question meets the words of English pages.

"ヒープの使用量を測るツールはどれですか" shares no character with Valgrind's manual, and the
sentence encoder puts it nearer the manual on writing tools than Massif's ("a heap
profiler"). A dictionary reads its words as a newcomer would look them up: ヒープ "heap",
使用量 "amount used", 測る "measure", ツール "tool". The dictionary is JMdict (the Electronic
Dictionary Research and Development Group, CC BY-SA 4.0), as the ``jamdict-data`` package
ships it: a read-only SQLite file, looked up by its indexes, nothing held in memory.

A word's English is the first two senses of each of its entries and every sense JMdict files
under computing: パス is "passing (a test)" first and "path (file, directory)" only in its sixth.
A run of the question is read longest word first, from each kanji or katakana; hiragana
alone begins no word (it is mostly grammar, and a kana word's senses are many).
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

LONGEST_WORD = 8  # characters: JMdict's compounds of use here are shorter
WORD_START_RE = re.compile(r"[\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
GLOSS_WORD_RE = re.compile(r"[a-z][a-z-]*[a-z]")
# Words of a gloss that name no topic ("to measure", "(giving something a) pass", "e.g.").
GLOSS_STOPWORDS = frozenset(
    "a an and as at be by etc for in into of on one one's or out someone something the to "
    "with esp".split()
)
FIRST_SENSES = 2  # of an entry's senses, those read whatever their field
SENSES_SQL = f"""
SELECT s.ID, s.ID < (SELECT MIN(ID) FROM Sense WHERE idseq = s.idseq) + {FIRST_SENSES},
       EXISTS (SELECT 1 FROM field f WHERE f.sid = s.ID AND f.text = 'computing')
FROM Sense s WHERE s.idseq IN (
    SELECT idseq FROM Kanji WHERE text = ? UNION SELECT idseq FROM Kana WHERE text = ?
) ORDER BY s.ID
"""
GLOSSES_SQL = "SELECT text FROM SenseGloss WHERE sid = ? AND lang = 'eng'"


def dictionary_path() -> Path | None:
    """Where ``jamdict-data`` put JMdict, or None when it is not installed."""
    spec = importlib.util.find_spec("jamdict_data")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "jamdict.db"
    return path if path.exists() else None


class Glossary:
    """English words for Japanese ones; empty answers when the dictionary is missing."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._local = threading.local()  # a connection per thread: sqlite3's rule

    def english(self, word: str) -> tuple[str, ...]:
        """The English words of ``word``'s senses that say what it is, lowercase, those of
        its computing senses first; () when it is no entry."""
        return _english(self, word)

    def words(self, run: str, skip: Sequence[bool]) -> list[tuple[int, int, tuple[str, ...]]]:
        """The dictionary words of a Japanese ``run`` as (start, end, English words), read
        longest first from each kanji or katakana that ``skip`` (its grammar) does not mark."""
        found: list[tuple[int, int, tuple[str, ...]]] = []
        start = 0
        while start < len(run):
            if skip[start] or not WORD_START_RE.match(run[start]):
                start += 1
                continue
            end = _word_end(run, start, skip)
            for stop in range(min(end, start + LONGEST_WORD), start, -1):
                if english := self.english(run[start:stop]):
                    found.append((start, stop, english))
                    start = stop
                    break
            else:
                start += 1
        return found

    def _connection(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            uri = f"file:{self.path}?mode=ro&immutable=1"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._local.conn = conn
        return conn


@functools.lru_cache(maxsize=8192)
def _english(glossary: Glossary, word: str) -> tuple[str, ...]:
    conn = glossary._connection()
    if conn is None:
        return ()
    senses = conn.execute(SENSES_SQL, (word, word)).fetchall()
    chosen = [sense for sense, _, computing in senses if computing]  # the trade's own first
    chosen += [sense for sense, early, computing in senses if early and not computing]
    words: list[str] = []
    for sense in chosen:
        for (gloss,) in conn.execute(GLOSSES_SQL, (sense,)):
            words += _gloss_words(gloss)
    return tuple(dict.fromkeys(words))


def _gloss_words(gloss: str) -> list[str]:
    """One gloss's words: "path (file, directory, graphics)" gives "path", "to measure"
    "measure"."""
    plain = re.sub(r"\([^)]*\)", " ", gloss.lower())
    return [w for w in GLOSS_WORD_RE.findall(plain) if w not in GLOSS_STOPWORDS]


def _word_end(run: str, start: int, skip: Sequence[bool]) -> int:
    end = start
    while end < len(run) and not skip[end]:
        end += 1
    return end


@functools.cache
def shared_glossary() -> Glossary:
    """The one glossary of the process (its lookups are cached)."""
    return Glossary(dictionary_path())
