"""Answers on real pages of SQLite's documentation (eval/sqlitedocs), the sixth real site, held
out until its first eval run: pages read from what holds their headings (no <main>), and
statements named in capitals ("CREATE PROCEDURE")."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.answering.needs import capital_phrases
from engine.answering.pipeline import AnswerPlanner
from engine.knowledge.models import Passage
from engine.knowledge.store import _with_whole
from tests.real_pages import BASE, plan_for, planner_on_pages

SITE = Path(__file__).resolve().parent.parent / "eval" / "sqlitedocs" / "site"
PAGES = (
    "stricttables.html",
    "withoutrowid.html",
    "gencol.html",
    "quirks.html",
    "lang_createtable.html",
    "lang_createtrigger.html",
    "lang_insert.html",
    "lang_explain.html",
    "lang_altertable.html",
)


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> AnswerPlanner:
    return planner_on_pages(tmp_path_factory.mktemp("sqlite") / "kb.sqlite3", SITE, PAGES)


@pytest.mark.parametrize(
    ("question", "phrases"),
    [
        ("How do I create a stored procedure with CREATE PROCEDURE?", ["create procedure"]),
        ("Is INTEGER PRIMARY KEY an alias for the rowid?", ["integer primary key"]),
        ("How do I check CUDA GPU memory leaks?", []),  # acronyms, each a name of its own
        ("HOW DO I CREATE TABLE FOO?", []),  # shouted
        ("What does the STRICT keyword do?", []),  # one word: ``acronyms``
        ("SQLiteでCREATE PROCEDUREは使えますか\uff1f", ["create procedure"]),  # not shouted
    ],
)
def test_words_in_capitals_side_by_side_are_one_name(question: str, phrases: list[str]) -> None:
    assert [ways[0] for ways in capital_phrases(question)] == phrases


def test_a_run_with_a_word_said_loud_is_met_by_its_shorter_runs() -> None:
    ways = capital_phrases("Is INTEGER PRIMARY KEY REALLY an alias?")
    assert len(ways) == 1 and "integer primary key" in ways[0] and "key really" in ways[0]


def test_a_statement_the_site_never_writes_is_not_on_it(planner: AnswerPlanner) -> None:
    """ "procedure" is on ALTER TABLE's page ("the 12-step generalized ALTER TABLE
    procedure"), CREATE on every page; CREATE PROCEDURE on none."""
    refused = plan_for(planner, "How do I create a stored procedure with CREATE PROCEDURE?")
    answered = plan_for(planner, "How do I create a trigger with CREATE TRIGGER?")

    assert refused.step == "not_on_site"
    assert answered.step == "model"
    assert answered.sources[0] == f"{BASE}/lang_createtrigger.html"


def test_a_section_holding_every_word_is_searched_whatever_its_meaning(
    planner: AnswerPlanner,
) -> None:
    """STRICT tables' page meets every word of the question and the words rank it first, but
    the meaning ranks it far down (STRICT is not a word the encoder knows as a table's
    option): fused, it lost its place to WITHOUT ROWID's page, which both rankings found."""
    plan = plan_for(
        planner, "What does the STRICT keyword at the end of a CREATE TABLE statement do?"
    )

    assert plan.sources == (f"{BASE}/stricttables.html",)


def test_the_sections_kept_take_the_last_places_in_the_words_order() -> None:
    """Each kept section fusion left out takes the place of the last one it found that is
    not kept itself: a kept one it found stays where it is, and the results keep their
    length."""
    lexical = [
        (7, Passage("a", BASE, "x")),
        (3, Passage("b", BASE, "y")),
        (9, Passage("c", BASE, "z")),
    ]

    assert _with_whole([1, 2, 3, 4], lexical, lambda p: True, limit=4) == [1, 3, 7, 9]
    assert _with_whole([1, 2, 3, 7], lexical, lambda p: True, limit=4) == [1, 3, 7, 9]
    assert _with_whole([1, 2, 3, 4], lexical, lambda p: p.title == "c", limit=4) == [1, 2, 3, 9]
    assert _with_whole([1, 2], lexical, lambda p: False, limit=4) == [1, 2]
    assert _with_whole([1], lexical, lambda p: True, limit=4) == [1, 7, 3, 9]
