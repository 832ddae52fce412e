"""Answers users can trust, through the real engine, broker and model: the site's own sentence
quoted with its one source, an honest "not on the site" in the question's language, a
Japanese question and a yes/no question answered by its quote, the empty-knowledge-base note
in plain text, an answer at the token cap that says so; and the token loop stopping an answer
that repeats itself (a backend that replays a real loop of the default model)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done, FinishReason, HistoryTurn, ReplyEvent, make_request
from config.settings import Settings
from config.texts import t
from config.texts.engine import TEXTS as ENGINE_TEXTS
from engine.answering.closing import closing
from engine.answering.pipeline import AnswerPlanner, Plan
from engine.answering.wording import WORDING
from engine.backends.base import Backend, ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.cancelled import CancelledSessions
from engine.generation.ending import ending_event
from engine.generation.loop import Generation, run_token_loop
from engine.generation.repetition import RepetitionDetector
from engine.knowledge.models import Article, Passage
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.scrape.extract import extract_article
from engine.knowledge.store import NO_ARTICLES_MESSAGE
from engine.replies import EventHeader
from tests.conftest import LONG_QUESTION, start_engine
from tests.helpers import collect, token_text

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "eval" / "site" / "articles"
BASE = "https://guide.example/articles"
LOOP_SAMPLES = json.loads((Path(__file__).parent / "loop_samples.json").read_text())
SOURCES_RE = re.compile(r"\nSources:\n((?:- [^\n]*\n?)+)$")
MARKDOWN_RE = re.compile(r"(?<!\w)[_*]\S|\S[_*](?!\w)|`")  # _emphasis_, **bold**, `code`


def site_articles() -> list[Article]:
    """eval/site's articles, extracted as a rescrape extracts them."""
    articles = []
    for page in sorted(SITE.glob("*.html")):
        url = f"{BASE}/{page.name}"
        articles.append(extract_article(page.read_bytes(), url).article(url))
    return articles


@pytest.fixture
async def site_client(
    settings: Settings, backend: Backend, broker: Broker
) -> AsyncIterator[ConciergeClient]:
    """A client of an engine whose knowledge base holds the test site (eval/site)."""
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    engine = await start_engine(settings, backend)
    async with ConciergeClient(settings, "test") as client:
        yield client
    await engine.stop()


async def ask(client: ConciergeClient, question: str) -> tuple[Done, list[ReplyEvent]]:
    events = await collect(await client.ask(Ask(question, "u1")), timeout_s=120)
    end = events[-1]
    assert isinstance(end, Done), end
    return end, events


def cited(text: str) -> list[str]:
    listed = SOURCES_RE.search(text)
    return re.findall(r"<(http[^>]+)>", listed[1]) if listed else []


# --- grounded answers -----------------------------------------------------------------------


async def test_a_covered_question_quotes_its_article_and_cites_only_it(
    site_client: ConciergeClient,
) -> None:
    done, events = await ask(site_client, "When does the last ferry leave?")

    ferry = f"{BASE}/ferry-timetable.html"
    assert done.sources == (ferry,) and not done.not_on_site
    assert cited(done.text) == [ferry]
    quote = re.search(r"From the site: \u201c(.+)\u201d\nSources:", done.text)
    assert quote is not None and "16:50" in quote[1]  # the article's own words
    assert done.tokens > 0 and done.finish_reason == "stop"  # the model answered first
    assert token_text(events) == done.text  # the quote was streamed too


@pytest.mark.parametrize(
    ("question", "said"),
    [
        # the ferry is there, Osaka is not
        ("When does the ferry to Osaka leave?", WORDING["en"].not_on_site),
        ("How long is the warranty?", WORDING["en"].not_on_site),  # nothing of it is
        # the hot spring is there, parking is not
        ("温泉に駐車場はありますか\uff1f", WORDING["ja"].not_on_site),
    ],
)
async def test_a_question_the_site_does_not_cover_is_told_so_without_a_source(
    site_client: ConciergeClient, question: str, said: str
) -> None:
    done, _ = await ask(site_client, question)

    assert done.text == said
    assert done.not_on_site and done.sources == ()
    assert done.tokens == 0  # the model was not asked: nothing to invent, no engine time


async def test_small_talk_gets_a_friendly_sentence_without_the_model_or_a_source(
    site_client: ConciergeClient,
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
    site_client: ConciergeClient,
) -> None:
    done, _ = await ask(site_client, "こんにちは、ようかんはいくらですか\uff1f")

    assert done.sources == (f"{BASE}/yokan-shop.html",) and "1,500" in done.text
    assert done.tokens == 0  # the quote alone, as for the question without its greeting


async def test_a_hiragana_question_gets_its_passage_quoted(
    site_client: ConciergeClient,
) -> None:
    done, _ = await ask(site_client, "ようかんはいくらですか\uff1f")

    shop = f"{BASE}/yokan-shop.html"
    assert done.sources == (shop,) and cited(done.text) == [shop]
    quote = re.fullmatch(r"サイトの記事より：「(.+)」\nSources:\n- .*", done.text)  # noqa: RUF001
    assert quote is not None and "1,500" in quote[1] and "ようかん" in quote[1]
    assert done.tokens == 0  # the default model does not write Japanese: the quote is the answer


