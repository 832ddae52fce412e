"""What an entry of ``CONCIERGE_SITE_ALLOWED_HOSTS`` means: an origin (scheme, host, port).

``example.com`` allows https://example.com (port 443) and http://example.com (port 80) only;
``example.com:8080`` allows port 8080 under either scheme; ``https://example.com`` or
``http://example.com:8080`` allow that scheme alone. A redirect from https down to http is
refused unless an entry says ``http://`` for that origin. Lives in ``config`` so that a bad
entry stops the program at start, like any other bad setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
FORMS = "write host, host:port, https://host or http://host:port"


@dataclass(frozen=True, slots=True)
class AllowedOrigin:
    """One entry, parsed; ``port`` None means the scheme's default, ``scheme`` None either."""

    host: str
    port: int | None = None
    scheme: str | None = None

    def admits(self, scheme: str, host: str, port: int | None) -> bool:
        """Whether a URL with these parts (``port`` None: its scheme's default) is allowed."""
        if scheme not in DEFAULT_PORTS or host != self.host:
            return False
        if self.scheme is not None and scheme != self.scheme:
            return False
        default = DEFAULT_PORTS[scheme]
        return (port or default) == (self.port or default)


def parse_allowed_origin(entry: str) -> AllowedOrigin:
    """The entry as an origin; ``ValueError`` with a one-line reason when it is not one."""
    text = entry.strip()
    parts = urlsplit(text if "://" in text else f"//{text}")
    if parts.scheme and parts.scheme not in DEFAULT_PORTS:
        raise ValueError(f"{entry!r}: only http:// or https:// may be given; {FORMS}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"{entry!r}: not an origin (no path or user); {FORMS}")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
    host = parts.hostname or ""
    if not host or any(char.isspace() for char in host):
        raise ValueError(f"{entry!r}: no host name; {FORMS}")
    return AllowedOrigin(host, port, parts.scheme or None)
