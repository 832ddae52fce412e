"""Discord's REST fake plus a Gateway websocket, for what only the websocket path does.

``tests/fake_discord.py`` hands gateway events to discord.py's parsers directly, which skips
``DiscordWebSocket.received_message``: the place where discord.py logs each raw event at
DEBUG. This fake adds a websocket at ``gateway_url`` (a ``discord.Client`` connects to
``DiscordWebSocket.DEFAULT_GATEWAY``) that says HELLO, answers the IDENTIFY with READY, the
guilds and then ``events``, as Discord's Gateway does (in text frames, which discord.py reads
without its zlib stream).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fake_discord import FakeDiscord
from tests.fake_discord_wire import API, ready_payload

HELLO, IDENTIFY, HEARTBEAT, HEARTBEAT_ACK, DISPATCH = 10, 2, 1, 11, 0


@dataclass
class FakeGateway(FakeDiscord):
    guilds: list[dict[str, Any]] = field(default_factory=list)  # GUILD_CREATE after READY
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # then these
    identified: list[dict[str, Any]] = field(default_factory=list)  # IDENTIFY payloads

    @property
    def gateway_url(self) -> str:
        return self.base.replace("http", "ws", 1).removesuffix(API) + "/gateway"

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/gateway", self._gateway)
        return app

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_str(json.dumps({"op": HELLO, "d": {"heartbeat_interval": 45_000}}))
        async for frame in socket:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            message = json.loads(frame.data)
            if message["op"] == HEARTBEAT:
                await socket.send_str(json.dumps({"op": HEARTBEAT_ACK}))
            elif message["op"] == IDENTIFY:
                self.identified.append(message["d"])
                await self._dispatch_all(socket)
        return socket

    async def _dispatch_all(self, socket: web.WebSocketResponse) -> None:
        ready = ready_payload() | {"resume_gateway_url": self.gateway_url}
        dispatches = [("READY", ready)]
        dispatches += [("GUILD_CREATE", guild) for guild in self.guilds] + self.events
        for seq, (name, data) in enumerate(dispatches, start=1):
            await socket.send_str(json.dumps({"op": DISPATCH, "t": name, "s": seq, "d": data}))
