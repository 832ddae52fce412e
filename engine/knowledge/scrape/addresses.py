"""One page, one address: the spellings of a link that name the same page are read once.

A fragment (``#usage``) is a place on the page; parameters that only re-sort a listing
(``?sort=date``, the ``?C=M;O=A`` of a server's directory listing) or track a campaign
(``utm_source``) leave its text as it is; parameters in another order make the same request.
Left in, each spelling would be fetched again and stored again. courlan (trafilatura's own)
keeps fragments and re-encodes what it keeps, so this is done here with ``urllib``.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# Parameters that change a page's order, not its text (names compared in lower case).
RESORTING_PARAMS = frozenset(
    {"sort", "sortby", "sort_by", "order", "orderby", "order_by", "direction"}
)
DIRECTORY_LISTING_PARAMS = frozenset({"C", "O"})  # Apache's column and order, case as sent
TRACKING_PARAMS = frozenset({"fbclid", "gclid", "msclkid", "mc_cid", "mc_eid"})
TRACKING_PREFIX = "utm_"
DEFAULT_PORTS = {"http": 80, "https": 443}


def page_address(url: str) -> str:
    """``url`` as it is fetched and stored: no fragment, no parameter that only re-sorts or
    tracks; the rest of the query as the site wrote it."""
    address = url.split("#", 1)[0]
    try:
        parts = urlsplit(address)
    except ValueError:  # a malformed address: the fetch says why, not this
        return address
    if not parts.query:
        return address
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(name, value) for name, value in pairs if not _changes_no_text(name)]
    if len(kept) == len(pairs):
        return address
    return urlunsplit(parts._replace(query=urlencode(kept)))


def page_key(url: str) -> str:
    """What every spelling of one page has in common: its address with the scheme and host
    in lower case, without the scheme's default port, and its parameters in sorted order."""
    address = page_address(url)
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError:
        return address
    host = parts.hostname or ""
    netloc = host if port in (None, DEFAULT_PORTS.get(parts.scheme)) else f"{host}:{port}"
    query = "&".join(sorted(parts.query.split("&"))) if parts.query else ""
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", query, ""))


def _changes_no_text(name: str) -> bool:
    lower = name.lower()
    return (
        lower in RESORTING_PARAMS
        or name in DIRECTORY_LISTING_PARAMS
        or lower in TRACKING_PARAMS
        or lower.startswith(TRACKING_PREFIX)
    )
