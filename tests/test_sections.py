"""Real documentation pages (eval/realdocs: Python's docs as Debian ships them) read as their
main content split into sections, without the chrome; text a site repeats stored once."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.knowledge.models import Article, Section
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.scrape.dedupe import SHARED_MIN_PAGES, without_repeats
from engine.knowledge.scrape.extract import extract_article
from engine.knowledge.scrape.sections import page_sections
from engine.knowledge.store import KnowledgeBase

SITE = Path(__file__).resolve().parent.parent / "eval" / "realdocs" / "site"
NPM_PAGE = Path(__file__).resolve().parent.parent / "eval/npmdocs/site/commands/npm-install.html"
VALGRIND = Path(__file__).resolve().parent.parent / "eval/valgrinddocs/site"
SQLITE = Path(__file__).resolve().parent.parent / "eval/sqlitedocs/site"
SQLITE_CHROME = ("Choose any three", "Table Of Contents", "Documentation Download", "\u25ba")
CHROME = ("Table of Contents", "Previous topic", "Next topic", "Show Source", "Report a Bug",
          "3.11.2 Documentation", "Navigation", "¶", "Please donate")  # fmt: skip


def page(path: str) -> bytes:
    return (SITE / path).read_bytes()


@pytest.mark.parametrize(
    "path", ["tutorial/errors.html", "library/json.html", "faq/programming.html", "glossary.html"]
)
def test_no_chrome_in_a_real_page(path: str) -> None:
    found = extract_article(page(path), f"http://docs.example/{path}")

    assert not [mark for mark in CHROME if mark in found.text or mark in found.title]
    assert all(mark not in section.heading for section in found.sections for mark in CHROME)


def test_another_generators_page_loses_its_version_label_and_table_of_contents() -> None:
    """npm's documentation (not Sphinx): "npm-install @11.19.1" in the heading, a table of
    contents of in-page links that was stored as the page's first section and came back as an
    answer ("Install a package / Synopsis / Description / ..."), and a "See Also" list."""
    url = "http://docs.example/commands/npm-install.html"
    found = extract_article(NPM_PAGE.read_bytes(), url)

    assert found.title == "npm-install"
    assert found.sections[0].text == "Install a package"
    assert found.sections[0].anchor is None  # the page itself, not "#----npm-install----11191"
    assert "Table of contents" not in found.text
    by_anchor = {section.anchor: section for section in found.sections}
    assert by_anchor["synopsis"].heading == "npm-install \u203a Synopsis"
    assert by_anchor["save"].heading == "npm-install \u203a Configuration \u203a save"
    assert by_anchor["save"].text.startswith("Default: true")
    # Its "See Also" is a list of other commands' links: their names outranked the pages
    # that document them.
    assert "see-also" not in by_anchor


def test_a_docbook_page_is_read_as_sections_with_its_options_as_entries() -> None:
    """Valgrind's manual (DocBook's HTML): no <main>, a navigation table around the chapter,
    options as ``<dt><a name="opt.num-callers">``. It went to the general extractor, which
    kept the page as one text broken at its source's line ends ("by --num-callers be")."""
    url = "http://docs.example/manual-core.html"
    found = extract_article((VALGRIND / "manual-core.html").read_bytes(), url)

    assert found.title == "Using and understanding the Valgrind core"  # not "2. Using…"
    assert "Table of Contents" not in found.text
    assert not {"Prev", "Next", "Up", "Home", "Valgrind User Manual"} & set(found.text.splitlines())
    by_anchor = {section.anchor: section for section in found.sections}
    assert by_anchor["manual-core.whatdoes"].heading.endswith(
        "\u203a What Valgrind does with your program"
    )
    callers = by_anchor["opt.num-callers"]
    assert callers.heading.endswith("\u203a --num-callers")
    assert callers.text.startswith("--num-callers=<number> [default: 12]")


def test_a_link_to_the_source_in_a_heading_is_not_part_of_its_name() -> None:
    """Node.js's API pages: "Stream[src]" was the page's title."""
    html = b"""<html><body><div id="content"><h2>Stream<a class="srclink"
    href="https://github.com/nodejs/node/blob/v1/lib/stream.js#L55">[src]</a><span><a
    class="mark" href="#stream" id="stream">#</a></span></h2><p>A stream is an abstract
    interface.</p></div></body></html>"""
    found = extract_article(html, "http://docs.example/stream.html")

    assert found.title == "Stream"
    assert "[src]" not in found.text


