"""The one rule for showing a URL that may carry a secret, in messages, logs and status.

``scheme://user:password@host:port/path?query#fragment`` is shown as
``scheme://***@host:port/path``:

- everything up to the last ``@`` becomes ``***@``: the user goes too (a user alone may be a
  token, as in ``https://TOKEN@host``), and so does a password pasted without escaping its
  ``/``, ``?``, ``#`` or ``@``, which a URL parser would take for the path;
- the query and the fragment are dropped (``?api_key=``);
- the scheme, host, port and path stay: they say which server is meant.

Log lines look the same: ``config.logging`` turns ``user:password@`` into ``***@`` wherever a
library writes a URL.
"""

from __future__ import annotations

import re

MASK = "***"
_QUERY_OR_FRAGMENT = re.compile(r"[?#].*", re.DOTALL)


def masked_url(url: str) -> str:
    """``url`` as it may be shown (the rule is the module's): a plain split, not a parser, so
    a malformed URL is masked too instead of raising or being read some other way."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "", url
    _, at, location = rest.rpartition("@")
    return scheme + separator + (MASK + at if at else "") + _QUERY_OR_FRAGMENT.sub("", location)
