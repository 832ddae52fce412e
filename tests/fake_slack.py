"""A local stand-in for Slack over real HTTP on 127.0.0.1, recording everything it is sent.

Three faces, as Slack has them: the Web API (``/api/<method>``, which a real ``AsyncWebClient``
reaches through ``base_url``), response URLs (``/respond/<id>``) and a Socket Mode websocket
(``/socket``) that says ``hello`` and then carries whatever envelopes a test pushes. The other
direction, Slack delivering events to the bot over HTTP, is tests/fake_slack_delivery.py's
``SlackDelivery``: it signs each request the way Slack does, so the bot's own verification
decides.

The Web API keeps what Slack keeps: messages posted (``chat.postMessage``) or streamed
(``chat.startStream`` / ``appendStream`` / ``stopStream``, each version of the text kept; only
with ``streaming`` on, else Slack's answer to a method it lacks), their blocks, and who a user
is (``users.info`` gives the ``locale`` only with ``include_locale``).
A stream can be made to expire, as Slack's do after a while (``expire_streams_after``): the
next call on it is answered ``message_not_in_streaming_state``. A message still streaming is
not edited (``chat.update`` is refused): a bot must stop its stream before it rewrites it.
A method in ``dropped`` is carried out, but the connection closes before its answer, as when
the network fails: the client sees no answer at all. A method in ``unanswered`` is carried out
and then Slack goes quiet: the client waits until its own timeout (and the server drops the
wait when the client hangs up).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

BOT_USER_ID = "UBOT00001"
BOT_ID = "BBOT00001"
TEAM_ID = "T0000001"
API_APP_ID = "A0000001"

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One Web API call as the fake received it, and whether it was answered ``ratelimited``."""

    method: str
    params: dict[str, Any]
    at: float  # time.monotonic() on arrival
    ratelimited: bool = False


@dataclass
class Message:
    """A message the bot posted, with every text it has shown (first the posted one)."""

    channel: str
    ts: str
    thread_ts: str | None
    texts: list[str]
    updated_at: list[float]
    user: str = BOT_USER_ID  # who wrote it: the bot, or a person (``FakeSlack.said``)
    streamed: bool = False  # made by chat.startStream (its texts are Markdown)
    streaming: bool = False  # a stream still open: appendStream and stopStream accepted
    appends: int = 0  # appendStream calls taken
    blocks: list[dict[str, Any]] = field(default_factory=list)  # the last blocks it was given
    recipient: tuple[str, str] | None = None  # a stream's (recipient_user_id, recipient_team_id)

    @property
    def text(self) -> str:
        return self.texts[-1]


