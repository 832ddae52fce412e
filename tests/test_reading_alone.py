"""Pages are fetched concurrently but read (parsed, extracted) one at a time: lxml and
trafilatura in two threads at once corrupted the engine's memory at a rescrape's start (an
eval's engine died of "malloc(): invalid size", adbar/trafilatura#840 and #925)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.knowledge.models import Section
from engine.knowledge.scrape import crawl, folder
from engine.knowledge.scrape.extract import reading_now
from engine.knowledge.scrape.fetch import Response
from engine.knowledge.scrape.sections import Page

HTML = b"<html><head><title>Ferry</title></head><body><main><h1>Ferry</h1>" + (
    b"<p>The ferry leaves the harbour at nine every morning and returns at five.</p>"
    b"</main></body></html>"
)


@pytest.fixture
def extractions(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the reading was marked as under way, at each extraction."""
    seen: list[bool] = []

    def extract_article(html: bytes, url: str, root: object = None) -> Page:
        seen.append(reading_now())
        return Page("Ferry", (Section(("Ferry",), None, "The ferry leaves at nine."),))

    monkeypatch.setattr(crawl, "extract_article", extract_article)
    monkeypatch.setattr(folder, "extract_article", extract_article)
    return seen


def test_a_crawled_page_is_read_alone(extractions: list[bool]) -> None:
    url = "http://docs.example/ferry.html"

    crawl._read_page(Response(url, 200, HTML), url)

    assert extractions == [True]
    assert not reading_now()


def test_a_folders_file_is_read_alone(extractions: list[bool], tmp_path: Path) -> None:
    page = tmp_path / "ferry.html"
    page.write_bytes(HTML)

    folder.read_document(page, "http://docs.example/ferry.html")

    assert extractions == [True]
    assert not reading_now()
