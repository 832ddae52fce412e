"""How a rescrape, or one request of it, goes wrong.

``RescrapeStopped`` and ``RescrapeFailed`` end a rescrape without switching the knowledge base;
``FetchError`` and its kinds end one page (or sitemap) and are turned into a ``PageFailure``, as
``NoArticleText`` does for a page read but not kept.
"""

from __future__ import annotations

from config.errors import ConciergeError
from config.texts import Locale, t
from engine.knowledge.models import PageFailure


class RescrapeStopped(ConciergeError):
    """The user stopped the rescrape; the previous knowledge base is untouched. A stop, caught
    by the rescrape job: it never reaches a person."""


class RescrapeFailed(ConciergeError):
    """Nothing usable came back (no source, no articles, a sitemap that failed).

    Raised instead of replacing a good knowledge base with an empty or partial one;
    ``failures`` lists the pages that were tried and why each was not read. The reason is the
    catalogue's text ``key`` with its ``fields``: the exception reads in English, the asker
    in their own locale (``text``).
    """

    def __init__(self, key: str, failures: tuple[PageFailure, ...] = (), **fields: object) -> None:
        super().__init__(t(key, "en", **fields))
        self.key = key
        self.fields = fields
        self.failures = failures

    def text(self, locale: Locale) -> str:
        return t(self.key, locale, **self.fields)


class NoArticleText(ConciergeError):
    """The page has no main text we can use; the message says why. Like ``FetchError``, it
    ends one page (its reason goes in the rescrape's report) and never the command."""


class NotAnArticle(NoArticleText):
    """A page that is, on purpose, no article: it asks not to be kept (noindex), it sends the
    reader on (``<meta http-equiv="refresh">``), or it is an index of nothing but links.
    Counted as skipped, not failed: nothing is wrong with it."""


class FetchError(ConciergeError):
    """A request that gave no usable page. ``status`` is None when no HTTP answer came. It
    ends one page (a ``PageFailure``, its reason in the rescrape's report), never the command."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status

    @property
    def transient(self) -> bool:
        """A timeout or a server error: the page probably still exists."""
        return self.status is None or self.status >= 500


class NotAllowedHost(FetchError):
    """An origin outside ``CONCIERGE_SITE_ALLOWED_HOSTS``, or a redirect from https to http."""

    @property
    def transient(self) -> bool:
        return False  # asking again changes nothing


class PageSkipped(FetchError):
    """Not read on purpose (robots.txt, not HTML): counted as skipped, not failed."""

    @property
    def transient(self) -> bool:
        return False


class RobotsDisallowed(PageSkipped):
    """robots.txt asks us not to fetch this URL."""


class NotHtml(PageSkipped):
    """The page is a PDF, an image or another type the article extractor cannot read."""
