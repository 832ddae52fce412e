"""HTTP mode: Slack's Events API and slash commands on one aiohttp endpoint.

Anyone who can reach the port can send anything, so the order is fixed: the body is capped
(``MAX_BODY_BYTES``, aiohttp answers 413 past it), the signature is checked on the raw bytes
(401 if it is missing or wrong, whatever the body), and only then is the body parsed (400 if
it is not what Slack sends). No body is ever logged, and no bad request logs a traceback.

One more fix on Bolt's parsing: Bolt 1.30 takes any form body containing the word "payload"
for an interactive payload, finds none, and sees an empty request; an ``/ask what is a
payload?`` would go unanswered (404 after 3 s). The body is re-read as the form it is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from urllib.parse import parse_qsl

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

from config.errors import ConciergeError

EVENTS_PATH = "/slack/events"
# Slack's own requests are small: the longest message it allows (40,000 characters), repeated
# in its rich-text blocks, is under 250 KB of JSON even in 3-byte UTF-8.
MAX_BODY_BYTES = 512 * 1024
REFUSALS_LOG_EVERY_S = 60.0  # refused requests are counted, and logged at most this often

log = logging.getLogger(__name__)


class MalformedRequest(ConciergeError, ValueError):
    """A signed body that is not what Slack sends (not UTF-8, JSON that is not an object...):
    answered with HTTP 400, never shown to a person."""


def bolt_request(raw_body: bytes, query: str, headers: Mapping[str, str]) -> AsyncBoltRequest:
    """Bolt's request for a verified delivery; raises ``MalformedRequest``."""
    try:
        text = raw_body.decode()
        _check_shape(text, headers.get("Content-Type", ""))
        request = AsyncBoltRequest(body=text, query=query, headers=dict(headers))
    except (ValueError, TypeError, AttributeError, KeyError) as error:  # Bolt reads it blindly
        raise MalformedRequest(type(error).__name__) from None
    if request.body == {} and text and not text.lstrip().startswith("{"):
        form = dict(parse_qsl(text, keep_blank_values=True))
        if "payload" not in form:
            request.body = form
            request.context = build_async_context(AsyncBoltContext(), form)
    return request


def _check_shape(text: str, content_type: str) -> None:
    """JSON (or a form's ``payload``) must be an object: Bolt assumes it and fails otherwise."""
    if content_type.startswith("application/json") or text.lstrip().startswith(("{", "[")):
        document = json.loads(text)
    else:
        document = dict(parse_qsl(text, keep_blank_values=True))
        if "payload" in document:
            document = json.loads(document["payload"])
    if not isinstance(document, dict):
        raise MalformedRequest("not an object")


class Refusals:
    """Counts requests refused as unsigned; logs them (never their bodies) at most once per
    ``REFUSALS_LOG_EVERY_S``, so whoever can reach the port cannot fill the log."""

    def __init__(self) -> None:
        self.count = 0
        self._logged_at = float("-inf")

    def note(self, peer: str | None) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self._logged_at >= REFUSALS_LOG_EVERY_S:
            self._logged_at = now
            log.warning(
                "slack: refused a request without a valid signature from %s (%d so far); "
                "if Slack's own are refused, check CONCIERGE_SLACK_SIGNING_SECRET",
                peer,
                self.count,
            )


def events_web_app(app: AsyncApp, signing_secret: str, path: str = EVENTS_PATH) -> web.Application:
    """An aiohttp application that verifies every POST on ``path`` and hands it to ``app``."""
    verifier = SignatureVerifier(signing_secret)
    refusals = Refusals()

    async def handle(request: web.Request) -> web.Response:
        raw_body = await request.read()  # at most MAX_BODY_BYTES
        if not _signed(verifier, raw_body, request.headers):
            refusals.note(request.remote)
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            bolt = bolt_request(raw_body, request.query_string, request.headers)
        except MalformedRequest as error:
            log.info("slack: refused a signed but malformed request (%s)", error)
            return web.json_response({"error": "malformed request"}, status=400)
        return await to_aiohttp_response(await app.async_dispatch(bolt))

    web_app = web.Application(client_max_size=MAX_BODY_BYTES)
    web_app.router.add_post(path, handle)
    return web_app


def _signed(verifier: SignatureVerifier, raw_body: bytes, headers: Mapping[str, str]) -> bool:
    """Slack's signature over the raw body (and a timestamp within 5 minutes)."""
    try:
        return verifier.is_valid(
            raw_body,
            headers.get("X-Slack-Request-Timestamp"),
            headers.get("X-Slack-Signature"),
        )
    except ValueError:  # a timestamp that is no number, or a body that is not UTF-8: not Slack
        return False


async def serve_http(
    app: AsyncApp, signing_secret: str, host: str, port: int, stop: asyncio.Event
) -> None:
    """Listen on ``host``:``port`` until ``stop`` is set."""
    runner = web.AppRunner(events_web_app(app, signing_secret))
    await runner.setup()
    try:
        await web.TCPSite(runner, host=host, port=port).start()
        log.info("slack: listening for events on %s:%d at %s", host, port, EVENTS_PATH)
        await stop.wait()
    finally:
        await runner.cleanup()
