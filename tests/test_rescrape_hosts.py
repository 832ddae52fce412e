"""A rescrape held to the site's origins: allowed hosts, ports and child sitemaps."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator

import aiohttp
import pytest

from config.origins import parse_allowed_origin
from config.settings import ConfigError, Settings, load_settings
from engine.knowledge.models import PageFailure
from engine.knowledge.scrape.errors import RescrapeFailed
from engine.knowledge.scrape.hosts import DOWNGRADE, NOT_ALLOWED, HostPolicy, allowed_hosts
from tests.rescrape_fixture import (
    ROOT,
    by_slug,
    scrape,
    settings,  # noqa: F401  # the fixture
)
from tests.site_fixture import FakeSite, ForeignSite
from tests.site_fixture import start as start_site


@pytest.fixture
async def other_port() -> AsyncIterator[tuple[ForeignSite, str]]:
    """The site's own host, 127.0.0.1, on another port: not allowed; records any request."""
    other = ForeignSite()
    server = await start_site(other.app())
    yield other, f"http://127.0.0.1:{server.port}"
    await server.close()


# --- allowed hosts are origins ---------------------------------------------------------------


async def test_another_port_of_the_allowed_host_is_refused_in_a_sitemap_and_a_redirect(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
    other_port: tuple[ForeignSite, str],
) -> None:
    other, other_base = other_port
    site.extra_locs += [f"{other_base}/listed-elsewhere", f"{site.base}/articles/hop"]
    site.redirects["/articles/hop"] = f"{other_base}/stolen"

    result = await scrape(settings)

    assert other.hits == []
    failures = by_slug(result.failures)
    assert failures["listed-elsewhere"] == PageFailure(
        f"{other_base}/listed-elsewhere", "not an allowed host", "skipped"
    )
    assert failures["hop"].outcome == "failed"
    assert failures["hop"].reason == f"not an allowed host (redirect to {other_base}/stolen)"
    assert result.articles == 4  # the entry "127.0.0.1:<port>" admits the site itself
    async with aiohttp.ClientSession() as session, session.get(f"{other_base}/x") as response:
        assert response.status == 200
    assert other.hits == ["/x"]  # the recorder works


async def test_a_bare_host_allows_only_the_default_port(settings: Settings, site: FakeSite) -> None:  # noqa: F811  # the fixture imported above
    bare = settings.model_copy(update={"site_allowed_hosts": ["127.0.0.1"]})

    with pytest.raises(RescrapeFailed, match=r"sitemap_index\.xml: not an allowed host"):
        await scrape(bare)

    assert site.hits == []


POLICY = HostPolicy(
    parse_allowed_origin(entry)
    for entry in (
        "example.com",
        "https://secure.example",
        "http://plain.example",
        "alt.example:8443",
    )
)


@pytest.mark.parametrize(
    ("url", "redirected_from", "refusal"),
    [
        ("https://example.com/a", None, None),
        ("http://example.com/a", None, None),
        ("https://EXAMPLE.com/a", None, None),
        ("https://example.com:443/a", None, None),
        ("https://example.com:8443/a", None, NOT_ALLOWED),
        ("http://example.com:443/a", None, NOT_ALLOWED),
        ("http://example.com/a", "https://example.com/b", DOWNGRADE),
        ("https://example.com/a", "http://example.com/b", None),
        ("http://secure.example/a", None, NOT_ALLOWED),
        ("http://plain.example/a", "https://elsewhere.example/", None),
        ("https://plain.example/a", None, NOT_ALLOWED),
        ("https://alt.example:8443/a", None, None),
        ("https://alt.example/a", None, NOT_ALLOWED),
        ("ftp://example.com/a", None, NOT_ALLOWED),
        ("http://example.com:99999/a", None, NOT_ALLOWED),
        ("https://evil.example/a", None, NOT_ALLOWED),
    ],
)
def test_an_allowed_host_is_an_origin(
    url: str, redirected_from: str | None, refusal: str | None
) -> None:
    assert POLICY.refusal(url, redirected_from) == refusal


def test_unset_allowed_hosts_are_the_origins_of_the_sources() -> None:
    policy = allowed_hosts([], ["http://127.0.0.1:5000/sitemap.xml", "https://team.example/feed"])

    assert policy.allows("http://127.0.0.1:5000/a")
    assert not policy.allows("http://127.0.0.1:5001/a")
    assert policy.allows("https://team.example/a")
    assert not policy.allows("https://team.example:8443/a")


@pytest.mark.parametrize(
    "value",
    ['["127.0.0.1:99999"]', "ftp://team.example", "team.example/articles", "user@team.example"],
)
def test_a_bad_allowed_hosts_entry_is_a_config_error(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONCIERGE_SITE_ALLOWED_HOSTS", value)

    with pytest.raises(ConfigError, match="CONCIERGE_SITE_ALLOWED_HOSTS"):
        load_settings(_env_file=None)


def test_a_host_with_a_port_is_accepted_and_admits_that_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONCIERGE_SITE_ALLOWED_HOSTS", '["127.0.0.1:18434"]')

    loaded = load_settings(_env_file=None)

    assert allowed_hosts(loaded.site_allowed_hosts, []).allows("http://127.0.0.1:18434/a")


async def test_the_engine_exits_78_naming_the_variable_for_a_bad_entry() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CONCIERGE_")}
    env["CONCIERGE_SITE_ALLOWED_HOSTS"] = "127.0.0.1:notaport"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli.main", "engine", env=env, cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 78
    assert "CONCIERGE_SITE_ALLOWED_HOSTS" in stderr.decode()
    assert "Traceback" not in stderr.decode()


async def test_a_child_sitemap_elsewhere_is_skipped_with_a_reason_and_the_rest_goes_on(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
    foreign: tuple[ForeignSite, str],
) -> None:
    foreign_site, foreign_base = foreign
    site.extra_sitemaps += [f"{foreign_base}/sitemap.xml", f"{site.base}/private/sitemap.xml"]

    result = await scrape(settings)

    assert result.articles == 4
    assert foreign_site.hits == []
    assert (
        PageFailure(
            f"{foreign_base}/sitemap.xml", "sitemap not read: not an allowed host", "skipped"
        )
        in result.failures
    )
    assert (
        PageFailure(
            f"{site.base}/private/sitemap.xml",
            "sitemap not read: disallowed by robots.txt",
            "skipped",
        )
        in result.failures
    )
