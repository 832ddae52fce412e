"""zsh's manual (eval/zshdocs: GNU Texinfo's HTML, as Debian's zsh-doc ships it): a redirect
page for every node, indexes of links, a bar of navigation links above every node, and
options, parameters and escapes as definition lists of names in code no link points to."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.answering.evidence import find_evidence
from engine.answering.needs import entry_names, mixed_case_names
from engine.answering.pipeline import AnswerPlanner
from engine.knowledge.glossary import shared_glossary
from engine.knowledge.models import PATH_SEPARATOR, Passage
from engine.knowledge.query import grammar_mask
from engine.knowledge.scrape.errors import NoArticleText, NotAnArticle
from engine.knowledge.scrape.extract import extract_article
from engine.knowledge.scrape.links import parse_page, refresh_target
from engine.knowledge.scrape.sections import page_sections
from tests.real_pages import BASE, plan_for, planner_on_pages

SITE = Path(__file__).resolve().parent.parent / "eval" / "zshdocs" / "site"
PAGES = ("Options.html", "Parameters.html", "Prompt-Expansion.html", "Zsh-Modules.html")


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> AnswerPlanner:
    return planner_on_pages(tmp_path_factory.mktemp("zsh") / "kb.sqlite3", SITE, PAGES)


def test_a_page_that_only_sends_the_reader_on_is_no_article() -> None:
    html = (SITE / "Description-of-Options.html").read_bytes()
    url = f"{BASE}/Description-of-Options.html"

    root = parse_page(html, url)
    assert root is not None
    assert refresh_target(root) == f"{BASE}/Options.html#Description-of-Options"
    with pytest.raises(NotAnArticle, match=r"a redirect to .*/Options\.html"):
        extract_article(html, url)


def test_a_refresh_that_waits_or_reloads_the_page_is_no_redirect() -> None:
    def target(content: str) -> str | None:
        html = f'<html><head><meta http-equiv="refresh" content="{content}"></head></html>'
        root = parse_page(html.encode(), f"{BASE}/news.html")
        assert root is not None
        return refresh_target(root)

    assert target("0; URL='archive.html'") == f"{BASE}/archive.html"
    assert target("300") is None  # the page reloads itself every five minutes
    assert target("60; url=archive.html") is None  # shown for a minute: a page of its own
    assert target("0; url=news.html") is None
    assert target("0;url=") is None  # no address after all

    noscript = '<html><head><noscript><meta http-equiv="refresh" content="0; url=nojs.html">'
    root = parse_page((noscript + "</noscript></head><body>News</body></html>").encode(), BASE)
    assert root is not None and refresh_target(root) is None  # for browsers without scripts


def test_an_index_of_links_is_no_article() -> None:
    html = (SITE / "Variables-Index.html").read_bytes()

    with pytest.raises(NotAnArticle, match="an index"):
        extract_article(html, f"{BASE}/Variables-Index.html")


def test_options_parameters_and_escapes_in_code_are_entries_under_their_heading() -> None:
    options = page_sections((SITE / "Options.html").read_bytes())
    escapes = page_sections((SITE / "Prompt-Expansion.html").read_bytes())
    assert options is not None and escapes is not None

    entries = {section.path[-1]: section for section in options.sections}
    share = entries["SHARE_HISTORY"]  # not "SHARE_HISTORY <K>": the name alone
    assert share.path[-2] == "16.2.4 History" and share.anchor == "History"
    assert share.text.startswith("SHARE_HISTORY <K>\nThis option both imports new commands")
    assert entries["AUTO_CD"].text.startswith("AUTO_CD (-J)\nIf a command is issued")
    shell_state = {section.path[-1]: section for section in escapes.sections}
    assert shell_state["%d, %/"].text.startswith("%d\n%/\nCurrent working directory.")


def test_the_bar_of_links_above_every_node_and_its_menu_are_not_text() -> None:
    url = f"{BASE}/Options.html"
    html = (SITE / "Options.html").read_bytes()
    # read from the tree the crawl parses, whose links are all absolute
    page = page_sections(html, parse_page(html, url))

    assert page is not None
    text = page.text
    assert "[ << ]" not in text and "[Contents]" not in text
    # the chapter's menu of its own sections, "16.1 Specifying Options" ... : contents
    assert not any(section.text.startswith("16.1 Specifying Options") for section in page.sections)


def test_a_question_about_an_option_is_quoted_from_its_entry(planner: AnswerPlanner) -> None:
    plan = plan_for(planner, "What does the SHARE_HISTORY option do?")

    assert plan.sources and all(url.endswith("/Options.html") for url in plan.sources)
    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("SHARE_HISTORY <K> — This option both imports new")


def test_a_product_the_site_never_names_is_not_on_it(planner: AnswerPlanner) -> None:
    """zsh's database module ties arrays to GDBM files; "PostgreSQL" is on no page."""
    trap = plan_for(planner, "Which zsh module connects to a PostgreSQL database?")
    asked = plan_for(planner, "Which zsh module ties associative arrays to database files?")

    assert trap.step == "not_on_site"
    assert asked.step != "not_on_site"


