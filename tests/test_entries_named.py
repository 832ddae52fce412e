"""A question naming an option or a function gets that entry, whatever the search ranked
(engine/answering/pipeline.py, step 2), on real pages of Node.js's reference (eval/nodedocs):
a Japanese question shares only the name with the page, and the entry's neighbours
("--watch-path", "--watch-preserve-output") hold it as well."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.protocol import make_request
from config.settings import Settings
from engine.answering.pipeline import AnswerPlanner, Plan
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.scrape.extract import extract_article

SITE = Path(__file__).resolve().parent.parent / "eval" / "nodedocs" / "site"
BASE = "http://docs.example"
PAGES = ("cli.html", "debugger.html", "http.html")


@pytest.fixture
def planner(settings: Settings) -> AnswerPlanner:
    articles = []
    for path in PAGES:
        url = f"{BASE}/{path}"
        articles.append(extract_article((SITE / path).read_bytes(), url).article(url))
    build_kb(settings.kb_path, settings.kb_path, articles, [], datetime.now(UTC))
    return AnswerPlanner(settings, lambda messages: 0)


def plan_for(planner: AnswerPlanner, question: str) -> Plan:
    return planner.plan(make_request(reply_to="b", user_id="u", question=question, ttl_s=9))


def test_a_japanese_question_naming_an_option_is_answered_by_its_entry(
    planner: AnswerPlanner,
) -> None:
    plan = plan_for(planner, "--watch オプションは何をしますか？")  # noqa: RUF001

    assert plan.step == "quote_only"
    assert plan.passages[0].anchor == "--watch"
    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("--watch — Starts Node.js in watch mode.")


def test_an_english_question_naming_an_entry_still_needs_its_words_on_the_page(
    planner: AnswerPlanner,
) -> None:
    """http.get()'s entry is found by its name, but it never speaks of redirects."""
    plan = plan_for(
        planner, "How do I set the maximum number of redirects that http.get() follows?"
    )

    assert plan.step == "not_on_site"
    assert plan.sources == ()


def test_an_english_question_naming_an_entry_is_answered_from_it(planner: AnswerPlanner) -> None:
    plan = plan_for(planner, "What does --max-old-space-size set?")

    assert plan.step == "model"
    assert plan.evidence is not None
    assert "Sets the max memory size of V8's old memory section." in plan.evidence.quote
    # the model reads the entry asked about, not its neighbours ("--max-semi-space-size")
    assert [p.anchor for p in plan.passages] == ["--max-old-space-sizesize-in-mib"]


def test_the_entry_a_question_names_is_looked_up_not_its_neighbours(
    planner: AnswerPlanner,
) -> None:
    """The search may rank "--watch-path" and "--watch-preserve-output" above "--watch", or
    leave it out: the lookup by name brings the entry itself, once."""
    question = "--watch オプションは何をしますか？"  # noqa: RUF001

    entries = planner._entries_named(question, [])

    assert [entry.anchor for entry in entries] == ["--watch"]
    assert planner._entries_named(question, entries) == []


def test_a_japanese_question_naming_an_option_with_its_value_finds_its_entry(
    planner: AnswerPlanner,
) -> None:
    plan = plan_for(planner, "--inspect オプションは何をしますか？")  # noqa: RUF001

    assert plan.step == "quote_only"
    assert plan.passages[0].heading.endswith("--inspect[=[host:]port]")


def test_an_english_question_about_a_setting_the_search_found_is_answered_from_it(
    settings: Settings,
) -> None:
    """ "What does fetch-timeout control?": "control" is not on the page, but the entry is the
    setting asked about (npm's config page)."""
    page = Path(__file__).resolve().parent.parent / "eval/npmdocs/site/using-npm/config.html"
    url = f"{BASE}/config.html"
    article = extract_article(page.read_bytes(), url).article(url)
    build_kb(settings.kb_path, settings.kb_path, [article], [], datetime.now(UTC))

    plan = plan_for(AnswerPlanner(settings, lambda messages: 0), "What does fetch-timeout control?")

    assert plan.step == "model"
    assert plan.evidence is not None and "300000" in plan.evidence.quote
