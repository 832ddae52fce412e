"""Discord's edit rate limit on the fake Discord: 5 edits per 5 s in a channel, as the real one
answers them (``X-RateLimit-*`` headers, a 429 past the limit).

The plain fake sends no rate-limit headers, so discord.py never waits before an edit; the
real Discord does, and discord.py then holds an edit that used a channel's last one until the
window is over (the ``await message.edit`` does not return before). A measurement of how fast
a stop shows must see that, and a test that the bot stays within the limit must see a 429.
The window is fixed, beginning at the first edit after the last one ended (what the headers
of the real one describe; the exact rule is not published).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from aiohttp import web

from tests.fake_discord import FakeDiscord
from tests.fake_discord_wire import API, Handler, _rate_limited

EDITS_PER_WINDOW = 5
WINDOW_S = 5.0
_EDIT = re.compile(rf"{API}/channels/(\d+)/messages/\d+")


@dataclass
class Window:
    """One channel's edits in the current window."""

    ends_at: float
    used: int = 0


@dataclass
class RateLimitedDiscord(FakeDiscord):
    """The fake Discord with the edit limit; ``window_s`` is scaled down in tests that edit
    faster than Discord's real pace."""

    window_s: float = WINDOW_S
    windows: dict[str, Window] = field(default_factory=dict)

    def app(self) -> web.Application:
        app = super().app()
        app.middlewares.append(self._limit_edits)  # inside the recording: a 429 is recorded
        return app

    def refused(self) -> int:
        """How many edits were answered 429."""
        return sum(1 for call in self.calls if call.method == "PATCH" and call.status == 429)

    @web.middleware
    async def _limit_edits(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        match = _EDIT.fullmatch(request.path)
        if request.method != "PATCH" or match is None:
            return await handler(request)
        now = time.monotonic()
        window = self.windows.get(match[1])
        if window is None or now >= window.ends_at:
            window = self.windows[match[1]] = Window(now + self.window_s)
        if window.used >= EDITS_PER_WINDOW:
            return _rate_limited(window.ends_at - now)
        window.used += 1
        response = await handler(request)
        response.headers.update(
            {
                "X-RateLimit-Limit": str(EDITS_PER_WINDOW),
                "X-RateLimit-Remaining": str(EDITS_PER_WINDOW - window.used),
                "X-RateLimit-Reset-After": f"{max(0.0, window.ends_at - time.monotonic()):.3f}",
                "X-RateLimit-Bucket": f"edits-{match[1]}",
            }
        )
        return response
