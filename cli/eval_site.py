"""What a space's site is, for ``concierge eval``'s leak count: the addresses its own rescrape
can put in its knowledge base. An answer citing any other address leaked from elsewhere.

The rule, from the space's settings (docs/spaces.md, "Leaks"):

- a folder (``site_dir``): the addresses of its files, all under ``site_dir_url`` (else the
  folder's ``file://`` URI), as ``engine/knowledge/scrape/folder.py`` names them;
- a web site: an origin the space's crawler may fetch (``site_allowed_hosts``, else the origins
  of its sitemap, feed, page list and start pages: ``engine/knowledge/scrape/hosts.py``, the
  rescrape's own rule), and, on the host of one of those configured addresses, a path under
  the folder of one of them (the sitemap protocol's rule: a sitemap at ``/docs/sitemap.xml``
  lists only pages under ``/docs/``), so that two spaces sharing a host under two folders
  are told apart. An allowed host no configured address is on: any path of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from config.origins import parse_allowed_origin
from config.settings import WEB_SITE_FIELDS, Settings
from engine.knowledge.scrape.hosts import HostPolicy, allowed_hosts


@dataclass(frozen=True)
class SiteRule:
    """The addresses of one space's site: ``within`` says whether a cited one is."""

    prefixes: tuple[str, ...]  # what the rule says, for the report: folders and hosts
    policy: HostPolicy | None = None  # a web site's crawl policy; None: a folder (prefixes)
    folders: tuple[tuple[str, str], ...] = ()  # (host, path folder) of the configured URLs

    def within(self, url: str) -> bool:
        if self.policy is None:
            return url.startswith(self.prefixes)
        if not self.policy.allows(url):  # a malformed address included
            return False
        parts = urlsplit(url)
        paths = [folder for host, folder in self.folders if host == parts.hostname]
        return not paths or parts.path.startswith(tuple(paths))

    def leaks(self, cited: list[str]) -> list[str]:
        """The cited addresses that are not on this site."""
        return [url for url in cited if not self.within(url)]


def site_rule(settings: Settings) -> SiteRule | None:
    """The rule for the site ``settings`` name; None when they name none (nothing to judge by)."""
    if settings.site_dir is not None:
        base = settings.site_dir_url or settings.site_dir.resolve().as_uri()
        return SiteRule((base.rstrip("/") + "/",))
    configured = [url for name in WEB_SITE_FIELDS for url in _urls(getattr(settings, name))]
    if not configured:
        return None
    folders = tuple(dict.fromkeys((_host(url), _folder(url)) for url in configured))
    named = {host for host, _ in folders}
    shown = [f"{_origin_text(url)}{_folder(url)}" for url in configured]
    shown += [
        f"{entry} (any path)"
        for entry in settings.site_allowed_hosts
        if parse_allowed_origin(entry).host not in named
    ]
    policy = allowed_hosts(settings.site_allowed_hosts, configured)
    return SiteRule(tuple(dict.fromkeys(shown)), policy, folders)


def _urls(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def _folder(url: str) -> str:
    """The path up to its last ``/``: ``/docs/sitemap.xml`` -> ``/docs/``, ``/docs`` -> ``/``."""
    path = urlsplit(url).path or "/"
    return path[: path.rfind("/") + 1]


def _origin_text(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
