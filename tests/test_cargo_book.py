"""Answers on real pages of the Cargo Book (eval/cargodocs), the fifth real site, held out
until its first eval run: man pages for commands ("cargo-yank(1)": NAME, SYNOPSIS,
DESCRIPTION, OPTIONS), a reference whose lists define names ("CARGO_PKG_VERSION — The full
version of your package."), and settings whose defaults are given per profile, not in the
setting's own entry."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bots.client import ConciergeClient
from broker.amqp import Broker
from config.settings import Settings
from engine.answering.evidence import quoted_name
from engine.answering.on_site import on_site_passages
from engine.answering.pipeline import AnswerPlanner
from engine.answering.wording import WORDING
from engine.backends.base import Backend
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.scrape.extract import extract_article
from tests.conftest import start_engine
from tests.grounded_fixture import ask
from tests.real_pages import BASE, plan_for, planner_on_pages
from tests.test_evidence_docs import entry_passages
from tests.test_numbers import Says

SITE = Path(__file__).resolve().parent.parent / "eval" / "cargodocs" / "site"
PAGES = (
    "reference/profiles.html",
    "reference/environment-variables.html",
    "reference/workspaces.html",
    "reference/build-scripts.html",
    "commands/cargo-yank.html",
    "commands/cargo-build.html",
    "commands/cargo-test.html",
    "appendix/glossary.html",
    "guide/cargo-toml-vs-cargo-lock.html",
    "reference/registry-index.html",
)


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> AnswerPlanner:
    return planner_on_pages(tmp_path_factory.mktemp("cargo") / "kb.sqlite3", SITE, PAGES)


def quote_for(planner: AnswerPlanner, question: str) -> str:
    plan = plan_for(planner, question)
    assert plan.evidence is not None, plan.note
    return plan.evidence.quote


def test_a_settings_default_in_one_profile_is_that_profiles_section_not_the_settings_entry(
    planner: AnswerPlanner,
) -> None:
    """opt-level's own entry says what the setting does; the release profile's section
    says "opt-level = 3", with the default, the release and the profile asked about."""
    plan = plan_for(planner, "What is the default opt-level of the release profile?")

    assert plan.evidence is not None
    assert "opt-level = 3" in plan.evidence.quote
    assert plan.evidence.link.endswith("#release")


@pytest.mark.parametrize(
    ("question", "description"),
    [
        ("What does cargo yank do to a published version?", "The yank command removes a"),
        ("What does cargo yank do?", "The yank command removes a previously published crate"),
        ("What does cargo build do?", "Compile local packages and all of their dependencies."),
    ],
)
def test_what_a_command_does_is_its_man_pages_description(
    planner: AnswerPlanner, question: str, description: str
) -> None:
    """Not its SYNOPSIS ("cargo build [options]") nor an example of its later sections."""
    assert quote_for(planner, question).startswith(description)


def test_a_setting_asked_about_without_another_thing_named_keeps_its_entry(
    planner: AnswerPlanner,
) -> None:
    """The release profile's section says "opt-level = 3" too, but the question names no
    profile (review: it had taken the release profile's default for the setting's)."""
    said = quote_for(planner, "What is the default setting for opt-level?")

    assert said.startswith("opt-level — ")
    assert "[profile.release]" not in said


def test_a_default_said_in_words_answers_how_many(planner: AnswerPlanner) -> None:
    """Not "cargo build -j1 may or may not build…", the one figure near it."""
    said = quote_for(planner, "How many parallel jobs does cargo build run by default?")

    assert "Defaults to the number of logical CPUs." in said
    assert "-j1" not in said


def test_a_question_asking_which_variable_gets_the_list_entry_defining_it(
    planner: AnswerPlanner,
) -> None:
    said = quote_for(
        planner, "Which environment variable holds my package's version at compile time?"
    )

    assert said.startswith("CARGO_PKG_VERSION — The full version of your package.")


def test_a_question_asking_which_key_gets_the_key_not_a_sentence_using_the_word(
    planner: AnswerPlanner,
) -> None:
    said = quote_for(
        planner,
        "Which key of the [workspace] table lists the packages to include in the workspace?",
    )

    assert said.startswith("members — Packages to include in the workspace.")


def test_again_is_no_word_a_sentence_must_hold(planner: AnswerPlanner) -> None:
    """ "run it again" is "re-run": the instruction's sentence, not one about mtime that
    holds "only" and "file"."""
    said = quote_for(
        planner, "How does a build script tell Cargo to run it again only when a file changes?"
    )

    assert "The rerun-if-changed instruction tells Cargo to re-run the build script" in said


def test_a_difference_between_two_things_is_the_page_titled_one_vs_the_other(
    planner: AnswerPlanner,
) -> None:
    """Tried in `concierge chat`: "between" was a word to meet, and "difference" was met only
    by the registry index's "…has subtle differences from the JSON format…"; the page titled
    "Cargo.toml vs Cargo.lock" never says "difference". The glossary's entry that points to
    it ("See Cargo.toml vs Cargo.lock.") hands the question on to that page."""
    plan = plan_for(planner, "What is the difference between Cargo.toml and Cargo.lock?")

    assert plan.sources == (f"{BASE}/guide/cargo-toml-vs-cargo-lock.html",)
    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("Cargo.toml and Cargo.lock serve two different purposes.")


def test_a_commands_page_named_by_title_does_not_cover_any_question_in_its_language() -> None:
    """ "cargo test" names the command's page, whose passages are then all its entry ("--tests"
    among them, a heading that is a name); an English question's words must still be on it
    (nothing there on a garbage collector). Found as the search found them on the whole
    site."""
    found = entry_passages(
        SITE / "commands" / "cargo-test.html",
        "option-cargo-test---tests",
        "description",
        "target-selection",
    )
    question = "How do I set the garbage collector's heap size for cargo test?"

    assert on_site_passages(question, found) == []
    assert on_site_passages("Which cargo test flag tests all targets that have test = true?", found)


def test_the_name_a_quote_defines_is_what_a_which_question_must_be_answered_with() -> None:
    flag = "--invert spec — Show the reverse dependencies for the given package."

    assert quoted_name("Which cargo tree flag shows the reverse dependencies?", flag) == "--invert"
    assert quoted_name("Which key lists the members?", "members — Packages to include.") == (
        "members"
    )
    assert quoted_name("How do I see the reverse dependencies?", flag) == ""  # not "which"
    assert quoted_name("Which flag shows them?", "Show the reverse dependencies.") == ""
    # asking what a named flag does, or about something other than a name (review)
    assert quoted_name("What does the --invert flag do?", flag) == ""
    assert quoted_name("What is the default setting for opt-level?", "opt-level — It …") == ""
    assert quoted_name("Which flag shows them?", "Note — this shows them.") == ""  # a word


async def answered_saying(
    settings: Settings, backend: Backend, page: str, question: str, said: str
) -> str:
    """The final text of the answer to ``question`` from one page of the book, the model
    saying ``said``."""
    url = f"{BASE}/{page}"
    articles = [extract_article((SITE / page).read_bytes(), url).article(url)]
    build_kb(settings.kb_path, settings.kb_path, articles, [], datetime.now(UTC))
    engine = await start_engine(settings, Says(backend, [said]))  # type: ignore[arg-type]
    async with ConciergeClient(settings, "test") as client:
        done, _ = await ask(client, question)
    await engine.stop()
    return done.text


@pytest.mark.parametrize(
    ("said", "kept"),
    [("It is CARGO_MAKEFLAGS.", False), ("Read `CARGO_PKG_VERSION` with env!().", True)],
)
async def test_the_models_words_naming_another_variable_than_the_quote_are_left_out(
    settings: Settings, backend: Backend, broker: Broker, said: str, kept: bool
) -> None:
    """Seen on the Cargo Book: "The environment variable CARGO_MAKEFLAGS is set…" above the
    quote "CARGO_PKG_VERSION — The full version of your package."; both names are on the
    page, so no other check leaves it out."""
    question = "Which environment variable holds my package's version at compile time?"
    text = await answered_saying(
        settings, backend, "reference/environment-variables.html", question, said
    )

    assert "CARGO_PKG_VERSION — The full version of your package." in text  # the quote
    assert text.startswith(said) is kept
    assert text.startswith(WORDING["en"].withdrawn_name + "\n\n") is not kept


@pytest.mark.parametrize(
    ("said", "kept"),
    [("The answer is 1.", False), ("As many as there are logical CPUs.", True)],
)
async def test_a_figure_the_quote_says_in_words_is_not_the_models_to_give(
    settings: Settings, backend: Backend, broker: Broker, said: str, kept: bool
) -> None:
    """Seen on the Cargo Book: "The answer is 1." (another passage's "-j1") above "Defaults to
    the number of logical CPUs.". A quote that holds a figure leaves the model the passages'
    (review: "Default: 5000" in a passage, the quote "A value of 0 makes…")."""
    question = "How many parallel jobs does cargo build run by default?"
    text = await answered_saying(settings, backend, "commands/cargo-build.html", question, said)

    assert "Defaults to the number of logical CPUs." in text  # the quote
    assert text.startswith(said) is kept
    assert text.startswith(WORDING["en"].withdrawn + "\n\n") is not kept
