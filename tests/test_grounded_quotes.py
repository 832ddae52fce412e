"""Grounded answers through the real engine: quotes, sources, small talk and plain text."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done, HistoryTurn, make_request
from config.settings import Settings
from config.texts import t
from config.texts.engine import TEXTS as ENGINE_TEXTS
from engine.answering.pipeline import AnswerPlanner
from engine.answering.wording import WORDING, Language
from engine.backends.base import Backend
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.store import NO_ARTICLES_MESSAGE
from tests.conftest import start_engine
from tests.grounded_fixture import (
    BASE,
    ask,
    site_articles,
    site_client,  # noqa: F401  # the fixture
)
from tests.helpers import collect, streamed_is_final

SOURCES_RE = re.compile(r"\nSources:\n((?:- [^\n]*\n?)+)$")
MARKDOWN_RE = re.compile(r"(?<!\w)[_*]\S|\S[_*](?!\w)|`")  # _emphasis_, **bold**, `code`


def cited(text: str) -> list[str]:
    listed = SOURCES_RE.search(text)
    return re.findall(r"<(http[^>]+)>", listed[1]) if listed else []


# --- grounded answers -----------------------------------------------------------------------


async def test_a_covered_question_quotes_its_article_and_cites_only_it(
    site_client: ConciergeClient,  # noqa: F811  # the fixture imported above
) -> None:
    done, events = await ask(site_client, "When does the last ferry leave?")

    ferry = f"{BASE}/ferry-timetable.html"
    assert done.sources == (ferry,) and not done.not_on_site
    assert cited(done.text) == [ferry]
    quote = re.search(r"From the site: \u201c(.+)\u201d\nSources:", done.text)
    assert quote is not None and "16:50" in quote[1]  # the article's own words
    assert done.tokens > 0 and done.finish_reason == "stop"  # the model answered first
    assert streamed_is_final(events, done.text)  # the quote was streamed too


@pytest.mark.parametrize(
    ("question", "language", "nearest"),
    [
        # the ferry is there, Osaka is not: the ferry's page is the nearest
        ("When does the ferry to Osaka leave?", "en", "ferry-timetable.html"),
        ("How long is the warranty?", "en", None),  # nothing of it is: nothing found, none
        # the hot spring is there, parking is not
        ("温泉に駐車場はありますか\uff1f", "ja", "onsen"),
    ],
)
async def test_a_question_the_site_does_not_cover_is_told_so_without_a_source(
    site_client: ConciergeClient,  # noqa: F811  # the fixture imported above
    question: str,
    language: Language,
    nearest: str | None,
) -> None:
    done, _ = await ask(site_client, question)

    said, _, pointed = done.text.partition("\n\n")
    assert said == WORDING[language].not_on_site
    assert done.not_on_site and done.sources == ()
    assert "Sources:" not in done.text  # the nearest sections are no sources of an answer
    if nearest is None:
        assert pointed == ""
    else:
        heading, *links = pointed.splitlines()
        assert heading == WORDING[language].nearest
        assert 1 <= len(links) <= 2
        assert all(re.fullmatch(r"- .+ <https://\S+>", link) for link in links)
        assert nearest in links[0], links
    assert done.tokens == 0  # the model was not asked: nothing to invent, no engine time


async def test_small_talk_gets_a_friendly_sentence_without_the_model_or_a_source(
    site_client: ConciergeClient,  # noqa: F811  # the fixture imported above
) -> None:
    said = {
        "hi": WORDING["en"].greeting,
        "Hello!": WORDING["en"].greeting,
        "thanks!": WORDING["en"].thanks,
        "こんにちは": WORDING["ja"].greeting,
        "ありがとう": WORDING["ja"].thanks,
    }
    for number, (question, answer) in enumerate(said.items()):
        done = (await collect(await site_client.ask(Ask(question, f"u{number}"))))[-1]

        assert isinstance(done, Done) and done.text == answer, question
        assert done.tokens == 0 and done.sources == ()  # no model call, nothing cited
        assert not done.not_on_site  # not a question the site fails to cover

    earlier = (  # thanks after an answer: small talk, not a follow-up about the ferry
        HistoryTurn(role="user", text="When does the last ferry leave?"),
        HistoryTurn(role="assistant", text="The last ferry leaves Minato at 16:50."),
    )
    thanked = (await collect(await site_client.ask(Ask("Thank you!", "u9", history=earlier))))[-1]
    assert isinstance(thanked, Done)
    assert (thanked.text, thanked.tokens, thanked.sources) == (WORDING["en"].thanks, 0, ())


@pytest.mark.parametrize(
    ("question", "article"),
    [
        ("Hi, when does the last ferry leave?", "ferry-timetable"),
        ("Thanks! And how much is the museum?", "museum-hours"),
        ("When does the last ferry leave? Thanks!", "ferry-timetable"),
        ("こんにちは、ようかんはいくらですか\uff1f", "yokan-shop"),
        ("ありがとう。温泉の入浴料はいくらですか", "onsen"),
    ],
)
def test_a_question_with_a_greeting_or_thanks_around_it_is_still_a_question(
    settings: Settings, question: str, article: str
) -> None:
    """Searched and judged without its small talk: counted as something the site must cover,
    "thanks" or "こんにちは" made a covered question read as not covered."""
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    request = make_request(reply_to="b", user_id="u", question=question, ttl_s=9)

    prompt = AnswerPlanner(settings, lambda messages: 0).plan(request)

    assert prompt.sources == (f"{BASE}/{article}.html",)
    assert prompt.evidence is not None and prompt.step in ("model", "quote_only")


async def test_a_japanese_question_after_a_greeting_gets_its_quote(
    site_client: ConciergeClient,  # noqa: F811  # the fixture imported above
) -> None:
    done, _ = await ask(site_client, "こんにちは、ようかんはいくらですか\uff1f")

    assert done.sources == (f"{BASE}/yokan-shop.html",) and "1,500" in done.text
    assert done.tokens == 0  # the quote alone, as for the question without its greeting


async def test_a_hiragana_question_gets_its_passage_quoted(
    site_client: ConciergeClient,  # noqa: F811  # the fixture imported above
) -> None:
    done, _ = await ask(site_client, "ようかんはいくらですか\uff1f")

    shop = f"{BASE}/yokan-shop.html"
    assert done.sources == (shop,) and cited(done.text) == [shop]
    quote = re.fullmatch(r"サイトの記事より：「(.+)」\nSources:\n- .*", done.text)  # noqa: RUF001
    assert quote is not None and "1,500" in quote[1] and "ようかん" in quote[1]
    assert done.tokens == 0  # the default model does not write Japanese: the quote is the answer


async def test_a_yes_no_question_gets_the_sentence_that_answers_it_alone(
    site_client: ConciergeClient,  # noqa: F811  # the fixture imported above
) -> None:
    """Asked, the default model said "No, dogs are not allowed on the ferry" above the quote
    that allows them."""
    done, _ = await ask(site_client, "Are dogs allowed on the ferry?")

    ferry = f"{BASE}/ferry-timetable.html"
    assert done.tokens == 0  # no model words to contradict the site
    assert done.sources == (ferry,) and cited(done.text) == [ferry]
    assert re.match(r"From the site: \u201c[^\u201d]*closed carrier\.\u201d\nSources:", done.text)


async def test_the_empty_knowledge_base_note_is_plain_text_after_a_general_answer(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    engine = await start_engine(settings, backend)
    async with ConciergeClient(settings, "test") as client:
        done, _ = await ask(client, "What colour is the sky?")
    await engine.stop()

    assert done.text.endswith("\n\n" + NO_ARTICLES_MESSAGE)
    assert done.tokens > 0  # before the first rescrape the model answers, labelled
    assert done.not_on_site and done.sources == ()
    assert MARKDOWN_RE.search(NO_ARTICLES_MESSAGE) is None


class _Filled(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "1"


def test_every_text_of_the_engine_is_plain_text() -> None:
    for key, texts in ENGINE_TEXTS.items():
        for locale, text in texts.items():
            filled = text.format_map(_Filled())
            assert MARKDOWN_RE.search(filled) is None, (key, locale, filled)
    for language, wording in WORDING.items():  # what the engine's answers read, from them
        assert wording.not_on_site == t("engine.answer.not_on_site", language)
        assert wording.cut_length.format(max_tokens=512) == t(
            "engine.answer.cut_length", language, max_tokens=512
        )
