"""Git's manual pages (eval/gitdocs: AsciiDoc's HTML, as Debian's git-doc ships it): the
title and NAME line in a header before the content, options as definition lists no link
points to, and a two-letter name a trap writes in capitals."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.answering.evidence import asks_for_number, find_evidence
from engine.answering.needs import SHORT_CAPITALS_WEIGHT, question_needs
from engine.answering.on_site import on_site_passages
from engine.answering.pipeline import AnswerPlanner
from engine.knowledge.models import Passage
from engine.knowledge.scrape.sections import page_sections
from tests.real_pages import plan_for, planner_on_pages

SITE = Path(__file__).resolve().parent.parent / "eval" / "gitdocs" / "site"
PAGES = (
    "git-gc.html",
    "git-commit.html",
    "git-clone.html",
    "git-mergetool.html",
    "git-merge.html",
    "githooks.html",
    "git-log.html",
)


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> AnswerPlanner:
    return planner_on_pages(tmp_path_factory.mktemp("git") / "kb.sqlite3", SITE, PAGES)


def test_a_manual_page_keeps_its_title_and_name_line_from_the_header_before_its_content() -> None:
    page = page_sections((SITE / "git-gc.html").read_bytes())

    assert page is not None
    assert page.title == "git-gc(1)"  # not "SYNOPSIS", its content's first heading
    name = page.sections[0]
    assert name.path[-1] == "NAME"
    assert "Cleanup unnecessary files and optimize the local repository" in name.text
    assert page.sections[1].path[-1] == "SYNOPSIS"


def test_options_no_link_points_to_are_entries_with_their_sections_link() -> None:
    page = page_sections((SITE / "git-commit.html").read_bytes())

    assert page is not None
    entries = {section.path[-1]: section for section in page.sections}
    amend = entries["--amend"]
    assert amend.path[-2] == "OPTIONS" and amend.anchor == "_options"
    assert amend.text.startswith("--amend\nReplace the tip of the current branch")
    # two terms before one description are two names of one option
    assert entries["-m, --message"].text.startswith("-m <msg>\n--message=<msg>\nUse the given")


def test_an_option_the_entry_rule_misses_is_no_part_of_the_option_before_it() -> None:
    """ "-4" before "--ipv4" (and "--3way", "--[no-]signed") begin options too: read as text,
    the next option was merged into the entry before them, with their description."""
    page = page_sections((SITE / "git-fetch.html").read_bytes())

    assert page is not None
    entries = {section.path[-1]: section for section in page.sections}
    assert "-4, --ipv4" in entries and "-6, --ipv6" in entries
    assert "IPv4" not in entries["--no-show-forced-updates"].text


def test_a_site_banners_heading_before_the_content_is_not_the_pages_title() -> None:
    banner = (
        b"<html><head><title>Installing</title></head><body><header class='site'>"
        b"<h1>Acme Docs</h1><p>Fast widgets for everyone</p></header><div id='content'>"
        b"<h2>Installing</h2><p>Run the installer and follow what it says on screen.</p>"
        b"</div></body></html>"
    )

    page = page_sections(banner)

    assert page is not None
    assert [section.path for section in page.sections] == [("Installing",)]
    assert "Fast widgets" not in page.sections[0].text


def test_a_quote_from_an_options_entry_says_which_option(planner: AnswerPlanner) -> None:
    plan = plan_for(
        planner, "Which git commit option replaces the tip of the current branch with a new commit?"
    )

    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("--amend — Replace the tip of the current branch")


def test_what_a_command_flag_does_is_the_commands_page_not_a_hook_run_by_it(
    planner: AnswerPlanner,
) -> None:
    plan = plan_for(planner, "What does git gc --auto do?")

    assert plan.sources and all(url.endswith("/git-gc.html") for url in plan.sources)
    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("--auto — With this option, git gc checks whether")


def test_an_options_entry_comes_before_its_pages_sections_named_by_its_title() -> None:
    """The search found three sections of git gc's page (named by its title, "git-gc"), not
    the --auto entry, which was looked up by its name: it came fourth and was left out."""
    page = page_sections((SITE / "git-gc.html").read_bytes())
    assert page is not None
    url = "http://docs.example/git-gc.html"
    passages = {
        section.path[-1]: Passage(page.title, url, section.text, heading=section.heading)
        for section in page.sections
    }
    found = [passages[name] for name in ("DESCRIPTION", "gc.autoDetach", "HOOKS")]

    used = on_site_passages("What does git gc --auto do?", found, looked_up=[passages["--auto"]])

    assert used[0] is passages["--auto"]


def test_a_two_letter_name_in_capitals_the_site_lacks_weighs_as_a_word(
    planner: AnswerPlanner,
) -> None:
    # "ai" weighed as two letters, the rest of the question met git mergetool's page
    trap = plan_for(
        planner, "Which git merge strategy resolves conflicts automatically with an AI model?"
    )
    asked = plan_for(planner, "Which git merge strategy resolves conflicts automatically?")

    assert trap.step == "not_on_site"
    assert asked.step != "not_on_site"


def test_two_capitals_weigh_as_a_name_but_not_after_a_number() -> None:
    weights = {need.forms[0]: need.weight for need in question_needs("An AI model after 4 PM?")}

    assert weights["ai"] == SHORT_CAPITALS_WEIGHT
    assert weights["pm"] == len("pm")  # a time: the page may say "16:50"


def test_a_character_asked_about_by_its_name_is_met_by_the_character() -> None:
    """The page writes 'An optional prefix "!" which negates the pattern'; the asker says
    "an exclamation mark"."""
    page = page_sections((SITE / "gitignore.html").read_bytes())
    assert page is not None
    url = "http://docs.example/gitignore.html"
    found = [
        Passage(page.title, url, section.text, heading=section.heading)
        for section in page.sections
        if section.path[-1] in ("PATTERN FORMAT", "DESCRIPTION")
    ]
    asked = "In a gitignore file, what does a pattern that starts with an exclamation mark do?"

    used = on_site_passages(asked, found)

    assert used and all(passage.url == url for passage in used)
    evidence = find_evidence(asked, used)
    assert evidence is not None and 'An optional prefix "!" which negates' in evidence.quote


def test_a_japanese_question_asking_how_many_seconds_is_quoted_from_a_figure() -> None:
    """ "…既定で何秒間キャッシュしますか" asks for a figure as "何分" does: the --socket entry's
    "Defaults to $XDG_CACHE_HOME/…" met more of its words than --timeout's "(default: 900)"."""
    page = page_sections((SITE / "git-credential-cache.html").read_bytes())
    assert page is not None
    url = "http://docs.example/git-credential-cache.html"
    found = [
        Passage(page.title, url, s.text, heading=s.heading, anchor=s.anchor) for s in page.sections
    ]

    evidence = find_evidence("git credential-cache は既定で何秒間キャッシュしますか？", found)  # noqa: RUF001

    assert evidence is not None and "(default: 900)" in evidence.quote
    asked = ["何秒待ちますか", "何秒かかりますか", "何文字まで書けますか", "何行", "何日かかる",
             "何時から営業していますか", "何歳から使えますか"]  # fmt: skip
    assert all(map(asks_for_number, asked))
    some = ["何秒か待ってから", "何日か前に", "何回か試すと", "何人かから報告", "何回かかけ直す",
            "何度もログインを求められる"]  # fmt: skip
    assert not any(map(asks_for_number, some))
