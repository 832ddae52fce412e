"""A common word a question capitalises on its own is a name ("a Go module", "on Windows"),
and a site that never writes it so does not answer about it: the Cargo Book says "go" as a
verb on many pages and never names the language Go (eval/cargodocs, ``trap-go-modules``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.protocol import make_request
from engine.answering.needs import lone_capitalised
from engine.answering.pipeline import AnswerPlanner
from engine.knowledge.models import Article
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.store import KnowledgeBase
from tests.real_pages import planner_on_pages

SITE = Path(__file__).resolve().parent.parent / "eval" / "cargodocs" / "site"
PAGES = ("reference/specifying-dependencies.html", "guide/dependencies.html")


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("How do I add a Go module as a dependency in Cargo.toml?", ["go"]),
        ("How much does an npm Pro account cost per month?", ["pro"]),
        ("Does Valgrind's Massif support Python's tracemalloc snapshots?", ["python"]),
        ("How do I install Valgrind on Windows 11?", ["windows"]),
        ("Is the Museum open on Mondays?", ["mondays"]),  # "the Museum": a place meant
        ("Where is the Bicycle Rental office?", []),  # a run of capitals: a heading's words
        ("When is Nishi Island open?", []),
        ("How Do I Add A Dependency?", []),  # capitals of style
        ("Which handler writes XML character references?", []),  # an acronym's own rule
        ("Go modules are what?", []),  # a sentence's first word
        ("What is the default opt-level of the release profile?", []),
        ("how do I yank a version - Any tips?", []),  # a mark begins a sentence (review)
        ("I get an error\nWhat does it mean?", []),
        ("`cargo build` Fails with an error", []),
        ("ok Let's say I published a broken version", []),  # not "let"
    ],
)
def test_a_common_word_capitalised_on_its_own_is_a_name(question: str, names: list[str]) -> None:
    assert [name.word for name in lone_capitalised(question)] == names


def test_a_capitalised_word_comes_with_the_phrase_the_question_writes_it_in() -> None:
    assert [(n.word, n.phrases) for n in lone_capitalised("How do I build in Release mode?")] == [
        ("release", ("release mode",))
    ]
    assert [n.phrases for n in lone_capitalised("Can I ship to Canada?")] == [()]


def test_a_site_capitalises_a_word_only_where_it_is_no_sentences_first(tmp_path: Path) -> None:
    kb_path = tmp_path / "kb.sqlite3"
    text = (
        "Go to the harbour office. The museum is closed on Mondays.\n"
        "Scripts are written in Python or shell. Take the Ferries to the island.\n"
        "Tools | Shell | Osaka"
    )
    build_kb(kb_path, kb_path, [Article("https://t.example/a", "Visiting", text)], [],
             datetime.now(UTC))  # fmt: skip
    kb = KnowledgeBase(kb_path)
    known = kb.capitalises(["go", "monday", "python", "shell", "osaka", "ferries", "ferry"])
    assert known == {"monday", "python", "ferries", "ferry"}  # not a table's cells'


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> AnswerPlanner:
    return planner_on_pages(tmp_path_factory.mktemp("cargo-deps") / "kb.sqlite3", SITE, PAGES)


def test_a_language_the_site_never_names_is_not_on_it(planner: AnswerPlanner) -> None:
    asked = "How do I add a Go module as a dependency in Cargo.toml?"
    plan = planner.plan(make_request(reply_to="b", user_id="u", question=asked, ttl_s=9))
    assert plan.step == "not_on_site"


def test_a_word_capitalised_for_emphasis_in_the_sites_own_phrase_is_no_name(
    planner: AnswerPlanner,
) -> None:
    """The page writes "git repository" lowercase; "Git Repository" would be a run of
    capitals, "a Git repository" a name it never capitalises inside a sentence but for the
    phrase it holds (review: "How do I build in Release mode?" was refused)."""
    asked = "How do I add a git Repository as a dependency in Cargo.toml?"
    plan = planner.plan(make_request(reply_to="b", user_id="u", question=asked, ttl_s=9))
    assert plan.step == "model"


def test_the_same_question_about_what_the_site_names_is_on_it(planner: AnswerPlanner) -> None:
    asked = "How do I add a Git repository as a dependency in Cargo.toml?"
    plan = planner.plan(make_request(reply_to="b", user_id="u", question=asked, ttl_s=9))
    assert plan.step == "model"
    assert plan.sources[0].endswith("specifying-dependencies.html")
