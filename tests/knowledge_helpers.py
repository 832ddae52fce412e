"""What the knowledge base tests share: the local site's settings and scraping it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from config.settings import Settings
from engine.knowledge.models import ScrapeProgress, ScrapeResult
from engine.knowledge.scrape.rescrape import rescrape
from tests.site_fixture import FakeSite


@pytest.fixture
def settings(site: FakeSite, tmp_path: Path) -> Settings:
    """Replaces conftest's broker settings here: these tests need only the site and a file."""
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        kb_path=tmp_path / "kb" / "kb.sqlite3",
        site_sitemap_url=f"{site.base}/sitemap_index.xml",
        site_feed_url=f"{site.base}/feed.xml",
        site_allowed_hosts=[site.netloc],
        scrape_delay_s=0.01,
        scrape_timeout_s=5,
    )


async def scrape(
    settings: Settings,
    on_progress: Callable[[ScrapeProgress], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> ScrapeResult:
    return await rescrape(settings, on_progress or (lambda _: None), should_stop)
