"""What a page tells a crawler besides its text: the links to follow, its canonical address,
and whether its text may be kept.

Read as search engines read them: ``<meta name="robots">`` (or one named for this bot) and
the ``X-Robots-Tag`` header may say ``noindex`` (do not keep this page's text), ``nofollow``
(follow none of its links) or ``none`` (both); ``<a rel="nofollow">`` keeps one link out;
``<link rel="canonical">`` names the address the page's text belongs to; ``<meta
http-equiv="refresh" content="0; url=…">`` sends the reader on to another page at once, a
redirect written in the page. lxml resolves every link against the page's address and its
``<base href>``, as a browser does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin

from lxml import html as lxml_html
from lxml.etree import ParserError, _Element

from engine.knowledge.scrape.addresses import page_address, page_key

ROBOTS_NAMES = frozenset({"robots", "conciergebot"})  # conciergebot: USER_AGENT's product
LINK_TAGS = frozenset({"a", "area"})
WEB_SCHEMES = ("http://", "https://")
# "0; url=Options.html#Description-of-Options" (the delay in seconds, then where to)
REFRESH_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*[;,]\s*(?:url\s*=\s*)?['\"]?([^'\"]*)", re.I)
EMPTY_URL_RE = re.compile(r"\s*(?:url\s*=\s*)?", re.I)  # "0;url=": no address after all
REDIRECT_MAX_DELAY_S = 10  # a longer wait shows the page first: it is read as a page


@dataclass(frozen=True, slots=True)
class PageHints:
    """The pages a page links to (each once, in page order, ``nofollow`` ones left out, its
    canonical among them), its canonical address, and whether it asks not to be kept."""

    links: tuple[str, ...] = ()
    canonical: str | None = None
    noindex: bool = False


def read_hints(html: bytes, url: str, robots_header: str | None = None) -> PageHints:
    """The page's hints; ``url`` is where it was found (after redirects). CPU-bound: call it
    from a worker thread."""
    return hints_of(parse_page(html, url), url, robots_header)


def parse_page(html: bytes, url: str) -> _Element | None:
    """The page's tree, its links made absolute (``url``: where it was found); None when it
    cannot be parsed. The crawl reads its hints and then its text from this one tree."""
    try:
        root = lxml_html.document_fromstring(html, base_url=url)
        root.make_links_absolute(url, resolve_base_href=True, handle_failures="discard")
    except (ParserError, ValueError):  # ValueError: a malformed <base href="http://[::1">
        return None
    return root


def hints_of(root: _Element | None, url: str, robots_header: str | None = None) -> PageHints:
    """The hints of a page parsed by ``parse_page`` from ``url``, before its text is read
    (which drops the navigation, and its links with it)."""
    directives = robots_directives(robots_header or "")
    if root is None:
        return PageHints(noindex="noindex" in directives)
    for meta in root.iter("meta"):
        if (meta.get("name") or "").strip().lower() in ROBOTS_NAMES:
            directives |= robots_directives(meta.get("content") or "")
    canonical, target = canonical_of(root), refresh_target(root)
    links: list[str] = [target] if target else []  # followed as an HTTP redirect would be
    if "nofollow" not in directives:
        links += [*_followed_links(root), *([canonical] if canonical else [])]
    return PageHints(_each_once(links, url), canonical, "noindex" in directives)


def robots_directives(text: str) -> set[str]:
    """``noindex`` and ``nofollow`` from a robots tag's comma-separated value (``none`` is
    both). A directive for another bot (``otherbot: noindex``) is left out; read simply, a
    directive after it in the same header counts for every bot, which errs on the polite side."""
    directives: set[str] = set()
    for part in text.lower().split(","):
        bot, colon, directive = part.partition(":")
        if colon and bot.strip() not in ROBOTS_NAMES:
            continue  # another bot's, or a dated rule (unavailable_after: ...)
        word = (directive if colon else part).strip()
        directives |= {"noindex", "nofollow"} if word == "none" else {word}
    return directives & {"noindex", "nofollow"}


def canonical_of(root: _Element) -> str | None:
    """The page's ``<link rel="canonical">`` address (absolute once links were resolved)."""
    for link in root.iter("link"):
        if "canonical" in (link.get("rel") or "").lower().split() and link.get("href"):
            return str(link.get("href")).strip()
    return None


def refresh_target(root: _Element) -> str | None:
    """Where the page's ``<meta http-equiv="refresh">`` sends the reader within
    ``REDIRECT_MAX_DELAY_S``, resolved against the page's address; None when it sends them
    nowhere else. Texinfo writes such a page for every node inside a chapter ("The node you
    are looking for is at …"): 144 of zsh's 186 pages, each a one-line article before."""
    for meta in root.iter("meta"):
        if (meta.get("http-equiv") or "").strip().lower() != "refresh":
            continue
        if next(meta.iterancestors("noscript"), None) is not None:
            continue  # only for a browser without scripts ("enable JavaScript"): not us
        match = REFRESH_RE.match(meta.get("content") or "")
        if match is None or float(match[1]) > REDIRECT_MAX_DELAY_S:
            return None
        if EMPTY_URL_RE.fullmatch(match[2]):
            return None
        page = root.base_url or ""
        target = urljoin(page, match[2].strip())
        return None if page_key(target) == page_key(page) else target  # it reloads itself
    return None


def _followed_links(root: _Element) -> Iterable[str]:
    for element, attribute, link, _ in root.iterlinks():
        if element.tag not in LINK_TAGS or attribute != "href":
            continue
        if link.lower().startswith(WEB_SCHEMES) and not _is_nofollow(element):
            yield link


def _is_nofollow(element: _Element) -> bool:
    return "nofollow" in (element.get("rel") or "").lower().split()


def _each_once(links: Iterable[str], page_url: str) -> tuple[str, ...]:
    """Each page once, by its address (addresses.py), and not the page itself."""
    addresses: dict[str, str] = {page_key(page_url): ""}
    for link in links:
        addresses.setdefault(page_key(link), page_address(link))
    return tuple(address for address in addresses.values() if address)
