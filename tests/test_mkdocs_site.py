"""MkDocs' own documentation (eval/mkdocsdocs: its Bootstrap theme, as Debian's mkdocs-doc
ships it): settings as headings named like code, each with a line giving its default."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.answering.evidence import ASKS_HOW_RE, CAN_BE_DONE_RE, find_evidence
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
        "GitHub Pages で独自ドメインを使うにはどうしたらいいですか？",  # noqa: RUF001
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
    text = "The site supports custom domains. Add a CNAME file to the docs folder."
    passage = Passage("Deploying", BASE, text)
    step = "Add a CNAME file to the docs folder."

    for how in ("How do I use custom domains on the site?", "独自ドメインを使う手順は？"):  # noqa: RUF001
        evidence = find_evidence(how, [passage])
        assert evidence is not None and evidence.quote.endswith(step), how
    for other in ("Are custom domains supported on the site?", "Windows には？"):  # noqa: RUF001
        assert not ASKS_HOW_RE.search(other)
    asked_whether = find_evidence("Are custom domains supported on the site?", [passage])
    assert asked_whether is not None and asked_whether.quote == "The site supports custom domains."
    assert not CAN_BE_DONE_RE.search("Windows has no support for custom domains.")


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> AnswerPlanner:
    kb_path = tmp_path_factory.mktemp("mkdocs-started") / "kb.sqlite3"
    return planner_on_pages(kb_path, SITE, ["getting-started.html"])


def test_a_figure_asked_is_not_quoted_from_a_line_that_only_holds_numbers(
    started: AnswerPlanner,
) -> None:
    """ "mkdocs serve は何秒ごとにファイルの変更を確認しますか" (how many seconds between checks):
    the page's only lines with a figure meeting its words are a server's log, "[I 160402
    15:50:43 server:271] Serving on http://127.0.0.1:8000", which meets "serve" alone. No
    figure answers it, and across languages that is "not on the site"; in English the
    sentence that meets it is quoted."""
    asked = "mkdocs serve は何秒ごとにファイルの変更を確認しますか？"  # noqa: RUF001
    in_english = "How many seconds does mkdocs serve wait between checks for changed files?"

    assert plan_for(started, asked).not_on_site
    plan = plan_for(started, in_english)
    assert plan.evidence is not None and "15:50:43" not in plan.evidence.quote
