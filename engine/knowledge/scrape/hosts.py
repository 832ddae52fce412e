"""Which URLs a rescrape may fetch: origins (scheme, host, port), as ``config.origins`` reads
``CONCIERGE_SITE_ALLOWED_HOSTS``; asked for every URL and every redirect hop."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from config.origins import AllowedOrigin, parse_allowed_origin

NOT_ALLOWED = "not an allowed host"
DOWNGRADE = "a redirect from https to http (allow it with an http:// entry)"


class HostPolicy:
    """The allowed origins; ``refusal`` says why a URL may not be fetched, or None."""

    def __init__(self, origins: Iterable[AllowedOrigin]) -> None:
        self.origins = tuple(origins)

    def allows(self, url: str) -> bool:
        return self.refusal(url) is None

    def refusal(self, url: str, redirected_from: str | None = None) -> str | None:
        """None when ``url`` may be fetched; reached by a redirect, plain http after https
        needs an entry that says ``http://``."""
        try:
            parts = urlsplit(url)
            scheme, host, port = parts.scheme, parts.hostname or "", parts.port
        except ValueError:  # a malformed URL or port, e.g. from a Location header
            return NOT_ALLOWED
        admitting = [origin for origin in self.origins if origin.admits(scheme, host, port)]
        if not admitting:
            return NOT_ALLOWED
        downgrade = scheme == "http" and _scheme(redirected_from) == "https"
        if downgrade and not any(origin.scheme == "http" for origin in admitting):
            return DOWNGRADE
        return None


def allowed_hosts(configured: Iterable[str], source_urls: Iterable[str]) -> HostPolicy:
    """The configured origins, or when none are set, those of the configured source URLs
    (their host, and their port when it is not the scheme's default)."""
    entries = list(configured)
    if entries:
        return HostPolicy(parse_allowed_origin(entry) for entry in entries)
    return HostPolicy(origin for url in source_urls if (origin := _origin_of(url)))


def _origin_of(url: str) -> AllowedOrigin | None:
    try:
        parts = urlsplit(url)
        return AllowedOrigin(parts.hostname, parts.port) if parts.hostname else None
    except ValueError:
        return None


def _scheme(url: str | None) -> str:
    return urlsplit(url).scheme if url else ""