async def test_a_yes_no_question_gets_the_sentence_that_answers_it_alone(
    site_client: ConciergeClient,
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


# --- the token cap -------------------------------------------------------------------------


async def test_an_answer_at_the_token_cap_ends_as_length_and_says_so(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    capped = settings.model_copy(update={"max_tokens": 12})
    engine = await start_engine(capped, backend)
    async with ConciergeClient(capped, "test") as client:
        done, _ = await ask(client, LONG_QUESTION)
    await engine.stop()

    assert done.finish_reason == "length"
    assert done.tokens <= 12  # a piece is one token or more
    note = WORDING["en"].cut_length.format(max_tokens=12)
    assert f"\n\n{note}\n\n{NO_ARTICLES_MESSAGE}" in done.text


def test_the_real_backend_says_when_it_stopped_at_the_cap(backend: Backend) -> None:
    long, short = [ChatMessage("user", LONG_QUESTION)], [ChatMessage("user", "Say OK.")]

    at_cap = returned(backend.stream(long, lambda: False, GenerationLimits(max_tokens=5)))
    whole = returned(backend.stream(short, lambda: False, GenerationLimits(200, 0.0)))

    assert (at_cap, whole) == ("length", "stop")


def returned(pieces: Pieces) -> FinishReason | None:
    """What a stream returns once its pieces are taken: why the model stopped."""
    while True:
        try:
            next(pieces)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]  # StopIteration.value is Any


# --- the token loop ------------------------------------------------------------------------


class Replay:
    """A backend that yields the given pieces, as the model did (a fake of llama.cpp only)."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = pieces
        self.taken = 0

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        for piece in self.pieces[: limits.max_tokens]:
            self.taken += 1
            yield piece
        return "length" if len(self.pieces) >= limits.max_tokens else "stop"

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return 0


def replay(
    pieces: Sequence[str], max_tokens: int = 512, paragraphs: int = 0
) -> tuple[Generation, list[str], Replay]:
    backend = Replay(pieces)
    emitted: list[str] = []
    generation = Generation("s", time_limit_at=float("inf"))
    run_token_loop(
        backend,
        [ChatMessage("user", "q")],
        generation,
        CancelledSessions(10, 60),
        emitted.append,
        GenerationLimits(max_tokens=max_tokens),
        paragraphs,
    )
    return generation, emitted, backend


@pytest.mark.parametrize("name", ["last-ferry", "onsen-closing", "library-hours"])
def test_the_token_loop_stops_a_real_loop_and_drops_its_repeated_tail(name: str) -> None:
    pieces = LOOP_SAMPLES["loops"][name]  # the default model's own loop, 300 pieces of 512

    generation, emitted, backend = replay(pieces)

    loop = _first_loop(pieces)
    assert backend.taken == loop.stopped_at < len(pieces)  # nothing generated after it
    assert generation.finish_reason == "repetition" and generation.finished_naturally
    assert generation.answer == "".join(pieces[: loop.since])  # one copy, not the repeats
    assert emitted == pieces[: loop.stopped_at - 1]  # the piece that showed the loop is not sent


def test_an_answer_that_does_not_loop_runs_its_course() -> None:
    prose = LOOP_SAMPLES["clean"]["prose"]

    generation, emitted, _ = replay(prose)

    assert generation.finish_reason == "stop"
    assert generation.answer == "".join(prose) == "".join(emitted)


def test_an_answer_at_the_cap_is_length_even_from_a_backend_that_cannot_tell() -> None:
    class Silent(Replay):
        def stream(
            self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
        ) -> Pieces:
            yield from self.pieces[: limits.max_tokens]
            return None

    prose = LOOP_SAMPLES["clean"]["prose"]
    generation = Generation("s", time_limit_at=float("inf"))
    limits = GenerationLimits(max_tokens=20)
    run_token_loop(Silent(prose), [], generation, CancelledSessions(10, 60), print, limits)

    assert (generation.tokens, generation.finish_reason) == (20, "length")


def test_a_cut_answer_says_why_before_its_evidence() -> None:
    plan = Plan("not_on_site", "en", note=WORDING["en"].not_on_site)

    assert closing(plan, "stop", 512, after_text=False) == WORDING["en"].not_on_site
    cut = closing(Plan("model", "ja"), "repetition", 512, after_text=True)
    assert cut == "\n\n" + WORDING["ja"].cut_repetition


def test_done_says_how_the_answer_ended_and_what_it_stood_on() -> None:
    ferry = Passage("Ferry timetable", f"{BASE}/ferry-timetable.html", "It leaves at 16:50.")
    cut = Generation("s", time_limit_at=100.0, pieces=["A", "B", "A", "B"], started_at=1.0)
    cut.finish_reason, cut.kept, cut.finished_at = "repetition", 2, 2.0
    header = EventHeader(session_id="session-1", seq=3, context={})

    grounded = ending_event(
        cut, header, cancel_received_at=None, time_limit_s=60, plan=Plan("model", "en", (ferry,))
    )
    honest = ending_event(
        Generation("s", time_limit_at=100.0, started_at=1.0, finished_at=1.0),
        header,
        cancel_received_at=None,
        time_limit_s=60,
        plan=Plan("not_on_site", "en", note=WORDING["en"].not_on_site),
    )

    assert isinstance(grounded, Done) and isinstance(honest, Done)
    assert (grounded.text, grounded.tokens, grounded.finish_reason) == ("AB", 4, "repetition")
    assert (grounded.sources, grounded.not_on_site) == ((ferry.url,), False)
    assert (honest.sources, honest.not_on_site, honest.finish_reason) == ((), True, "stop")


class _Found:
    def __init__(self, since: int, stopped_at: int) -> None:
        self.since = since
        self.stopped_at = stopped_at


def _first_loop(pieces: Sequence[str]) -> _Found:
    detector = RepetitionDetector()
    for count, piece in enumerate(pieces, start=1):
        loop = detector.feed(piece)
        if loop is not None:
            return _Found(loop.since, count)
    raise AssertionError("no loop in the sample")
