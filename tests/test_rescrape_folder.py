"""A folder of documents as the site (CONCIERGE_SITE_DIR): Markdown, HTML and text files in a
temporary folder, read by a real rescrape into a real knowledge base."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from config.settings import ConfigError, Settings, load_settings
from engine.knowledge.models import PATH_SEPARATOR, ScrapeProgress, ScrapeResult
from engine.knowledge.scrape.errors import RescrapeFailed
from engine.knowledge.scrape.rescrape import rescrape
from engine.knowledge.store import KnowledgeBase

INSTALL_MD = """---
title: Installing the widget
sidebar_position: 2
---
Read this before you start.

## Requirements

The widget needs **Python 3.11** and 2 GB of memory.

## Requirements

A second requirements heading: GitHub numbers its anchor.

### Removing it

Run `widget uninstall --purge` to take it out of your project.
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    write(folder, "guide/install.md", INSTALL_MD)
    write(
        folder,
        "faq.html",
        "<html><title>FAQ</title><main><h1>FAQ</h1>"
        "<h2 id='refunds'>Refunds</h2><p>Refunds take fourteen days to arrive.</p></main>",
    )
    write(folder, "release-notes.txt", "Version 2.0 was released in May.\n\nIt adds widgets.")
    write(folder, ".git/HEAD.md", "# Not documentation\n\nA hidden folder is never read.")
    write(folder, "logo.png", "not a document")
    return folder


def folder_settings(tmp_path: Path, folder: Path, **changes: object) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        kb_path=tmp_path / "kb.sqlite3",
        site_dir=folder,
        **changes,
    )


async def scrape(settings: Settings, seen: list[ScrapeProgress] | None = None) -> ScrapeResult:
    return await rescrape(settings, (seen if seen is not None else []).append, lambda: False)


def stored(kb_path: Path) -> dict[str, str]:
    with closing(sqlite3.connect(kb_path)) as conn:
        return dict(conn.execute("SELECT url, title FROM articles"))


async def test_each_document_is_an_article_with_its_file_address(
    docs: Path, tmp_path: Path
) -> None:
    seen: list[ScrapeProgress] = []
    result = await scrape(folder_settings(tmp_path, docs), seen)

    assert stored(tmp_path / "kb.sqlite3") == {
        (docs / "faq.html").as_uri(): "FAQ",
        (docs / "guide/install.md").as_uri(): "Installing the widget",
        (docs / "release-notes.txt").as_uri(): "Release notes",
    }
    assert (result.fetched, result.failed, result.articles) == (3, 0, 3)
    assert seen[0].site is not None and seen[0].site.render("en") == f"the folder {docs}"


async def test_markdown_is_split_at_its_headings_with_links_to_them(
    docs: Path, tmp_path: Path
) -> None:
    base = "https://github.com/team/widget/blob/main/docs"
    settings = folder_settings(tmp_path, docs, site_dir_url=base)
    await scrape(settings)
    kb = KnowledgeBase(settings.kb_path)

    [removal] = kb.search("uninstall purge", limit=1)
    [memory] = kb.search("memory Python", limit=1)
    [second] = kb.search("second requirements heading", limit=1)

    assert removal.link == f"{base}/guide/install.md#removing-it"
    assert removal.heading == PATH_SEPARATOR.join(
        ("Installing the widget", "Requirements", "Removing it")
    )
    assert "widget uninstall --purge" in removal.text
    assert memory.link == f"{base}/guide/install.md#requirements"
    assert second.link == f"{base}/guide/install.md#requirements-1"
    assert "sidebar_position" not in " ".join(p.text for p in kb.search("widget", limit=20))


async def test_a_rescrape_reads_only_the_files_that_changed(docs: Path, tmp_path: Path) -> None:
    settings = folder_settings(tmp_path, docs)
    await scrape(settings)
    faq = docs / "faq.html"
    faq.write_text("<main><h1>FAQ</h1><p>Refunds now take seven days to arrive.</p></main>")
    os.utime(faq, ns=(faq.stat().st_atime_ns, faq.stat().st_mtime_ns + 1_000_000_000))
    (docs / "release-notes.txt").unlink()

    result = await scrape(settings)

    assert (result.fetched, result.unchanged, result.articles) == (1, 1, 2)
    [refunds] = KnowledgeBase(settings.kb_path).search("refunds days", limit=1)
    assert "seven days" in refunds.text
    assert (docs / "release-notes.txt").as_uri() not in stored(settings.kb_path)


async def test_a_file_that_cannot_be_read_is_listed_and_the_rest_go_on(
    docs: Path, tmp_path: Path
) -> None:
    write(docs, "stub.md", "# Stub")  # a heading alone: no article text

    result = await scrape(folder_settings(tmp_path, docs))

    assert result.articles == 3
    [failure] = result.failures
    assert failure.url.endswith("/stub.md")
    assert failure.reason == "no article text found"


async def test_a_page_that_only_redirects_to_another_is_skipped_not_failed(
    docs: Path, tmp_path: Path
) -> None:
    write(
        docs,
        "Refunds.html",  # as Texinfo writes one for every node inside a chapter
        '<html><head><meta http-equiv="Refresh" content="0; url=faq.html#refunds"></head>'
        '<body><p>The node you are looking for is at <a href="faq.html#refunds">Refunds</a>.'
        "</p></body></html>",
    )

    result = await scrape(folder_settings(tmp_path, docs))

    assert result.articles == 3
    [skipped] = result.failures
    assert skipped.url.endswith("/Refunds.html") and skipped.outcome == "skipped"
    assert skipped.reason.startswith("a redirect to file://")
    assert skipped.reason.endswith("/faq.html#refunds (meta refresh)")


async def test_a_missing_or_empty_folder_fails_the_rescrape_naming_the_setting(
    tmp_path: Path,
) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(RescrapeFailed, match=r"CONCIERGE_SITE_DIR: .*missing is not a folder"):
        await scrape(folder_settings(tmp_path, tmp_path / "missing"))
    with pytest.raises(RescrapeFailed, match=r"CONCIERGE_SITE_DIR: .*empty holds no Markdown"):
        await scrape(folder_settings(tmp_path, tmp_path / "empty"))


async def test_the_folder_is_capped_at_the_page_limit(docs: Path, tmp_path: Path) -> None:
    result = await scrape(folder_settings(tmp_path, docs, site_max_pages=2))

    assert result.articles == 2
    assert result.max_pages_reached == 2


def test_the_published_address_must_be_a_web_address(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONCIERGE_SITE_DIR_URL", "docs.example.com/docs")
    with pytest.raises(ConfigError, match="CONCIERGE_SITE_DIR_URL"):
        load_settings()


def test_a_folder_and_a_web_site_together_are_refused_naming_both(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONCIERGE_SITE_DIR", str(tmp_path))
    monkeypatch.setenv("CONCIERGE_SITE_SITEMAP_URL", "https://team.example/sitemap.xml")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert "CONCIERGE_SITE_DIR" in str(refused.value)
    assert "CONCIERGE_SITE_SITEMAP_URL is set too" in str(refused.value)
