"""Yes/no questions, which the default model answers "No" whatever the article says, get the
article's sentence quoted alone (``engine/answering/yes_no.py``), unless the settings say the model
can
answer them. Through the engine: tests/test_grounded_quotes.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from broker.protocol import make_request
from config.settings import Settings
from engine.answering.pipeline import AnswerPlanner
from engine.answering.yes_no import is_yes_no_question
from engine.knowledge.scrape.builder import build_kb
from tests.grounded_fixture import BASE, site_articles


@pytest.mark.parametrize(
    "question",
    [
        "Can I bring my dog on the ferry?",
        "Is the museum open on Mondays?",
        "are dogs allowed on the ferry",  # no capital, no question mark
        "Do I need a password for the free Wi-Fi?",
        "Isn't the library card free?",
        "Doesn\u2019t the ferry run every day?",  # a typographic apostrophe
        "And is it free for children?",  # a follow-up
        "I have a small dog. Can it come on the ferry?",  # the sentence that asks
        "Hi! Will the festival go ahead if it rains?",
        "Do I have to pay for a helmet when I rent a bicycle?",  # "when" as a conjunction
        "Is it better than calling process.exit()?",  # a dot inside a name ends no sentence
        "Is Python 3.12 still supported?",  # nor one inside a number
    ],
)
def test_a_question_answered_with_yes_or_no_is_told_apart(question: str) -> None:
    assert is_yes_no_question(question)


@pytest.mark.parametrize(
    "question",
    [
        "When does the last ferry leave?",
        "How much is a ferry ticket for a child?",
        "Can you tell me when the last ferry leaves?",  # asks when: the model may answer
        "Do you know how much a ticket is?",
        "Is the museum open when Monday is a holiday?",  # a question word early: the model
        "Ferry times?",
        "Tell me about the lantern festival.",
        "Candles at the festival?",  # "can" only as the start of a word
        "温泉に駐車場はありますか？",  # noqa: RUF001  # Japanese: the model does not write it anyway
        "",
        "?",
    ],
)
def test_other_questions_are_not(question: str) -> None:
    assert not is_yes_no_question(question)


@pytest.mark.parametrize("model_answers", [False, True])
def test_the_model_answers_a_yes_no_question_only_when_the_settings_say_it_can(
    settings: Settings, model_answers: bool
) -> None:
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    chosen = settings.model_copy(update={"model_answers_yes_no": model_answers})
    request = make_request(reply_to="b", user_id="u", question="Can I bring my dog?", ttl_s=9)

    prompt = AnswerPlanner(chosen, lambda messages: 0).plan(request)

    assert prompt.asks_model is model_answers
    assert bool(prompt.messages) is model_answers
    assert prompt.sources == (f"{BASE}/ferry-timetable.html",)
    assert prompt.evidence is not None
    assert "carrier" in prompt.evidence.quote
