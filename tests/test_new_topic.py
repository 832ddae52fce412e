"""A question in a conversation is searched alone unless it reads as a follow-up
(engine/answering/history.py ``leans_on_earlier``): a new topic searched with the last one's
words finds the last one's pages (npm's real pages, eval/npmdocs)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.protocol import HistoryTurn, make_request
from config.settings import Settings
from engine.answering.history import leans_on_earlier
from engine.answering.pipeline import AnswerPlanner, Plan
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.scrape.extract import extract_article
from tests.grounded_fixture import BASE as SITE_BASE
from tests.grounded_fixture import site_articles

NPM_SITE = Path(__file__).resolve().parent.parent / "eval" / "npmdocs" / "site" / "commands"
BASE = "http://docs.example"
PAGES = ("npm-ci", "npm-cache", "npm-uninstall", "npm-install", "npm-ls", "npm-prune")
CI_QUESTION = "npm ci は package-lock.json と package.json が一致しないとどうなりますか\uff1f"


@pytest.mark.parametrize(
    "question",
    [
        "And how much is the ticket?",
        "For how long can I keep them?",
        "And an electric one?",
        "Is there a discount for children?",
        "What about on Sundays?",
        "How much for children?",  # names nothing, says too little to stand alone
        "それはいくらですか\uff1f",
        "じゃあ、日曜日は\uff1f",
        "子供料金は\uff1f",  # a topic alone: "and the children's fare?"
        "それを止めるには\uff1f",  # acts on "it"
        "料金を教えてください",  # "tell me the fee": a request to be told, of the topic before
        "場所を教えて",
    ],
)
def test_a_follow_up_leans_on_the_conversation(question: str) -> None:
    assert leans_on_earlier(question)


@pytest.mark.parametrize(
    "question",
    [
        "What does EAFP stand for?",  # a name: a topic of its own
        "How do I save Valgrind's messages into a file instead of the terminal?",
        "I want one of my functions to run automatically just before my program finishes.",
        "When does the museum open on Mondays?",
        "npm のキャッシュを削除するにはどうすればいいですか\uff1f",
        "セキュリティ用のトークンには何バイトの乱数があれば十分とされていますか\uff1f",  # "あれ"
        # short, but names what it acts on: tried in `concierge chat`, it was searched with
        # the question before it (child processes) and quoted that page's warning
        "タイマーを止めるには\uff1f",
    ],
)
def test_a_new_question_stands_alone(question: str) -> None:
    assert not leans_on_earlier(question)


@pytest.fixture
def planner(settings: Settings) -> AnswerPlanner:
    articles = []
    for name in PAGES:
        url = f"{BASE}/commands/{name}.html"
        html = (NPM_SITE / f"{name}.html").read_bytes()
        articles.append(extract_article(html, url).article(url))
    build_kb(settings.kb_path, settings.kb_path, articles, [], datetime.now(UTC))
    return AnswerPlanner(settings, lambda messages: 0)


def sources_after(planner: AnswerPlanner, earlier: str, question: str) -> tuple[str, ...]:
    """The sources of ``question`` asked after ``earlier`` (and its answer)."""
    history = (
        HistoryTurn(role="user", text=earlier),
        HistoryTurn(role="assistant", text="npm ci will exit with an error."),
    )
    request = make_request(reply_to="b", user_id="u", question=question, ttl_s=9)
    return planner.plan(request.model_copy(update={"history": history})).sources


def test_a_new_topic_is_not_searched_with_the_last_ones_words(planner: AnswerPlanner) -> None:
    """Seen in ``concierge chat``: the cache question after one about npm ci was answered from
    npm-uninstall's examples (its Latin words, "npm" alone, were outweighed by "ci" and
    "package-lock.json" of the question before); asked alone, from npm-cache's page."""
    question = "npm のキャッシュを削除するにはどうすればいいですか\uff1f"
    request = make_request(reply_to="b", user_id="u", question=question, ttl_s=9)
    alone = planner.plan(request).sources

    assert alone == (f"{BASE}/commands/npm-cache.html",)
    assert sources_after(planner, CI_QUESTION, question) == alone


def test_a_follow_up_is_still_searched_with_the_question_before(planner: AnswerPlanner) -> None:
    """npm-ci's page: "individual dependencies cannot be added with this command"; the
    question alone reads as npm-install's."""
    follow_up = "Can it install a single package?"
    request = make_request(reply_to="b", user_id="u", question=follow_up, ttl_s=9)

    assert planner.plan(request).sources == (f"{BASE}/commands/npm-install.html",)
    assert sources_after(planner, CI_QUESTION, follow_up) == (f"{BASE}/commands/npm-ci.html",)


def test_a_follow_up_whose_words_meet_no_sentence_is_quoted_by_the_conversations(
    settings: Settings,
) -> None:
    """eval/followups.jsonl: "For how long can I keep them?" after a question on borrowing
    books meets no sentence of the library card's page by its own words ("keep"); the
    conversation's ("books", "borrow") find "borrow up to 10 books for three weeks"."""
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    planner = AnswerPlanner(settings, lambda messages: 0)
    history = (
        HistoryTurn(role="user", text="How many books can I borrow with a library card?"),
        HistoryTurn(role="assistant", text="Up to 10 books."),
    )
    request = make_request(
        reply_to="b", user_id="u", question="For how long can I keep them?", ttl_s=9
    )

    plan = planner.plan(request.model_copy(update={"history": history}))

    assert plan.sources == (f"{SITE_BASE}/library-card.html",)
    assert plan.evidence is not None and "three weeks" in plan.evidence.quote


def test_a_new_topic_is_answered_without_the_conversation_a_follow_up_with_it(
    settings: Settings,
) -> None:
    """Seen in ``concierge chat`` on the Cargo Book: the model gave the invented ``git clone``
    recipe of the answer before to the next, unrelated question. A new question's model reads
    no turn; what a follow-up will begin with (the read-ahead's ``lead``) still holds them."""
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    planner = AnswerPlanner(settings, lambda messages: 0)
    history = (
        HistoryTurn(role="user", text="How many books can I borrow with a library card?"),
        HistoryTurn(role="assistant", text="Run git clone https://library.example to borrow."),
    )

    def plan_after(question: str) -> Plan:
        request = make_request(reply_to="b", user_id="u", question=question, ttl_s=9)
        return planner.plan(request.model_copy(update={"history": history}))

    new_topic = plan_after("When does the museum open?")
    follow_up = plan_after("For how long can I keep them?")

    assert new_topic.step == follow_up.step == "model"
    assert [turn.role for turn in new_topic.messages] == ["system", "user"]
    assert "git clone" not in "".join(turn.content for turn in new_topic.messages)
    assert new_topic.history.used == 0
    assert [turn.role for turn in follow_up.messages] == ["system", "user", "assistant", "user"]
    assert follow_up.history.used == 2
    # a follow-up of either begins with the system text and the whole conversation
    assert new_topic.lead() == follow_up.lead() == follow_up.messages[:-1]
