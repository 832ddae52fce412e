"""MkDocs' own documentation (eval/mkdocsdocs: its Bootstrap theme, as Debian's mkdocs-doc
ships it): settings as headings named like code, each with a line giving its default."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.answering.evidence import find_evidence
from engine.answering.needs import entry_names
from engine.answering.pipeline import AnswerPlanner
from engine.knowledge.models import Passage
from engine.knowledge.scrape.errors import NotAnArticle
from engine.knowledge.scrape.extract import extract_article
from tests.real_pages import BASE, plan_for, planner_on_pages

SITE = Path(__file__).resolve().parent.parent / "eval" / "mkdocsdocs" / "site"
PAGES = ("user-guide/configuration.html", "user-guide/deploying-your-docs.html")


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> AnswerPlanner:
    return planner_on_pages(tmp_path_factory.mktemp("mkdocs") / "kb.sqlite3", SITE, PAGES)


def test_a_setting_called_by_its_kind_is_quoted_from_its_section(planner: AnswerPlanner) -> None:
    """ "strict" is a word too: the question named no entry, and the page's opening ("Guide to
    all available configuration settings.") met "setting" as well as strict's section did."""
    assert entry_names("What does the strict setting do?") == ["strict"]

    plan = plan_for(planner, "What does the strict setting do?")

    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("Determines how warnings are handled.")


def test_a_question_about_a_default_gets_the_line_that_gives_it(planner: AnswerPlanner) -> None:
    """The line "default: '127.0.0.1:8000'" says too little to be chosen alone: "Allows a
    custom default to be set…" meets more of the question's words, and gives no value."""
    plan = plan_for(planner, "What is the default dev_addr used by mkdocs serve?")

    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("dev_addr — ")
    assert plan.evidence.quote.endswith("default: '127.0.0.1:8000'")


def test_a_page_that_only_redirects_is_no_article() -> None:
    html = (SITE / "user-guide" / "plugins.html").read_bytes()

    with pytest.raises(NotAnArticle, match="redirect"):
        extract_article(html, f"{BASE}/user-guide/plugins.html")


def test_a_sentence_that_announces_a_step_goes_on_with_it(planner: AnswerPlanner) -> None:
    """ "… you need to take one additional step so that MkDocs will work with your custom
    domain." meets the question's words; the step, which holds the answer, meets none."""
    plan = plan_for(planner, "How do I use a custom domain with GitHub Pages for my MkDocs site?")

    assert plan.evidence is not None
    step = "You need to add a CNAME file to the root of your docs_dir."
    assert plan.evidence.quote.endswith(step)


@pytest.mark.parametrize(
    "question",
    [
        "GitHub Pages で独自ドメインを使うにはどうすればいいですか？",  # noqa: RUF001
        "How do I use a custom domain for my site on GitHub Pages?",
    ],
)
def test_a_sentence_saying_it_can_be_done_goes_on_with_how(
    planner: AnswerPlanner, question: str
) -> None:
    """ "GitHub Pages includes support for using a Custom Domain for your site." meets more of
    these questions' words than the next sentence, which does not say MkDocs' name: it says
    the thing can be done, the next sentences how (then the step it announces)."""
    plan = plan_for(planner, question)

    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("GitHub Pages includes support for using a Custom")
    assert plan.evidence.quote.endswith(
        "You need to add a CNAME file to the root of your docs_dir."
    )


def test_only_a_how_question_goes_on_after_a_sentence_saying_it_can_be_done() -> None:
    text = "The site supports custom domains. Themes live in their own folder."
    passage = Passage("Deploying", BASE, text)

    asked_how = find_evidence("How do I use custom domains on the site?", [passage])
    asked_whether = find_evidence("Are custom domains supported on the site?", [passage])

    assert asked_how is not None and asked_how.quote.endswith("Themes live in their own folder.")
    assert asked_whether is not None and asked_whether.quote == "The site supports custom domains."


def test_which_command_is_answered_by_a_sentence_that_gives_one(planner: AnswerPlanner) -> None:
    """The section's opening meets "documentation", "GitHub" and "Pages" and names no
    command; the sentence that says "command" announces it on the next line."""
    plan = plan_for(planner, "Which command deploys my documentation to GitHub Pages?")

    assert plan.evidence is not None
    assert "run the following command: mkdocs gh-deploy" in plan.evidence.quote


@pytest.mark.parametrize(
    ("question", "title", "text", "quoted"),
    [
        (  # the answer gives the command without the word: a sentence with it says less
            "Which command deploys my documentation to GitHub Pages?",
            "Deploying",
            "Use mkdocs gh-deploy to deploy your documentation to GitHub Pages.\n"
            "Each command accepts the --help option.",
            "Use mkdocs gh-deploy",
        ),
        (  # a command line option is asked for: an entry defines it
            "What command line option enables verbose output?",
            "Options",
            "-v, --verbose \u2014 Enable verbose output.\n"
            "-h, --help \u2014 Show the command line help.",
            "-v, --verbose",
        ),
    ],
)
def test_which_command_does_not_prefer_any_sentence_saying_command(
    question: str, title: str, text: str, quoted: str
) -> None:
    evidence = find_evidence(question, [Passage(title, f"{BASE}/page.html", text)])

    assert evidence is not None
    assert evidence.quote.startswith(quoted)


@pytest.mark.parametrize(
    "text",
    [
        "Deploying takes the steps described above. Themes live in their own folder.",
        "Publishing the site is the last step. Themes are configured in mkdocs.yml.",
    ],
)
def test_a_sentence_about_steps_announces_nothing(text: str) -> None:
    evidence = find_evidence("How do I deploy the site?", [Passage("Deploying", BASE, text)])

    assert evidence is not None
    assert "Themes" not in evidence.quote