def test_a_list_of_links_with_words_of_its_own_is_content_not_a_table_of_contents() -> None:
    html = b"""<html><body><main><h1>Tools</h1>
    <ul><li><a href="#a">a</a></li><li><a href="#b">b</a></li><li><a href="#c">c</a></li></ul>
    <ul><li><a href="#a">a</a> reads a file</li><li><a href="#b">b</a> writes one</li>
    <li><a href="#c">c</a> deletes it</li></ul></main></body></html>"""
    found = page_sections(html)

    assert found is not None
    assert found.text == "a reads a file\nb writes one\nc deletes it"
    see_also = b"""<html><body><main><h1>Tools</h1><p>Tools read and write files.</p>
    <h2>See Also:</h2><ul><li><a href="a.html">a</a></li><li><a href="b.html">b</a></li></ul>
    </main></body></html>"""
    page = page_sections(see_also)
    assert page is not None and page.text == "Tools read and write files."


def test_a_long_page_is_split_at_its_headings_with_their_path_and_anchor() -> None:
    found = page_sections(page("tutorial/errors.html"))

    assert found is not None and found.title == "Errors and Exceptions"  # not "8. Errors…"
    headings = {section.heading: section for section in found.sections}
    raising = headings["Errors and Exceptions \u203a Raising Exceptions"]
    assert raising.anchor == "raising-exceptions"
    assert raising.text.startswith("The raise statement allows the programmer")
    # the section trafilatura used to drop
    assert "Errors and Exceptions \u203a Raising and Handling Multiple Unrelated" \
        " Exceptions" in headings  # fmt: skip


def test_api_entries_and_glossary_terms_are_sections_of_their_own() -> None:
    json_page = page_sections(page("library/json.html"))
    glossary = page_sections(page("glossary.html"))

    assert json_page is not None and glossary is not None
    dumps = next(s for s in json_page.sections if s.anchor == "json.dumps")
    assert (
        dumps.path[-1] == "json.dumps()" and "Serialize obj to a JSON formatted str" in dumps.text
    )
    term = next(s for s in glossary.sections if s.anchor == "term-decorator")
    assert term.path == ("Glossary", "decorator") and "@wrapper" in term.text


def test_a_page_without_a_main_container_goes_to_the_general_extractor() -> None:
    html = b"<html><head><title>Hi</title></head><body><p>" + b"Plain words. " * 20 + b"</p>"

    assert page_sections(html) is None
    assert "Plain words." in extract_article(html + b"</body></html>", "http://x.example/").text


def test_a_page_whose_theme_marks_no_content_is_read_from_what_holds_its_headings() -> None:
    """SQLite's pages (eval/sqlitedocs): no <main>, the site's banner and menu, then a plain
    <div> holding the page's title, a table of contents and its sections, all <h1>, numbered
    ("2.1. Checkpointing"). Read by the general extractor, a page was passages without
    headings."""
    url = "http://docs.example/wal.html"
    found = extract_article((SQLITE / "wal.html").read_bytes(), url)

    assert found.title == "Write-Ahead Logging"
    assert not [mark for mark in SQLITE_CHROME if mark in found.text]
    by_anchor = {section.anchor: section for section in found.sections}
    assert found.sections[0].heading == "Overview"  # not the banner of the page's title
    assert found.sections[0].text.startswith("The default method by which SQLite")
    assert by_anchor["checkpointing"].heading == "How WAL Works \u203a Checkpointing"
    activating = by_anchor["activating_and_configuring_wal_mode"]
    assert "PRAGMA journal_mode=WAL;" in activating.text


def test_a_page_whose_body_holds_its_headings_is_read_from_its_first_heading_on() -> None:
    """SQLite's FAQ: the banner and menu, then the questions straight in <body>, each a bold
    paragraph after a named anchor (``<a name="q1"></a><p><b>(1) How do I…``), with one
    heading above them all."""
    found = extract_article((SQLITE / "faq.html").read_bytes(), "http://docs.example/faq.html")

    assert not [mark for mark in SQLITE_CHROME if mark in found.text]
    by_anchor = {section.anchor: section for section in found.sections}
    first = by_anchor["q1"]
    assert first.heading == (
        "Frequently Asked Questions \u203a (1) How do I create an AUTOINCREMENT field?"
    )
    assert first.text.startswith("Short answer: A column declared INTEGER PRIMARY KEY")
    assert "(2) What datatypes" not in first.text  # the next question is a section of its own


