"""Small talk: a message that only greets, thanks or says goodbye ("hi", "thanks!",
"ありがとう"), told apart from a question before the site is searched.

The on-site rule (engine/answering/on_site.py) reads "hi" as a question nothing covers and
answered "The site does not cover this"; asking the model instead would spend seconds on a
general chat answer. So the engine answers small talk itself, with one sentence that says
what it can do, and no source.

It is conservative: the whole message, once its punctuation, emoji and spacing are set aside,
must be made of the phrases below, at least one of them a greeting, thanks or goodbye, and it
must be short. "hi, how do I return an item?" holds words of its own, so it stays a question;
a message the rule misses is searched as before, which costs nothing but the old answer. Such
a question is searched and judged without its greeting or thanks (``without_small_talk``).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from config.text_helpers import SENTENCE_ENDS

SmallTalk = Literal["greeting", "thanks", "goodbye"]
Filler = Literal["filler"]

RANK: tuple[SmallTalk, ...] = ("thanks", "goodbye", "greeting")  # "hi, thanks" is thanks
MAX_CHARS = 60  # longer messages are never small talk: the rule stays for the short ones

GREETINGS = (
    "hi", "hello", "hey", "hiya", "howdy", "hallo", "greetings", "good morning",
    "good afternoon", "good evening",
    "こんにちは", "こんにちわ", "こんばんは", "こんばんわ", "おはよう", "おはようございます",
    "はじめまして", "やあ", "ハロー", "もしもし", "よろしくお願いします", "よろしくおねがいします",
    "よろしく",
)  # fmt: skip
THANKS = (
    "thanks", "thank you", "thank u", "thx", "ty", "many thanks", "cheers", "much appreciated",
    "appreciate it", "i appreciate it",
    "ありがとう", "ありがとうございます", "ありがとうございました", "どうもありがとう",
    "どうもありがとうございます", "どうもありがとうございました", "サンキュー", "助かりました",
    "助かります", "感謝します",
)  # fmt: skip
GOODBYES = (
    "bye", "goodbye", "good bye", "bye bye", "see you", "see ya", "good night",
    "さようなら", "さよなら", "またね", "バイバイ", "おやすみ", "おやすみなさい", "失礼します",
)  # fmt: skip
# Words said around a greeting or thanks that ask nothing ("ok, thanks a lot", "hi there").
FILLERS = (
    "there", "everyone", "all", "again", "so much", "a lot", "very much", "a bunch", "ok",
    "okay", "great", "perfect", "awesome", "cool", "nice", "got it", "oh", "ah", "for the help",
    "for your help", "for that", "that helps", "that helped", "and",
    "どうも", "本当に", "ほんとうに", "とても", "はい", "わかりました", "了解です", "了解",
    "なるほど",
)  # fmt: skip

PHRASES: dict[str, SmallTalk | Filler] = {
    **dict.fromkeys(FILLERS, "filler"),
    **dict.fromkeys(GREETINGS, "greeting"),
    **dict.fromkeys(GOODBYES, "goodbye"),
    **dict.fromkeys(THANKS, "thanks"),
}
# Longest first, so "thank you" is taken whole and "ありがとうございます" before "ありがとう".
PHRASE_RE = re.compile(
    "|".join(re.escape(phrase) for phrase in sorted(PHRASES, key=len, reverse=True)),
    re.IGNORECASE,
)


def small_talk(message: str) -> SmallTalk | None:
    """What ``message`` says, if it is only small talk; None for anything else (a question)."""
    text = unicodedata.normalize("NFKC", message).casefold().strip()  # full-width: "hello!"
    if not text or len(text) > MAX_CHARS:
        return None
    said = {kind for _, kind in _units(text)}
    if None in said:
        return None  # a word of its own: a question, or something else to search
    return next((kind for kind in RANK if kind in said), None)


def without_small_talk(question: str) -> str:
    """``question`` without the small talk before and after it ("Thanks! And how much is the
    museum?" → "how much is the museum?"), for the search and the relevance rule: "thanks"
    or "こんにちは" is not something the site must cover, and counted as one of the question's
    needs it made a covered question read as not covered. The question as it is when nothing
    is around it, or when it is small talk and nothing else.

    Only whole phrases followed by punctuation or a space count ("おやすみの日は" keeps its
    "おやすみ", a day off there, not good night), only where one of them greets, thanks or
    says goodbye ("And how much..." keeps its "And"), and after the question only as a
    sentence of its own ("Where can I see you?" keeps its "see you")."""
    units = _units(question)
    first = _small_talk_run(units)
    last = len(units) - _small_talk_run(units[::-1])
    if first >= last:
        return question
    # nothing before it: as it begins ("--watch オプションは…" keeps its dashes, ".mjs" its dot)
    start, end = (units[first][0] if first else 0), len(question)
    if last < len(units):  # after the question, only as a sentence of its own ("...? Thanks!")
        said_after = _skip(question, units[last - 1][0], word=True)
        if SENTENCE_END_RE.search(question, said_after, units[last][0]):
            end = units[last][0]
    return question[start:end].strip()


SENTENCE_END_RE = re.compile(f"[{re.escape(SENTENCE_ENDS)}]")
Unit = tuple[int, SmallTalk | Filler | None]  # where a phrase or a word starts, and its kind


def _units(text: str) -> list[Unit]:
    """The phrases and the other words of ``text``, in order, each with where it starts. A
    phrase counts only where a word ends after it (punctuation, a space, the end): "hi" is
    not the start of "high", nor "おやすみ" (good night) of "おやすみの日" (the day off)."""
    units: list[Unit] = []
    position = _skip(text, 0, word=False)
    while position < len(text):
        phrase = PHRASE_RE.match(text, position)
        # casefolded: IGNORECASE also matches a long s or a Kelvin sign, which lower() keeps
        kind = PHRASES.get(phrase.group().casefold()) if phrase is not None else None
        if phrase is not None and kind and _skip(text, phrase.end(), word=True) == phrase.end():
            units.append((position, kind))
            end = phrase.end()
        else:
            units.append((position, None))
            end = _skip(text, position, word=True)
        position = _skip(text, end, word=False)
    return units


def _skip(text: str, position: int, *, word: bool) -> int:
    """Past the letters and digits from ``position`` (``word``), or past everything else."""
    while position < len(text) and text[position].isalnum() == word:
        position += 1
    return position


def _small_talk_run(units: list[Unit]) -> int:
    """How many of the first ``units`` are small talk: the phrases up to the first other
    word, counted only when one of them is more than a filler."""
    run = 0
    while run < len(units) and units[run][1] is not None:
        run += 1
    return run if any(kind not in (None, "filler") for _, kind in units[:run]) else 0
