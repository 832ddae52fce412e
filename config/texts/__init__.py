"""Every text the bots and the engine write to people themselves, in English and Japanese.

One catalogue, filled by area (``bots``, ``discord``, ``slack``, ``terminal``, ``engine``: one
module each, so each area's texts sit beside each other); ``t`` looks a text up by key in a
locale. A key must exist in every locale with the same ``{fields}`` (``tests/test_texts.py``
fails otherwise). Which locale: the asker's (Discord's interaction or guild locale, Slack's
user locale), else ``CONCIERGE_LOCALE`` (the terminal's only one); the engine answers a
question in the question's own language.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from config.texts import bots, discord, engine, slack, terminal

Locale = Literal["en", "ja"]
LOCALES: tuple[Locale, ...] = ("en", "ja")

Entries = Mapping[str, Mapping[Locale, str]]


def _merge(*areas: Entries) -> dict[str, Mapping[Locale, str]]:
    merged: dict[str, Mapping[Locale, str]] = {}
    for area in areas:
        for key, texts in area.items():
            if key in merged:
                raise ValueError(f"text {key!r} is defined twice")
            merged[key] = texts
    return merged


CATALOGUE: dict[str, Mapping[Locale, str]] = _merge(
    bots.TEXTS, discord.TEXTS, slack.TEXTS, terminal.TEXTS, engine.TEXTS
)


def locale_of(tag: str | None, default: Locale = "en") -> Locale:
    """Our locale for a platform's tag: "ja", "ja-JP", "ja_JP" → "ja"; "en-US" → "en"; any
    other language, or none, → ``default``."""
    language = (tag or "").replace("_", "-").split("-")[0].lower()
    return language if language in LOCALES else default


def t(key: str, locale: Locale, /, **fields: object) -> str:
    """The text ``key`` in ``locale``, its ``{fields}`` filled in."""
    text = CATALOGUE[key][locale]
    return text.format(**fields) if fields else text