@dataclass
class FakeSlack:
    """The fake; tests read ``calls``, ``messages``, ``responses`` and ``acks``."""

    users: dict[str, dict[str, Any]] = field(default_factory=dict)  # what users.info says
    calls: list[Call] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)  # in the order they were posted
    people: list[Message] = field(default_factory=list)  # what people said (``said``)
    responses: list[dict[str, Any]] = field(default_factory=list)  # sent to response URLs
    acks: list[dict[str, Any]] = field(default_factory=list)  # Socket Mode acknowledgements
    errors: dict[str, str] = field(default_factory=dict)  # method -> the error it answers
    dropped: set[str] = field(default_factory=set)  # carried out, the connection then cut
    without: dict[str, tuple[str, ...]] = field(default_factory=dict)  # fields left out
    unanswered: set[str] = field(default_factory=set)  # carried out, then no word at all
    ephemerals: list[dict[str, Any]] = field(default_factory=list)  # chat.postEphemeral
    streaming: bool = False  # Slack offers chat streaming (else: unknown_method, as before it)
    expire_streams_after: int | None = None  # appends a stream takes before it expires
    base: str = ""
    _rate_limits: dict[str, list[int]] = field(default_factory=dict)
    _sockets: list[web.WebSocketResponse] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    def response_url(self) -> str:
        return f"{self.base}/respond/{uuid.uuid4().hex}"

    def rate_limit(self, method: str, retry_after_s: int = 1) -> None:
        """Answer the next call of ``method`` with 429 ``ratelimited`` and ``Retry-After``."""
        self._rate_limits.setdefault(method, []).append(retry_after_s)

    def new_ts(self) -> str:
        """The next message ts: every message, the bot's or a person's, is later than the last."""
        return f"{1_700_000_000 + next(self._ts)}.000100"

    def said(self, user: str, channel: str, text: str, thread_ts: str | None = None) -> str:
        """A person's message, as Slack keeps it (``conversations.replies`` serves it); its ts."""
        ts = self.new_ts()
        self.people.append(Message(channel, ts, thread_ts, [text], [time.monotonic()], user))
        return ts

    def calls_of(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """The bot's messages in a thread, in posting order."""
        return [m for m in self.messages if m.channel == channel and m.thread_ts == thread_ts]

    def message(self, ts: str) -> Message:
        return next(message for message in self.messages if message.ts == ts)

    def stop_streams(self, timestamps: list[str]) -> None:
        """What Slack does when someone clicks its stop control: the streams end there."""
        for message in self.messages:
            if message.ts in timestamps:
                message.streaming = False

    def statuses(self) -> list[dict[str, Any]]:
        """Every thread status set (``assistant.threads.setStatus``), in order."""
        return [call.params for call in self.calls_of("assistant.threads.setStatus")]

    async def wait_for(self, predicate: Callable[[], T], timeout_s: float = 30.0) -> T:
        """Wait until ``predicate()`` is truthy (checked after every call the fake receives)."""
        async with self._changed:
            return await asyncio.wait_for(self._changed.wait_for(predicate), timeout_s)

    async def send_envelope(self, envelope: dict[str, Any]) -> None:
        """Push a Socket Mode envelope to the connected bot."""
        await self.wait_for(lambda: self._sockets)
        await self._sockets[-1].send_json(envelope)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/respond/{id}", self._respond)
        app.router.add_get("/socket", self._socket)
        return app

    # --- the Web API ---

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        retry_after = self._rate_limits.get(method)
        if retry_after:
            await self._record(Call(method, params, time.monotonic(), ratelimited=True))
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(retry_after.pop(0))},
            )
        body = self._answer(method, params)
        for field_name in self.without.get(method, ()):  # "ok", yet a field is missing
            body.pop(field_name, None)
        await self._record(Call(method, params, time.monotonic()))
        if method in self.dropped and request.transport is not None:
            request.transport.close()  # the answer is lost on the way
        if method in self.unanswered:  # cancelled when the client gives up and hangs up
            await asyncio.get_running_loop().create_future()
        return web.json_response(body)

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method in self.errors:
            return {"ok": False, "error": self.errors[method]}
        if method.startswith("chat.") and method.endswith("Stream"):
            if not self.streaming:
                return {"ok": False, "error": "unknown_method"}
            return self._stream(method.removeprefix("chat."), params)
        kept = {
            "chat.postMessage": self._post,
            "chat.update": self._update,
            "chat.postEphemeral": self._ephemeral,
            "users.info": self._user,
            "conversations.replies": self._replies,
        }
        if method in kept:
            return kept[method](params)
        match method:
            case "auth.test":
                return {
                    "ok": True,
                    "user_id": BOT_USER_ID,
                    "bot_id": BOT_ID,
                    "team_id": TEAM_ID,
                    "user": "concierge",
                    "url": "https://example.slack.com/",
                }
            case "apps.connections.open":
                return {"ok": True, "url": self.base.replace("http", "ws", 1) + "/socket"}
        return {"ok": True}

    def _ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        self.ephemerals.append(params)
        return {"ok": True, "message_ts": self.new_ts()}

    def _replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread, oldest first: its first message and every reply (one page)."""
        channel, thread_ts = params["channel"], params["ts"]
        found = [
            m
            for m in self.messages + self.people
            if m.channel == channel and thread_ts in (m.ts, m.thread_ts)
        ]
        if not found:
            return {"ok": False, "error": "thread_not_found"}
        return {"ok": True, "messages": [_as_read(m, thread_ts) for m in sorted(found, key=_ts)]}

    def _post(self, params: dict[str, Any]) -> dict[str, Any]:
        ts = self.new_ts()
        channel = params["channel"]
        now = time.monotonic()
        self.messages.append(Message(channel, ts, params.get("thread_ts"), [params["text"]], [now]))
        return {"ok": True, "channel": channel, "ts": ts, "message": {"text": params["text"]}}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        found = [m for m in self.messages if (m.channel, m.ts) == (params["channel"], params["ts"])]
        if not found:
            return {"ok": False, "error": "message_not_found"}
        if found[0].streaming:  # a stream is stopped before its message is rewritten
            return {"ok": False, "error": "cant_update_message"}
        found[0].texts.append(params["text"])
        found[0].updated_at.append(time.monotonic())
        found[0].blocks = _blocks(params.get("blocks"))
        return {"ok": True, "channel": params["channel"], "ts": params["ts"]}

    def _stream(self, step: str, params: dict[str, Any]) -> dict[str, Any]:
        """``startStream`` makes a message; ``appendStream`` adds to its text; ``stopStream``
        adds the rest and its blocks, and closes it."""
        channel, text, now = params["channel"], params.get("markdown_text") or "", time.monotonic()
        if step == "startStream":
            ts = self.new_ts()
            message = Message(channel, ts, params.get("thread_ts"), [text], [now])
            message.streamed, message.streaming = True, True
            message.recipient = (params.get("recipient_user_id"), params.get("recipient_team_id"))
            self.messages.append(message)
            return {"ok": True, "channel": channel, "ts": ts}
        found = [m for m in self.messages if (m.channel, m.ts) == (channel, params["ts"])]
        if not found:
            return {"ok": False, "error": "message_not_found"}
        message = found[0]
        expired = self.expire_streams_after is not None
        if expired and message.appends >= self.expire_streams_after:  # type: ignore[operator]
            message.streaming = False
        if not message.streaming:
            return {"ok": False, "error": "message_not_in_streaming_state"}
        if step == "appendStream":
            message.appends += 1
        else:
            message.streaming = False
            message.blocks = _blocks(params.get("blocks"))
        message.texts.append(message.text + text)
        message.updated_at.append(now)
        return {"ok": True, "channel": channel, "ts": message.ts}

    def _user(self, params: dict[str, Any]) -> dict[str, Any]:
        """What users.info says of a user; the locale only if asked for (as Slack does)."""
        user_id = params.get("user", "")
        user = {"id": user_id, "is_admin": False, "is_owner": False} | self.users.get(user_id, {})
        if str(params.get("include_locale", "")).lower() not in ("1", "true"):
            user.pop("locale", None)
        return {"ok": True, "user": user}

    async def _record(self, call: Call) -> None:
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    # --- response URLs and Socket Mode ---

    async def _respond(self, request: web.Request) -> web.Response:
        async with self._changed:
            self.responses.append(await request.json())
            self._changed.notify_all()
        return web.Response(text="ok")

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_json({"type": "hello", "num_connections": 1})
        async with self._changed:
            self._sockets.append(socket)
            self._changed.notify_all()
        async for frame in socket:
            if frame.type == aiohttp.WSMsgType.TEXT:
                async with self._changed:
                    self.acks.append(json.loads(frame.data))
                    self._changed.notify_all()
        return socket


def _ts(message: Message) -> tuple[int, int]:
    seconds, _, fraction = message.ts.partition(".")
    return int(seconds), int(fraction)


def _blocks(blocks: Any) -> list[dict[str, Any]]:
    """Blocks as sent: a list in JSON, or a JSON string in a form."""
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return list(blocks or [])


def _as_read(message: Message, thread_ts: str) -> dict[str, Any]:
    """A message as ``conversations.replies`` shows it; the bot's carry its bot id."""
    shown = {"type": "message", "user": message.user, "text": message.text, "ts": message.ts}
    shown["thread_ts"] = thread_ts
    return shown | ({"bot_id": BOT_ID} if message.user == BOT_USER_ID else {})


async def _params(request: web.Request) -> dict[str, Any]:
    """Arguments as sent: query string (GET), JSON or form body (POST)."""
    params: dict[str, Any] = dict(request.query)
    if request.method == "POST" and request.can_read_body:
        if request.content_type == "application/json":
            params |= await request.json()
        else:
            params |= dict(await request.post())
    return params


async def start_fake_slack() -> tuple[FakeSlack, TestServer]:
    fake = FakeSlack()
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    fake.base = f"http://127.0.0.1:{server.port}"
    return fake, server