def test_labelled_list_items_and_anchored_terms_are_sections_of_their_own() -> None:
    """SQLite's limits (``<a name="max_column"></a><li><p><b>Maximum Number Of Columns``) and
    functions (``<a name="abs"></a><dt>abs(X)</dt>``): one section each, not one page of
    them cut by length, where "2000" sat under another limit's words."""
    limits = page_sections((SQLITE / "limits.html").read_bytes())
    functions = page_sections((SQLITE / "lang_corefunc.html").read_bytes())

    assert limits is not None and functions is not None
    columns = {section.anchor: section for section in limits.sections}["max_column"]
    assert columns.path == ("Limits In SQLite", "Maximum Number Of Columns")
    assert "The default setting for SQLITE_MAX_COLUMN is 2000." in columns.text
    rowid = {section.anchor: section for section in functions.sections}["last_insert_rowid"]
    assert rowid.path[-1] == "last_insert_rowid()"
    assert rowid.text.startswith("last_insert_rowid()\nThe last_insert_rowid() function")


def test_a_body_read_from_its_headings_keeps_its_introduction_and_title() -> None:
    """Only the banner's short lines before the first heading go (review: a plain page's
    introduction went too, and its title became its first heading)."""
    html = (
        b"<html><head><title>Guide</title></head><body><div><a href='/'>Home</a></div>"
        b"<p>Small. Fast.</p><p>This guide explains how to install the tool and use it well.</p>"
        b"<h2>Install</h2><p>Run the installer.</p><h2>Use</h2><p>Use it.</p></body></html>"
    )
    found = page_sections(html)

    assert found is not None and found.title == "Guide"
    assert found.sections[0].text == "This guide explains how to install the tool and use it well."
    assert [section.path for section in found.sections[1:]] == [("Install",), ("Use",)]


def test_a_release_heading_keeps_its_number_and_no_toc_is_no_table_of_contents() -> None:
    """Section numbers go ("2.1. Checkpointing"), a release's does not ("2.1 (2024-03-01)");
    Just the Docs marks a page's <h1> ``no_toc`` (leave it out of the contents), not chrome."""
    html = (
        b"<html><body><main><h1 class='no_toc'>Configuration</h1><p>Set it up here.</p>"
        b"<h2>2.1 (2024-03-01)</h2><p>Changes of the day.</p>"
        b"<h2>3.1. Logging</h2><p>Logs go to a file.</p></main></body></html>"
    )
    found = page_sections(html)

    assert found is not None
    assert [section.path for section in found.sections] == [
        ("Configuration",),
        ("Configuration", "2.1 (2024-03-01)"),
        ("Configuration", "Logging"),
    ]


def test_bold_words_without_an_anchor_are_emphasis_not_a_label() -> None:
    html = (
        b"<html><body><div><h1>Guide</h1><p>Intro words here.</p><p><b>Note well</b></p>"
        b"<p>More words.</p><h2>Next</h2><p>Other words.</p></div></body></html>"
    )
    found = page_sections(html)

    assert found is not None
    assert [section.path for section in found.sections] == [("Guide",), ("Guide", "Next")]


def article(url: str, *lines: str) -> Article:
    return Article(url, url, "\n".join(lines))


def test_a_block_pasted_into_many_pages_is_kept_once_and_a_copy_of_a_page_not_at_all() -> None:
    block = "Configuration: set the cache folder with the cache option in the config file."
    pages = [article(f"http://x.example/{n}", f"Page {n} has its own words here.", block)
             for n in range(SHARED_MIN_PAGES)]  # fmt: skip
    copy = replace(pages[1], url="http://x.example/copy")
    canonical = replace(article("http://x.example/c", "Other words."), canonical=pages[0].url)

    kept = without_repeats([*pages, copy, canonical])

    assert [a.url for a in kept] == [p.url for p in pages]
    texts = ["\n".join(s.text for s in a.sections) for a in kept]
    assert [block in text for text in texts] == [True] + [False] * (SHARED_MIN_PAGES - 1)
    assert all(f"Page {n} has its own words" in texts[n] for n in range(SHARED_MIN_PAGES))


