"""The catalogue of texts: every text in every locale, with the same fields, and looked up by
the asker's locale."""

from __future__ import annotations

import string

import pytest

from bots.renderer import MessageContent, Renderer, Status, footer_for, status_of
from config.texts import CATALOGUE, LOCALES, locale_of, t


def literal(text: str) -> str:
    """``text`` without its ``{fields}``."""
    return "".join(part for part, _, _, _ in string.Formatter().parse(text))


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("key", sorted(CATALOGUE))
def test_every_text_exists_in_every_locale_with_the_same_fields(key: str) -> None:
    texts = CATALOGUE[key]
    assert set(texts) == set(LOCALES), f"{key}: has {sorted(texts)}, needs {sorted(LOCALES)}"
    for locale in LOCALES:
        assert texts[locale].strip(), f"{key}: empty in {locale}"
    assert fields(texts["en"]) == fields(texts["ja"]), f"{key}: fields differ between locales"


def test_the_japanese_texts_are_japanese() -> None:
    """A copy of the English left in the Japanese column would pass the test above."""
    same = [
        key
        for key, texts in CATALOGUE.items()
        if texts["en"] == texts["ja"] and any(ch.isalpha() for ch in literal(texts["en"]))
    ]
    assert same == []


def test_a_locale_tag_is_read_by_its_language() -> None:
    assert [locale_of(tag) for tag in ("ja", "ja-JP", "ja_JP", "JA")] == ["ja"] * 4
    assert [locale_of(tag) for tag in ("en-US", "en-GB", "en")] == ["en"] * 3
    assert locale_of("fr", "ja") == "ja" and locale_of(None, "ja") == "ja"
    assert locale_of("", "en") == "en"


def test_fields_are_filled_in() -> None:
    assert t("status.queued", "en", ahead=3) == "⏳ queued · 3 ahead"
    assert "3" in t("status.queued", "ja", ahead=3)


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("status", list(Status))
def test_every_footer_is_read_back_as_its_status(locale: str, status: Status) -> None:
    """The conversation readers find the bot's status line in either language."""
    footer = footer_for(status, "a reason", 2, locale)  # type: ignore[arg-type]
    expected = Status.GENERATING if status is Status.DETACHED else status
    assert status_of(footer) is expected


class Recording:
    def __init__(self) -> None:
        self.shown: list[MessageContent] = []
        self.on_post = lambda _: None

    async def post(self, content: MessageContent, after: object) -> int:
        self.shown.append(content)
        return len(self.shown)

    async def edit(self, handle: int, content: MessageContent) -> None:
        self.shown.append(content)


async def test_a_renderer_in_japanese_writes_japanese_status_lines() -> None:
    sink = Recording()
    renderer = Renderer(sink, max_chars=100, edit_interval_s=0, locale="ja")
    renderer.ahead = 2
    await renderer._publish()
    renderer.status = Status.DONE
    await renderer._publish()
    assert [content.footer for content in sink.shown] == [
        t("status.queued", "ja", ahead=2),
        t("status.done", "ja"),
    ]
    assert [(content.status, content.ahead) for content in sink.shown] == [
        (Status.QUEUED, 2),
        (Status.DONE, 2),
    ]
