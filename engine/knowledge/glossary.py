"""Japanese words in English, so a Japanese question meets the words of English pages.

"ヒープの使用量を測るツールはどれですか" shares no character with Valgrind's manual, and the
sentence encoder puts it nearer the manual on writing tools than Massif's ("a heap
profiler"). A dictionary reads its words as a newcomer would look them up: ヒープ "heap",
使用量 "amount used", 測る "measure", ツール "tool". The dictionary is JMdict (the Electronic
Dictionary Research and Development Group, CC BY-SA 4.0), as the ``jamdict-data`` package
ships it: a read-only SQLite file, looked up by its indexes (recent lookups are cached).

A word's English is its glosses, each kept whole ("memory leak", "business purpose": one word
of a phrase alone would meet pages that say something else), from every sense JMdict files
under computing and the first two senses of each of its entries: パス is "passing (a test)"
first and "path (file, directory)" only in its sixth. A gloss that negates ("not free" for
有料) is left out. A run of the question is read longest word first, from each kanji or
katakana; a word is two characters or more: a lone kanji has senses by the dozen (中: "inside",
"while", "red dragon tile"), and hiragana begins no word (it is mostly grammar, and its
lookups are homophones: こと, "koto, a stringed instrument").
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from engine.knowledge.trade_words import TRADE_ENGLISH

log = logging.getLogger(__name__)

LONGEST_WORD = 8  # characters: JMdict's compounds of use here are shorter
SHORTEST_WORD = 2  # characters
WHEN = "時"  # after a noun, when: 起動時 "at startup"
LONGEST_GLOSS = 3  # words: a longer gloss describes ("sweet jellied dessert made of…")
GLOSSED_CHARS = 400  # of a question: a long paragraph costs a lookup per character
WORD_START_RE = re.compile(r"[\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
GLOSS_WORD_RE = re.compile(r"[a-z][a-z-]*[a-z]")
# Words of a gloss that name no topic ("to measure", "on business", "during the year").
GLOSS_STOPWORDS = frozenset(
    "a all an and as at be by during esp etc for in into like of on one one's or out some "
    "someone something the to while with".split()
)
# A gloss that is only a form of "be", "have" or "do" names nothing either: 存在 is
# "existence" and "being", which half the sentences of any English page hold ("…being read").
VERB_FORMS = frozenset(
    "am are been being is was were do does did doing done has have had having".split()
)
NEGATION_RE = re.compile(r"\b(?:not|no|non|never|without)\b")
# A noun then "without" ("関係のない", no relation): the dictionary files many such pairs as one
# word, its noun with ない ("関係ない", "unrelated"), whose English is the opposite of the noun's.
ABSENCE_ENDINGS = ("のない", "の無い", "ない", "無い")
CACHE_KIB = 256  # SQLite's page cache per connection (a thread's), not its default 2 MiB
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
        self.failed = False  # a read failed once: said once in the log
        self._local = threading.local()  # a connection per thread: sqlite3's rule

    def english(self, word: str) -> tuple[str, ...]:
        """The English glosses of ``word``'s senses that say what it is, lowercase, those
        of its computing senses first, then the trade's words the dictionary lacks
        (``trade_words.py``, which stand alone when the dictionary fails or has no such
        entry); () when neither has it."""
        glosses = _english(self, word)
        if word not in TRADE_ENGLISH:  # nearly every lookup: the cached glosses as they are
            return glosses
        return tuple(dict.fromkeys((*glosses, *TRADE_ENGLISH[word])))

    def words(self, run: str, grammar: Sequence[bool]) -> list[tuple[int, int, tuple[str, ...]]]:
        """The dictionary words of a Japanese ``run`` as (start, end, English glosses), read
        longest first from each kanji or katakana that ``grammar`` does not mark."""
        found: list[tuple[int, int, tuple[str, ...]]] = []
        start = 0
        while start < min(len(run), GLOSSED_CHARS):
            if grammar[start] or not WORD_START_RE.match(run[start]):
                start += 1
                continue
            end = _word_end(run, start, grammar)
            for stop in range(min(end, start + LONGEST_WORD), start + SHORTEST_WORD - 1, -1):
                if english := self.english(run[start:stop]):
                    stop, english = self._absent(run, start, stop, english)
                    found.append((start, stop, (*english, *self._parts(run[start:stop], english))))
                    start = stop
                    break
            else:
                start += 1
        return found

    def _parts(self, word: str, english: tuple[str, ...]) -> tuple[str, ...]:
        """The English of a word before 時 ("when"), when the dictionary glosses the two only
        as a phrase: 起動時 is "startup time", which no page says, and 起動 "startup" ("…read
        on startup"). Not another compound (既定値, "default value"; メモリリーク, "memory
        leak"): the phrase is what a page says, and its words alone meet other sentences."""
        if len(word) <= SHORTEST_WORD or not word.endswith(WHEN):  # 同時: no word before it
            return ()
        if any(" " not in gloss for gloss in english):
            return ()
        return self.english(word.removesuffix(WHEN))

    def _absent(
        self, run: str, start: int, stop: int, english: tuple[str, ...]
    ) -> tuple[int, tuple[str, ...]]:
        """The word as read with its "without" after it, when the dictionary has the pair
        ("関係のない": "unrelated", not "relation"); else as read."""
        for ending in ABSENCE_ENDINGS:
            if run.startswith(ending, stop) and (absent := self.english(run[start:stop] + "ない")):
                return stop + len(ending), absent
        return stop, english

    def _connection(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            uri = f"{self.path.resolve().as_uri()}?mode=ro&immutable=1"
            conn = sqlite3.connect(uri, uri=True)
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")  # a few index pages per lookup
            self._local.conn = conn
        return conn


@functools.lru_cache(maxsize=8192)
def _english(glossary: Glossary, word: str) -> tuple[str, ...]:
    try:
        conn = glossary._connection()
        if conn is None:
            return ()
        senses = conn.execute(SENSES_SQL, (word, word)).fetchall()
        chosen = [sense for sense, _, computing in senses if computing]  # the trade's first
        chosen += [sense for sense, early, computing in senses if early and not computing]
        glosses = [g for sense in chosen for (g,) in conn.execute(GLOSSES_SQL, (sense,))]
    except sqlite3.Error as error:  # a damaged install: Japanese is searched as before
        _warn_once(glossary, error)
        return ()
    plain = (_plain(gloss) for gloss in glosses)
    return tuple(dict.fromkeys(gloss for gloss in plain if gloss))


def _plain(gloss: str) -> str:
    """A gloss's words that name something, or "" when it negates or describes: "path
    (file, directory, graphics)" gives "path", "to measure" "measure", "not free" ""."""
    lowered = re.sub(r"\([^)]*\)", " ", gloss.lower())
    if NEGATION_RE.search(lowered):
        return ""
    words = [w for w in GLOSS_WORD_RE.findall(lowered) if w not in GLOSS_STOPWORDS]
    if len(words) > LONGEST_GLOSS or set(words) <= VERB_FORMS:
        return ""
    return " ".join(words)


def _warn_once(glossary: Glossary, error: sqlite3.Error) -> None:
    if not glossary.failed:
        glossary.failed = True
        log.warning("the Japanese dictionary at %s cannot be read (%s)", glossary.path, error)


def _word_end(run: str, start: int, grammar: Sequence[bool]) -> int:
    end = start
    while end < len(run) and not grammar[end]:
        end += 1
    return end


@functools.cache
def shared_glossary() -> Glossary:
    """The one glossary of the process (its lookups are cached)."""
    return Glossary(dictionary_path())