def test_a_shared_block_is_kept_in_the_page_that_collects_the_blocks() -> None:
    """npm's command pages each repeat some of the config page's settings: a setting's words
    belong to the config page, which holds them all, not to whichever command came first."""
    blocks = [
        f"Setting {n}: a sentence long enough to count as a shared block of text." for n in range(3)
    ]
    commands = [article(f"http://x.example/cmd{n}", f"Command {n} does its own thing.",
                        blocks[n], blocks[(n + 1) % 3]) for n in range(3)]  # fmt: skip
    config = article("http://x.example/config", "Every setting.", *blocks)

    kept = without_repeats([*commands, config])

    assert [a.url for a in kept] == [*(c.url for c in commands), config.url]
    texts = ["\n".join(s.text for s in a.sections) for a in kept]
    assert all(block in texts[-1] for block in blocks)
    assert not any(block in text for block in blocks for text in texts[:-1])


def test_two_rescrapes_of_one_site_give_one_knowledge_base_whatever_fetch_ended_first(
    tmp_path: Path,
) -> None:
    """Valgrind's FAQ.html and QuickStart.html are the same cover page: which one was kept
    followed the order the fetches ended, and so did the passages' order."""
    one = article("http://x.example/b.html", "The same cover page, release 3.19.0.")
    other = replace(one, url="http://x.example/a.html")
    pages = article("http://x.example/c.html", "A page of its own.")
    built = []
    for order, name in (([one, other, pages], "1"), ([pages, other, one], "2")):
        path = tmp_path / f"kb{name}.sqlite3"
        build_kb(path, path, order, [], datetime.now(UTC))
        with closing(sqlite3.connect(path)) as conn:
            built.append(conn.execute("SELECT url, body FROM passages ORDER BY rowid").fetchall())

    assert built[0] == built[1]
    assert [url for url, _ in built[0]] == ["http://x.example/a.html", "http://x.example/c.html"]


def test_passages_carry_their_section_and_link_to_it(tmp_path: Path) -> None:
    url = "http://docs.example/tutorial/errors.html"
    path = tmp_path / "kb.sqlite3"
    build_kb(path, path, [extract_article(page("tutorial/errors.html"), url).article(url)], [],
             datetime.now(UTC))  # fmt: skip

    found = KnowledgeBase(path).search("raising exceptions", 3)

    assert found and found[0].link == f"{url}#raising-exceptions"
    assert found[0].heading.endswith("\u203a Raising Exceptions")


def test_a_section_of_one_line_survives_the_trip() -> None:
    section = Section(("A", "B"), "b", "words")
    assert section.heading == "A \u203a B"


# Node.js 20's API page on node:path (MIT, as Debian's nodejs-doc ships it), one entry of it.
NODE_ENTRY = """<html><body><main><h2>Path</h2>
<section><h3><code>path.basename(path[, suffix])</code><span><a class="mark"
href="#pathbasenamepath-suffix" id="pathbasenamepath-suffix">#</a></span></h3>
<div class="api_metadata">
<details class="changelog"><summary>History</summary>
<table>
<tbody><tr><th>Version</th><th>Changes</th></tr>
<tr><td>v6.0.0</td>
<td><p>Passing a non-string as the <code>path</code> argument will throw now.</p></td></tr>
<tr><td>v0.1.25</td>
<td><p><span>Added in: v0.1.25</span></p></td></tr>
</tbody></table>
</details>
</div>
<p>The <code>path.basename()</code> method returns the last portion of a <code>path</code>,
similar to the Unix <code>basename</code> command.</p></section></main></body></html>"""


def test_an_entrys_history_of_changes_is_read_as_when_it_was_added() -> None:
    """Node.js opens each entry with a collapsed "History" table: stored whole, it was the
    start of every entry's text, and so of its quote."""
    page = page_sections(NODE_ENTRY.encode())
    assert page is not None
    entry = page.sections[-1]

    assert entry.text.startswith("Added in: v0.1.25\nThe path.basename() method returns")
    assert "History" not in entry.text and "v6.0.0" not in entry.text
