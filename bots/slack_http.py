"""HTTP mode: Slack's Events API and slash commands on one aiohttp endpoint, verified by Bolt.

The handler is Bolt's aiohttp adapter plus one fix. Bolt 1.30 takes any form body containing
the word "payload" for an interactive payload, finds none, and sees an empty request: an
``/ask what is a payload?`` would go unanswered (404 after 3 s). The body is re-read as the form
it is; the signature is still checked by Bolt against the raw body.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from urllib.parse import parse_qsl

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest

EVENTS_PATH = "/slack/events"

log = logging.getLogger(__name__)


def bolt_request(raw_body: str, query: str, headers: Mapping[str, str]) -> AsyncBoltRequest:
    """Bolt's request for an HTTP delivery, with a form body read as a form."""
    request = AsyncBoltRequest(body=raw_body, query=query, headers=dict(headers))
    if request.body == {} and raw_body and not raw_body.lstrip().startswith("{"):
        form = dict(parse_qsl(raw_body, keep_blank_values=True))
        if "payload" not in form:
            request.body = form
            request.context = build_async_context(AsyncBoltContext(), form)
    return request


def events_web_app(app: AsyncApp, path: str = EVENTS_PATH) -> web.Application:
    """An aiohttp application that hands every POST on ``path`` to ``app``."""

    async def handle(request: web.Request) -> web.Response:
        raw_body = await request.text()
        response = await app.async_dispatch(
            bolt_request(raw_body, request.query_string, request.headers)
        )
        return await to_aiohttp_response(response)

    web_app = web.Application()
    web_app.router.add_post(path, handle)
    return web_app


async def serve_http(app: AsyncApp, port: int, stop: asyncio.Event) -> None:
    """Listen on ``port`` (all interfaces) until ``stop`` is set."""
    runner = web.AppRunner(events_web_app(app))
    await runner.setup()
    try:
        await web.TCPSite(runner, port=port).start()
        log.info("slack: listening for events on port %d at %s", port, EVENTS_PATH)
        await stop.wait()
    finally:
        await runner.cleanup()
