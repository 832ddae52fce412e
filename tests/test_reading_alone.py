"""Pages are fetched concurrently but read (parsed, extracted) on one thread of their own:
lxml and trafilatura in two threads at once corrupted the engine's memory at a rescrape's
start (an eval's engine died of "malloc(): invalid size", adbar/trafilatura#840 and #925),
and a page waiting its turn must hold no thread of the pool that plans answers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from config.settings import Settings
from engine.knowledge.scrape import crawl, extract, folder
from engine.knowledge.scrape.errors import NoArticleText
from engine.knowledge.scrape.fetch import Response
from engine.knowledge.scrape.sections import Page
from tests.linked_site_fixture import LinkedSite
from tests.rescrape_fixture import scrape


@pytest.fixture
def readers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread each page's extraction ran on (the real extraction, watched)."""
    names: list[str] = []
    real = extract.extract_article

    def extract_article(html: bytes, url: str, root: object = None) -> Page:
        names.append(threading.current_thread().name)
        return real(html, url, root)  # type: ignore[arg-type]

    monkeypatch.setattr(crawl, "extract_article", extract_article)
    monkeypatch.setattr(folder, "extract_article", extract_article)
    return names


async def test_a_crawls_pages_are_read_on_the_page_reader(
    readers: list[str], linked: LinkedSite, tmp_path: Path
) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        kb_path=tmp_path / "kb.sqlite3",
        site_start_url=[f"{linked.base}/"],
        site_allowed_hosts=[linked.netloc],
        scrape_delay_s=0.0,
    )

    result = await scrape(settings)

    assert result.articles > 1
    assert len(readers) >= result.articles
    assert {name.rsplit("_", 1)[0] for name in readers} == {"page-reader"}


async def test_a_folders_files_are_read_on_the_page_reader(
    readers: list[str], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("ferry", "museum"):
        (docs / f"{name}.md").write_text(f"# The {name}\n\nThe {name} opens at nine every day.")
    settings = Settings(_env_file=None, kb_path=tmp_path / "kb.sqlite3", site_dir=docs)  # type: ignore[call-arg]

    result = await scrape(settings)

    assert result.articles == 2
    assert {name.rsplit("_", 1)[0] for name in readers} == {"page-reader"}


def test_a_page_without_text_gives_an_error_that_holds_no_tree() -> None:
    """The error is what the crawl keeps of the page; its traceback's frames held the tree,
    which was then freed on the event loop's thread, beside the next page's parsing."""
    url = "http://docs.example/empty.html"

    _, error = crawl._read_page(Response(url, 200, b"<html><body></body></html>"), url)

    assert isinstance(error, NoArticleText)
    assert error.__traceback__ is None


async def test_an_error_raised_in_turn_keeps_no_frame_of_the_reading(tmp_path: Path) -> None:
    empty = tmp_path / "empty.html"
    empty.write_text("<html><body></body></html>")

    with pytest.raises(NoArticleText) as raised:
        await extract.read_in_turn(folder.read_document, empty, "http://docs.example/empty")

    frames = [entry.name for entry in raised.traceback]
    assert "extract_article" not in frames and "read_document" not in frames
