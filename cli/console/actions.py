"""The admin actions, and the guard every POST passes first.

A POST is refused unless it comes from the console's own page (``Sec-Fetch-Site`` and
``Origin``: a page elsewhere cannot forge one) and carries the console's token in the
``Authorization: Bearer`` header (never a cookie, which a browser would add to a forged request
by itself). The token is compared in constant time and never logged. Reading the console
needs the token only when it listens beyond this machine (``CONCIERGE_WEB_HOST``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from typing import Any

from aiohttp import web
from pydantic import SecretStr

from bots.ask import Ask
from bots.client import AskRefused, ConciergeClient
from bots.session import Detached, ReplyTimeout, StopRequested
from broker.protocol import TERMINAL_TYPES
from config.spaces import DEFAULT_SPACE

log = logging.getLogger(__name__)

WEB_USER = "web-console"  # the user id of every cancel and rescrape the console sends
SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
SAME_SITE = {"same-origin", "none"}  # "none": typed in the address bar, a bookmark


def refuse(status: int, message: str) -> web.HTTPException:
    """A one-line JSON refusal the page shows as it is."""
    kinds: dict[int, type[web.HTTPException]] = {
        400: web.HTTPBadRequest,
        401: web.HTTPUnauthorized,
        403: web.HTTPForbidden,
        409: web.HTTPConflict,
    }
    headers = {"WWW-Authenticate": 'Bearer realm="concierge"'} if status == 401 else None
    return kinds[status](
        text=json.dumps({"error": message}), content_type="application/json", headers=headers
    )


LOCAL_NAMES = {"127.0.0.1", "localhost", "[::1]", "::1"}


class Guard:
    def __init__(self, token: SecretStr | None, *, view_needs_token: bool) -> None:
        self._token = token.get_secret_value().encode() if token is not None else None
        self.view_needs_token = view_needs_token

    def check_host(self, request: web.Request) -> None:
        """On this machine only, answer only to this machine's names: a page whose own name
        was pointed at 127.0.0.1 (DNS rebinding) would otherwise read the state, which needs
        no token there."""
        if self.view_needs_token:
            return  # beyond loopback every read needs the token anyway
        name = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        if name not in LOCAL_NAMES:
            raise refuse(403, "this console answers only as 127.0.0.1 or localhost")

    @property
    def actions_enabled(self) -> bool:
        return self._token is not None

    def check_action(self, request: web.Request) -> None:
        """Raise the refusal for a POST that is cross-site or lacks the token."""
        if not same_origin(request):
            log.info("web console: refused %s from another site", request.path)
            raise refuse(403, "refused: actions come only from the console's own page")
        if self._token is None:
            raise refuse(403, "admin actions are off: set CONCIERGE_WEB_TOKEN")
        if not self._valid(request):
            log.info("web console: refused %s without a valid token", request.path)
            raise refuse(401, "refused: this needs the console's token")

    def check_view(self, request: web.Request) -> None:
        if self.view_needs_token and not self._valid(request):
            raise refuse(401, "this console needs its token to be read")

    def _valid(self, request: web.Request) -> bool:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if self._token is None or scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self._token)


def same_origin(request: web.Request) -> bool:
    """Whether the browser says the request comes from a page of this console.

    Browsers send ``Sec-Fetch-Site`` on every request and ``Origin`` on every POST; a client
    that sends neither (curl) is no browser a foreign page could drive.
    """
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in SAME_SITE:
        return False
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    host = origin.partition("://")[2]
    return origin != "null" and host == request.host


class Actions:
    """Stop any exchange, start a rescrape: through the console's own client, as ``web``."""

    def __init__(self, client: ConciergeClient) -> None:
        self.client = client
        self._rescrape: asyncio.Task[None] | None = None

    async def stop(self, session_id: str) -> dict[str, Any]:
        if not SESSION_ID.match(session_id):
            raise refuse(400, "not a session id")
        await self.client.cancel_id(session_id, WEB_USER)
        log.info("web console: stop of session %s sent as %s", session_id, WEB_USER)
        return {"ok": True, "session_id": session_id}

    async def rescrape(self, space: str = DEFAULT_SPACE) -> dict[str, Any]:
        """Rebuild ``space``'s knowledge base (a name the caller checked)."""
        if self._rescrape is not None and not self._rescrape.done():
            raise refuse(409, "a rescrape started from the console is still running")
        try:
            session = await self.client.ask(Ask("", WEB_USER, kind="rescrape", space=space))
        except AskRefused as refused:
            raise refuse(409, str(refused)) from None
        log.info("web console: rescrape of %s asked (session %s)", space, session.session_id)
        self._rescrape = asyncio.create_task(self._follow(session.session_id))
        return {"ok": True, "session_id": session.session_id}

    async def _follow(self, session_id: str) -> None:
        """Read the rescrape's events to its end (the page shows them from the observer's
        copies), so the client forgets the session and acknowledges its end."""
        session = self.client.sessions.get(session_id)
        if session is None:
            return
        with self.client.showing(session):
            try:
                while True:
                    item = await session.next_item()
                    if isinstance(item, StopRequested | Detached):
                        continue
                    if item.type in TERMINAL_TYPES:
                        log.info("web console: rescrape %s ended: %s", session_id, item.type)
                        return
            except ReplyTimeout:
                log.warning("web console: rescrape %s: no reply within the timeout", session_id)

    async def close(self) -> None:
        if self._rescrape is not None:
            self._rescrape.cancel()
            await asyncio.gather(self._rescrape, return_exceptions=True)