def test_a_parameter_named_in_capitals_is_quoted_from_its_own_entry(
    planner: AnswerPlanner,
) -> None:
    """REPORTMEMORY's entry says "…the same as for the REPORTTIME variable": a sentence that
    names it, in a neighbour's entry, is not what REPORTTIME does."""
    plan = plan_for(planner, "What does the REPORTTIME parameter do?")

    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("REPORTTIME — If nonnegative, commands whose combined")


def test_a_quote_from_an_escapes_entry_names_the_escape(planner: AnswerPlanner) -> None:
    plan = plan_for(planner, "Which prompt escape shows the current working directory?")

    assert plan.evidence is not None
    assert plan.evidence.quote.startswith("%d, %/ — ")


def test_names_in_code_and_names_called_by_their_kind_are_entry_names() -> None:
    assert entry_names("What does the SHARE_HISTORY option do?") == ["share_history"]
    assert entry_names("What does the REPORTTIME parameter do?") == ["reporttime"]
    assert entry_names("What does the zmv function do?") == ["zmv"]
    assert entry_names("What does the N glob qualifier do?") == ["n"]
    assert entry_names("What does the history option do?") == ["history"]  # a word: a section
    assert entry_names("What does the npm install command do?") == []  # npm-install's page
    assert entry_names("Which function reads a JSON string?") == []  # an acronym
    assert entry_names("SHARE_HISTORYオプションは何") == ["share_history"]


def test_a_word_with_a_capital_after_a_small_letter_is_a_name_written_its_ways() -> None:
    asked = "Does PostgreSQL run on macOS with WiFi, UUIDs, OAuth2 and IPv6?"

    assert mixed_case_names(asked) == [
        ("postgresql", "postgre-sql", "postgre sql"),
        ("macos", "mac-os", "mac os"),
        ("wifi", "wi-fi", "wi fi"),  # a site's "Free Wi-Fi" names it
    ]


def test_a_word_before_when_is_read_with_the_word_alone_too() -> None:
    """起動時 is "startup time" in the dictionary, which no page says; 既定値 "default
    value" is what a page says, and "default" alone meets other sentences."""
    glossary = shared_glossary()

    def english(run: str) -> tuple[str, ...]:
        [(_, _, found)] = glossary.words(run, grammar_mask(run))
        return found

    assert "startup" in english("起動時")
    assert "default" not in english("既定値")


def test_a_term_in_code_is_an_entry_by_its_name_unless_a_link_or_a_sentence() -> None:
    html = (
        b"<html><body><main><h1>API</h1><dl>"
        b"<dt><code>True</code> if the build is strict</dt><dd>It fails on any warning.</dd>"
        b"<dt><code>fetch(url, options = {})</code></dt><dd>Fetches the resource at url.</dd>"
        b"<dt><a href='other.html'><code>foo()</code></a></dt><dd>See the page of foo.</dd>"
        b"</dl></main></body></html>"
    )

    page = page_sections(html)

    assert page is not None
    assert [section.path for section in page.sections] == [("API",), ("API", "fetch()")]


def test_a_pages_division_marked_unnumbered_among_others_is_not_its_content() -> None:
    """pandoc marks a page's References "section level1 unnumbered"; Texinfo's indexes are a
    division of that class alone."""
    html = (
        b"<html><body><div class='section level1'><h1>Introduction</h1><p>Why the widget "
        b"matters to anyone.</p></div><div class='section level1 unnumbered'><h1>References"
        b"</h1><p>Smith, 2020. A book about widgets.</p></div></body></html>"
    )

    page = page_sections(html)

    assert page is not None
    assert "Why the widget matters" in page.text


def test_a_malformed_base_address_fails_one_page_not_the_rescrape() -> None:
    html = b"<html><head><base href='http://[::1'></head><body><a href='x'>x</a></body></html>"

    with pytest.raises(NoArticleText):
        extract_article(html, f"{BASE}/broken.html")


def test_a_section_whose_first_sentence_names_it_is_quoted_without_a_name_before() -> None:
    """A term is a line of its own ("HISTSIZE <S>"); a sentence that begins with the
    heading's word is prose: "Shinkansen — …" before its quote would repeat it."""
    passage = Passage(
        "Sights",
        f"{BASE}/sights.html",
        "Shinkansen trains leave from Shin-Osaka.\nA ticket costs 14000 yen for adults.",
        heading=f"Sights{PATH_SEPARATOR}Shinkansen",
    )

    evidence = find_evidence("How much is a Shinkansen ticket for adults?", [passage])

    assert evidence is not None
    assert evidence.quote == "A ticket costs 14000 yen for adults."


def test_a_table_of_contents_is_dropped_under_an_address_in_other_letters() -> None:
    """lxml quotes the page's own address but not the links it makes absolute."""
    html = (
        b"<html><body><main><h1>T</h1><ul><li><a href='#a'>A</a></li><li><a href='#b'>B</a>"
        b"</li><li><a href='#c'>C</a></li></ul><h2 id='a'>A</h2><p>The first section's text."
        b"</p></main></body></html>"
    )
    url = "https://docs.example.jp/ガイド/page.html"

    page = page_sections(html, parse_page(html, url))

    assert page is not None
    assert [(section.path, section.text) for section in page.sections] == [
        (("T", "A"), "The first section's text.")
    ]
