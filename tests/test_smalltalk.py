"""Small talk ("hi", "thanks!", "ありがとう") told apart from questions: the pure rule. The
answers through the real engine are in tests/test_grounded_quotes.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from broker.protocol import make_request
from config.settings import Settings
from config.texts import t
from engine.answering.pipeline import AnswerPlanner
from engine.answering.smalltalk import small_talk, without_small_talk
from engine.knowledge.scrape.builder import build_kb
from tests.grounded_fixture import site_articles


@pytest.mark.parametrize(
    ("said", "kind"),
    [
        ("hi", "greeting"),
        ("Hello!", "greeting"),
        ("hey there 👋", "greeting"),
        ("Good morning.", "greeting"),
        ("hello?", "greeting"),  # is anyone there: still no question about the site
        ("thanks!", "thanks"),
        ("Thank you very much", "thanks"),
        ("ok, thanks a lot!!", "thanks"),
        ("hi, thanks", "thanks"),  # thanks said last counts over the greeting
        ("Great, thank you for the help.", "thanks"),
        ("bye", "goodbye"),
        ("こんにちは", "greeting"),
        ("こんにちは！", "greeting"),  # noqa: RUF001  # full-width, as typed in Japanese
        ("おはようございます。", "greeting"),
        ("ありがとう", "thanks"),
        ("ありがとうございました！", "thanks"),  # noqa: RUF001
        ("どうもありがとう", "thanks"),
        ("さようなら", "goodbye"),
        ("ＨＥＬＬＯ", "greeting"),  # noqa: RUF001  # full-width Latin
    ],
)
def test_greetings_and_thanks_are_small_talk(said: str, kind: str) -> None:
    assert small_talk(said) == kind


@pytest.mark.parametrize(
    "said",
    [
        "hi, how do I return an item?",
        "Hello, when does the last ferry leave?",
        "thanks, and how much is the ticket?",
        "thanks for the ferry times",
        "Hi! Is the museum open on Mondays?",
        "こんにちは、ようかんはいくらですか？",  # noqa: RUF001
        "ありがとう。温泉は何時までですか",
        "ok",  # no greeting nor thanks in it
        "hello world program in python",
        "",
        "?",
        "thanks " * 30,  # not short
        "high tide",  # "hi" only as a whole word
        "Thanksgiving opening hours",
    ],
)
def test_a_question_is_never_small_talk(said: str) -> None:
    assert small_talk(said) is None


@pytest.mark.parametrize(
    ("asked", "searched"),
    [
        ("Hi, when does the last ferry leave?", "when does the last ferry leave?"),
        ("Thanks! And how much is the ticket?", "how much is the ticket?"),
        ("When does the ferry leave? Thanks!", "When does the ferry leave?"),
        ("こんにちは、ようかんはいくらですか？", "ようかんはいくらですか？"),  # noqa: RUF001
        ("THANKS!! how much?", "how much?"),
        # unchanged: nothing around it, only fillers, no word end, or small talk alone
        ("When does the ferry leave?", "When does the ferry leave?"),
        ("And how much is the ticket?", "And how much is the ticket?"),
        ("おやすみの日はいつですか", "おやすみの日はいつですか"),  # a day off, not good night
        ("こんにちはようかん", "こんにちはようかん"),
        ("Highlights of the festival?", "Highlights of the festival?"),
        ("Where can I see you", "Where can I see you"),  # after it: a sentence of its own only
        (
            "What time is the first boat in the morning?",
            "What time is the first boat in the morning?",
        ),
        ("thanks!", "thanks!"),
        ("--watch オプションは何をしますか？", "--watch オプションは何をしますか？"),  # noqa: RUF001
        (".mjs files: are they ES modules?", ".mjs files: are they ES modules?"),
    ],
)
def test_the_search_reads_a_question_without_the_small_talk_around_it(
    asked: str, searched: str
) -> None:
    assert without_small_talk(asked) == searched


@pytest.mark.parametrize("kb_empty", [True, False])
def test_small_talk_gets_its_sentence_before_and_after_the_first_rescrape(
    settings: Settings, kb_empty: bool
) -> None:
    """Before any rescrape the model answers questions, but "hi" made it tell a story."""
    if not kb_empty:
        build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    planner = AnswerPlanner(settings, lambda messages: 0)

    greeted = planner.plan(make_request(reply_to="b", user_id="u", question="hi", ttl_s=9))
    asked = planner.plan(
        make_request(reply_to="b", user_id="u", question="What is a ferry?", ttl_s=9)
    )

    assert (greeted.step, greeted.asks_model, greeted.sources) == ("small_talk", False, ())
    assert greeted.note == t("engine.answer.greeting", "en")
    assert asked.step == ("no_articles" if kb_empty else "model")
    assert asked.asks_model and asked.messages
