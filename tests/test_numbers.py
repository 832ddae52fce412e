"""A number the model's words give that nothing it read gives leaves its words out of the
answer (engine/answering/numbers.py): the site's quote stands alone, and the asker is told."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done, HistoryTurn, ReplyEvent, TokenEvent
from config.settings import Settings
from engine.answering.numbers import unbacked_numbers
from engine.answering.wording import WORDING
from engine.backends.base import Backend, ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.knowledge.scrape.builder import build_kb
from tests.conftest import start_engine
from tests.grounded_fixture import ask, site_articles
from tests.helpers import collect

PAGE = "fetch-timeout — Default: 300000 (5 minutes). Retries 2 times, 1,200 ms apart."


class Says:
    """The real model, whose answer is the given pieces: what SmolLM2 writes varies with the
    machine, and this test is about what the engine does with a wrong number."""

    def __init__(self, real: Backend, pieces: Sequence[str]) -> None:
        self.real = real
        self.pieces = pieces

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        yield from self.pieces
        return "stop"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_number_nothing_read_gives_is_found() -> None:
    assert unbacked_numbers("The default is 30000.", [PAGE]) == ["30000"]
    assert unbacked_numbers("It is 300000 ms, 5 minutes; 1200 ms between tries.", [PAGE]) == []
    assert unbacked_numbers("Set it to 07:10 or 7:10.", ["The ferry leaves at 7:10."]) == []


def test_numbering_code_and_addresses_are_not_claims() -> None:
    answer = (
        "1. Open the config.\n2) Set it:\n```\nfor i in range(10):\n    pass\n```\n"
        "Then call `retry(3)`. See <https://docs.example/v11/config.html#fetch-timeout>."
    )

    assert unbacked_numbers(answer, [PAGE]) == []
    assert unbacked_numbers(answer + " It waits 42 seconds.", [PAGE]) == ["42"]


def test_a_number_is_read_as_a_reader_reads_it() -> None:
    """Found by review: each of these was taken for a number the site does not give."""
    assert unbacked_numbers("New in Python 3, since 3.11.", ["Changed in version 3.11.2"]) == []
    assert unbacked_numbers("It costs 1.50, or \uff13\uff10\uff10 yen.", ["1.5 or 300"]) == []
    assert unbacked_numbers("Step 1: open it.\n### 2. Then save.", ["nothing"]) == []
    # An answer cut at the token cap inside its last number is not taken at its word.
    assert unbacked_numbers("The default is 300", ["Default: 300000"], cut=True) == []
    assert unbacked_numbers("The default is 300", ["Default: 300000"]) == ["300"]


async def test_the_models_words_with_a_wrong_time_are_left_out_for_the_quote(
    settings: Settings, backend: Backend, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """The site says 16:50; an answer of 16:55 streams, then the terminal text replaces it
    with the note, the quote and the sources. The same answer with 16:50 is kept."""
    caplog.set_level(logging.INFO, logger="engine.jobs.answer")
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    question = "When does the last ferry leave Minato?"
    texts = {}
    for said in ("16:55", "16:50"):
        says = Says(backend, ["The last ferry ", f"leaves at {said}."])
        engine = await start_engine(settings, says)  # type: ignore[arg-type]
        async with ConciergeClient(settings, "test") as client:
            done, events = await ask(client, question)
        await engine.stop()
        streamed = "".join(e.text for e in events if isinstance(e, TokenEvent))
        assert f"leaves at {said}." in streamed
        texts[said] = done.text

    withdrawn, kept = texts["16:55"], texts["16:50"]
    assert withdrawn.startswith(WORDING["en"].withdrawn + "\n\n")
    assert "16:55" not in withdrawn and "16:50" in withdrawn  # the quote's
    assert "ferry-timetable.html" in withdrawn  # the sources
    assert kept.startswith("The last ferry leaves at 16:50.\n\n")
    assert WORDING["en"].withdrawn not in kept
    left_out = [r.getMessage() for r in caplog.records if "words left out" in r.getMessage()]
    assert len(left_out) == 1 and left_out[0].endswith("numbers nothing backs: 16:55")


async def ferry_answer(
    settings: Settings, backend: Backend, pieces: Sequence[str]
) -> tuple[Done, list[ReplyEvent]]:
    """The test site's answer to the last ferry's time, the model saying ``pieces``."""
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    engine = await start_engine(settings, Says(backend, pieces))  # type: ignore[arg-type]
    async with ConciergeClient(settings, "test") as client:
        done, events = await ask(client, "When does the last ferry leave Minato?")
    await engine.stop()
    return done, events


async def test_words_left_out_inside_an_open_code_block_close_it_before_the_note(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    """Else the note, the quote and the sources would show as code where the streamed words
    stay shown (the terminal)."""
    done, events = await ferry_answer(
        settings, backend, ["It leaves at 16:55:\n```\n", "ferry --at 16:55"]
    )

    last = [e.text for e in events if isinstance(e, TokenEvent)][-1]
    assert last.startswith("\n```\n\n" + WORDING["en"].withdrawn)
    assert done.text.startswith(WORDING["en"].withdrawn)


async def test_a_number_only_the_models_earlier_answer_gave_is_not_backed(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    """Seen in ``concierge chat``: after the ferry's "The answer is: 1,200 yen.", "How much is
    the museum for adults?" got "The answer is: 1,200 yen." again (the museum: 800 yen). The
    model's own earlier answers are no source; the asker's turns are."""
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    history = (
        HistoryTurn(role="user", text="How much is the ferry ticket? We are 3 adults."),
        HistoryTurn(role="assistant", text="The answer is: 1,200 yen."),
    )
    texts = {}
    for said in ("1,200", "3"):
        says = Says(backend, [f"The answer is: {said} "])
        engine = await start_engine(settings, says)  # type: ignore[arg-type]
        async with ConciergeClient(settings, "test") as client:
            # a follow-up: a new question's model reads no turn (pipeline.py, step 7)
            asked = Ask("And how much is the museum for adults?", "u1", history=history)
            events = await collect(await client.ask(asked), timeout_s=120)
        await engine.stop()
        assert isinstance(events[-1], Done)
        texts[said] = events[-1].text

    assert texts["1,200"].startswith(WORDING["en"].withdrawn)
    assert texts["3"].startswith("The answer is: 3")  # the asker said it


async def test_a_figure_from_a_passage_stands_when_the_quote_gives_one_too(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    """The quote may be the wrong sentence ("How long is the keep-alive timeout…?" was quoted
    "A value of 0 makes the http server behave…" above "Default: 5000" in the passage): only
    a quote that says its figure in words stands for the passages (review)."""
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    said = "The last ferry leaves at 16:50."  # on the page, not in the crossing's sentence
    engine = await start_engine(settings, Says(backend, [said]))  # type: ignore[arg-type]
    async with ConciergeClient(settings, "test") as client:
        done, _ = await ask(client, "How long does the ferry crossing take?")
    await engine.stop()

    assert "The crossing takes 35 minutes in calm weather." in done.text  # the quote
    assert done.text.startswith(said + "\n\n")
