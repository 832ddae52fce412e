"""A fake of Discord's REST API over real HTTP on 127.0.0.1, recording every call.

A real ``discord.Client`` talks to it once ``discord.http.Route.BASE`` points at ``base``. It
keeps the messages the bot posts (with their latest content and buttons), answers a 429 or
drops the connection when told to, takes an interaction's responses and follow-ups, and lets a
test wait for a call without sleeping. Gateway payloads for the bot to parse are built in
tests/fake_discord_wire.py, so the tests read as what happens rather than as JSON.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from bots.discord.buttons import STOP_PREFIX
from bots.discord.history import split_status
from bots.renderer import FINAL_STATUSES, status_of
from tests.fake_discord_wire import (
    API,
    APP_ID,
    BOT_USER,
    DROPPED,
    OWNER_ID,
    Call,
    Drop,
    Handler,
    RateLimit,
    _json,
    _rate_limited,
    message_payload,
)


@dataclass
class FakeDiscord:
    calls: list[Call] = field(default_factory=list)
    # every message: posted by the bot, or said by a person (``add``); served by GET
    messages: dict[int, dict[str, Any]] = field(default_factory=dict)
    commands: list[dict[str, Any]] = field(default_factory=list)  # the app's global commands
    rate_limits: list[RateLimit] = field(default_factory=list)
    drops: list[Drop] = field(default_factory=list)
    base: str = ""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1_200_000_000))
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def new_id(self) -> int:
        return 1_300_000_000_000_000_000 + next(self._ids)

    # --- what tests ask ---------------------------------------------------------------------

    def add(self, message: dict[str, Any]) -> None:
        """Keep a person's message (a gateway payload), so that REST can serve it too."""
        self.messages[int(message["id"])] = message

    def reads(self) -> list[Call]:
        """The messages the bot read over REST (one message, or a channel's history)."""
        return [
            call
            for call in self.calls
            if call.method == "GET" and re.fullmatch(r"/channels/\d+/messages(/\d+)?", call.path)
        ]

    def rate_limit(self, method: str, path: str, retry_after_s: float, times: int = 1) -> None:
        """The next ``times`` calls to ``method`` with a path matching ``path`` get a 429."""
        self.rate_limits.append(RateLimit(method, re.compile(path), retry_after_s, times))

    def drop(self, method: str, path: str, times: int = 1) -> None:
        """The next ``times`` calls to ``method`` with a path matching ``path`` get their
        connection closed, unanswered."""
        self.drops.append(Drop(method, re.compile(path), times))

    async def wait_for(self, predicate: Callable[[Call], bool], timeout_s: float = 60.0) -> Call:
        """The first call (already made or yet to come) for which ``predicate`` holds."""

        def found() -> Call | None:
            return next((call for call in self.calls if predicate(call)), None)

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: found() is not None), timeout_s)
        call = found()
        assert call is not None
        return call

    def chain(self, first_id: int) -> list[int]:
        """An answer's messages: its first, then each continuation (a reply to the one before)."""
        chain = [first_id]
        while replies := self.replies_to(chain[-1]):
            chain.append(int(replies[0].response["id"]))
        return chain

    def ended(self, first_id: int) -> bool:
        """Whether the answer beginning with ``first_id`` shows its end: a final status on its
        last message (read as the bot reads its own), and no Stop button on any of them."""
        chain = self.chain(first_id)
        status = status_of(split_status(self.messages[chain[-1]]["content"])[1])
        buttons = [b for message_id in chain for b in self.buttons(message_id)]
        stop = any(b["custom_id"].startswith(STOP_PREFIX) for b in buttons)
        return status in FINAL_STATUSES and not stop

    async def until_ended(self, first_id: int, timeout_s: float = 60.0) -> list[int]:
        """The messages of the answer beginning with ``first_id``, once it shows its end (its
        final edit, or a stale Stop button taken off after it)."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self.ended(first_id)), timeout_s)
        return self.chain(first_id)

    def buttons(self, message_id: int) -> list[dict[str, Any]]:
        """The buttons a message shows now, in order (each action row's, row by row)."""
        rows = self.messages[message_id].get("components") or []
        return [button for row in rows for button in row.get("components", [])]

    def responses(self, interaction_id: int) -> list[Call]:
        """An interaction's callback and follow-ups (``token-{id}`` is its token), in order."""
        token = f"token-{interaction_id}"
        return [
            call
            for call in self.calls
            if call.path.startswith(f"/interactions/{interaction_id}/{token}/")
            or call.path.startswith(f"/webhooks/{APP_ID}/{token}")
        ]

    def posts(self) -> list[Call]:
        """Messages the bot created, in order (answered 200)."""
        return [
            call
            for call in self.calls
            if call.method == "POST"
            and re.fullmatch(r"/channels/\d+/messages", call.path)
            and call.status == 200
        ]

    def edits(self, message_id: int) -> list[Call]:
        """Successful edits of one message, in order."""
        return [
            call
            for call in self.calls
            if call.method == "PATCH"
            and call.path.endswith(f"/messages/{message_id}")
            and call.status == 200
        ]

    def replies_to(self, message_id: int) -> list[Call]:
        return [
            call
            for call in self.posts()
            if str((call.body.get("message_reference") or {}).get("message_id")) == str(message_id)
        ]

    # --- the server -------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        routes = [
            web.get(f"{API}/users/@me", self._me),
            web.get(f"{API}/oauth2/applications/@me", self._application),
            web.get(f"{API}/applications/{{app}}/commands", self._get_commands),
            web.post(f"{API}/applications/{{app}}/commands", self._upsert_command),
            web.put(f"{API}/applications/{{app}}/commands", self._sync_commands),
            web.post(f"{API}/channels/{{channel}}/messages", self._create_message),
            web.get(f"{API}/channels/{{channel}}/messages", self._channel_history),
            web.get(f"{API}/channels/{{channel}}/messages/{{message}}", self._get_message),
            web.patch(f"{API}/channels/{{channel}}/messages/{{message}}", self._edit_message),
            web.put(f"{API}/channels/{{c}}/messages/{{m}}/reactions/{{emoji}}/@me", self._empty),
            web.delete(f"{API}/channels/{{c}}/messages/{{m}}/reactions/{{emoji}}/@me", self._empty),
            web.post(f"{API}/interactions/{{id}}/{{token}}/callback", self._interaction_callback),
            web.post(f"{API}/webhooks/{{app}}/{{token}}", self._followup),
        ]
        app.add_routes(routes)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        arrived_at = time.monotonic()
        path = request.path.removeprefix(API)
        raw = await request.read()
        body = json.loads(raw) if raw and request.content_type == "application/json" else None
        if self._dropped(request.method, path):
            if request.transport is not None:
                request.transport.close()
            async with self._changed:
                self.calls.append(Call(request.method, path, body, arrived_at, DROPPED, None))
                self._changed.notify_all()
            return web.Response(status=500)  # never reaches the client
        limit = self._rate_limit_for(request.method, path)
        if limit is not None:
            response: web.StreamResponse = _rate_limited(limit.retry_after_s)
        else:
            try:
                response = await handler(request)
            except web.HTTPException as error:
                response = _json({"message": error.reason, "code": 0}, status=error.status)
        answer = (
            json.loads(response.body)
            if isinstance(response, web.Response) and response.body
            else None
        )
        async with self._changed:
            self.calls.append(Call(request.method, path, body, arrived_at, response.status, answer))
            self._changed.notify_all()
        return response

    def _rate_limit_for(self, method: str, path: str) -> RateLimit | None:
        for limit in self.rate_limits:
            if limit.times > 0 and limit.method == method and limit.path.search(path):
                limit.times -= 1
                return limit
        return None

    def _dropped(self, method: str, path: str) -> bool:
        for drop in self.drops:
            if drop.times > 0 and drop.method == method and drop.path.search(path):
                drop.times -= 1
                return True
        return False

    async def _me(self, _: web.Request) -> web.Response:
        return _json(BOT_USER)

    async def _application(self, _: web.Request) -> web.Response:
        owner = {"id": str(OWNER_ID), "username": "owner", "discriminator": "0", "avatar": None}
        return _json(
            {
                "id": str(APP_ID),
                "name": "Concierge",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": owner,
                "verify_key": "0" * 64,
                "flags": 0,
            }
        )

    async def _sync_commands(self, request: web.Request) -> web.Response:
        """A bulk overwrite: every command not in the list is deleted."""
        self.commands = [self._registered(command) for command in await request.json()]
        return _json(self.commands)

    async def _get_commands(self, _: web.Request) -> web.Response:
        return _json(self.commands)

    async def _upsert_command(self, request: web.Request) -> web.Response:
        """Create, or replace the command of the same name and type."""
        command = self._registered(await request.json())
        key = (command["name"], command.get("type", 1))
        self.commands = [c for c in self.commands if (c["name"], c.get("type", 1)) != key]
        self.commands.append(command)
        return _json(command)

    def _registered(self, command: dict[str, Any]) -> dict[str, Any]:
        """As Discord stores it: ids added, permissions as a string, no deprecated field."""
        permissions = command.get("default_member_permissions")
        return {
            **{key: value for key, value in command.items() if key != "dm_permission"},
            "id": str(self.new_id()),
            "application_id": str(APP_ID),
            "version": str(self.new_id()),
            "default_member_permissions": None if permissions is None else str(permissions),
            "integration_types": command.get("integration_types") or [0],
        }

    async def _create_message(self, request: web.Request) -> web.Response:
        data = await request.json()
        reference = data.get("message_reference")
        message = message_payload(
            self.new_id(),
            int(request.match_info["channel"]),
            BOT_USER,
            data.get("content", ""),
            reference=reference,
        )
        message["components"] = data.get("components") or []
        self.messages[int(message["id"])] = message
        return _json(message)

    async def _edit_message(self, request: web.Request) -> web.Response:
        message = self.messages.get(int(request.match_info["message"]))
        if message is None:
            raise web.HTTPNotFound(reason="Unknown Message")
        data = await request.json()
        message["content"] = data.get("content", message["content"])
        if "components" in data:  # absent: the buttons stay as they are
            message["components"] = data["components"] or []
        return _json(message)

    async def _get_message(self, request: web.Request) -> web.Response:
        message = self.messages.get(int(request.match_info["message"]))
        if message is None or message["channel_id"] != request.match_info["channel"]:
            raise web.HTTPNotFound(reason="Unknown Message")
        return _json(message)

    async def _channel_history(self, request: web.Request) -> web.Response:
        """A channel's messages newest first, as Discord pages them (``before``/``after``)."""
        channel, query = request.match_info["channel"], request.query
        found = sorted(
            (m for m in self.messages.values() if m["channel_id"] == channel),
            key=lambda m: int(m["id"]),
        )
        if "before" in query:
            found = [m for m in found if int(m["id"]) < int(query["before"])]
        limit = int(query.get("limit", "50"))
        if "after" in query:  # the oldest ones after it
            page = [m for m in found if int(m["id"]) > int(query["after"])][:limit]
        else:
            page = found[-limit:]
        return _json(list(reversed(page)))

    async def _empty(self, _: web.Request) -> web.Response:
        return web.Response(status=204)

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        data = await request.json()
        flags = (data.get("data") or {}).get("flags", 0)
        interaction = {
            "id": request.match_info["id"],
            "type": 2,
            "response_message_ephemeral": bool(flags & 64),
        }
        return _json({"interaction": interaction})

    async def _followup(self, request: web.Request) -> web.Response:
        """A message sent after the response (ephemeral when flags has 64)."""
        data = await request.json()
        message = message_payload(self.new_id(), 0, BOT_USER, data.get("content", ""))
        return _json(message | {"flags": data.get("flags", 0), "webhook_id": str(APP_ID)})


async def start(fake: FakeDiscord) -> TestServer:
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    fake.base = f"http://127.0.0.1:{server.port}{API}"
    return server
