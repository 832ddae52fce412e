"""Slack's side of HTTP mode: signed event callbacks, clicks and slash commands to the bot."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp

from tests.fake_slack import API_APP_ID, BOT_USER_ID, TEAM_ID, FakeSlack


def signature_headers(body: str, secret: str, at: float | None = None) -> dict[str, str]:
    """Slack's request signing: ``v0=`` HMAC-SHA256 of ``v0:<timestamp>:<body>``."""
    timestamp = str(int(time.time() if at is None else at))
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


@dataclass
class SlackDelivery:
    """Slack's side of HTTP mode: signed event callbacks and slash commands to the bot's URL."""

    url: str
    secret: str
    fake: FakeSlack
    session: aiohttp.ClientSession = field(default_factory=aiohttp.ClientSession)

    async def event(self, event: dict[str, Any], *, secret: str | None = None) -> int:
        """Deliver an Events API callback; returns the HTTP status the bot answered."""
        body = json.dumps(
            {
                "token": "unused",
                "team_id": TEAM_ID,
                "api_app_id": API_APP_ID,
                "type": "event_callback",
                "event_id": f"Ev{uuid.uuid4().hex[:10]}",
                "event_time": int(time.time()),
                "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
                "event": event,
            }
        )
        status, _ = await self.post(body, "application/json", secret=secret)
        return status

    async def action(self, payload: dict[str, Any]) -> tuple[int, str]:
        """An interactive payload (a button clicked), as Slack posts it: a form whose
        ``payload`` is the JSON; it carries a response URL for ephemeral answers."""
        payload = {
            "type": "block_actions",
            "team": {"id": TEAM_ID},
            "api_app_id": API_APP_ID,
            "token": "unused",
            "trigger_id": "1.2.3",
            "response_url": self.fake.response_url(),
        } | payload
        return await self.post(
            urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
        )

    async def command(
        self, command: str, text: str, *, user_id: str, channel_id: str
    ) -> tuple[int, str]:
        """Run a slash command; returns the status and body the bot answered."""
        form = {
            "token": "unused",
            "team_id": TEAM_ID,
            "api_app_id": API_APP_ID,
            "channel_id": channel_id,
            "user_id": user_id,
            "command": command,
            "text": text,
            "response_url": self.fake.response_url(),
            "trigger_id": "1.2.3",
        }
        return await self.post(urlencode(form), "application/x-www-form-urlencoded")

    async def post(
        self, body: str, content_type: str, *, secret: str | None = None, at: float | None = None
    ) -> tuple[int, str]:
        headers = signature_headers(body, secret or self.secret, at)
        headers["Content-Type"] = content_type
        async with self.session.post(self.url, data=body.encode(), headers=headers) as response:
            return response.status, await response.text()

    async def close(self) -> None:
        await self.session.close()
