"""``concierge web``: the console's HTTP side. GET serves the page and the live state (SSE);
POST runs an action, after the guard (``actions.Guard``)."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from bots.client import ConciergeClient
from broker.amqp import Broker
from cli.console.actions import Actions, Guard, refuse
from cli.console.demo import BackendFactory, Demo, DemoConfig, load_backend
from cli.console.hub import Hub
from cli.console.observer import Observer
from cli.console.results import cancel_results
from cli.console.state import ConsoleState
from cli.console.watch import EngineWatch
from config.settings import ConfigError, Settings
from config.spaces import DEFAULT_SPACE

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
DEFAULT_PORT = 8780  # ``concierge web`` without CONCIERGE_WEB_PORT
MAX_BODY_BYTES = 4096
CLOSE_TIMEOUT_S = 5.0
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def check_bind(settings: Settings) -> None:
    """Refuse to listen beyond this machine without a token (``ConfigError``: exit 78)."""
    if not is_loopback(settings.web_host) and settings.web_token is None:
        raise ConfigError(
            f"web_host (CONCIERGE_WEB_HOST) is {settings.web_host}: a console reachable from "
            "other machines needs CONCIERGE_WEB_TOKEN (or keep CONCIERGE_WEB_HOST=127.0.0.1)"
        )


class Console:
    """The observer, the engine watch, the demo and the HTTP server of one console."""

    def __init__(
        self,
        settings: Settings,
        *,
        port: int | None = None,
        demo: DemoConfig | None = None,
        backend_factory: BackendFactory = load_backend,
        cancel_results_path: Path | None = None,
    ) -> None:
        check_bind(settings)
        self.settings = settings
        self.port = DEFAULT_PORT if port is None else port
        self.state = ConsoleState()
        self.hub = Hub(self.render)
        self.guard = Guard(settings.web_token, view_needs_token=not is_loopback(settings.web_host))
        self.demo = Demo(settings, demo or DemoConfig(), self.hub.changed, backend_factory)
        self.cancel_results_path = cancel_results_path
        # one-off: a bot_name of the user's would be taken by its own bot
        self.client = ConciergeClient(settings.model_copy(update={"bot_name": ""}), "web")
        self.actions = Actions(self.client)
        self.broker = Broker(settings)
        self.watch = EngineWatch(settings, self.broker, self.state, self.hub.changed)
        self.observer = Observer(self.broker, self.state, self.hub.changed, self.watch.poke)
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """Where a browser on this machine opens it."""
        host = self.settings.web_host
        host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        return f"http://[{host}]:{self.port}/" if ":" in host else f"http://{host}:{self.port}/"

    async def start(self) -> Console:
        try:
            await self._serve()  # first: a port in use stops it before anything else starts
            await self.broker.connect()
            await self.client.start()
            await self.observer.start()
            await self.watch.once()  # the first counts: what was queued before the console
            self._tasks = [
                asyncio.create_task(self.hub.run()),
                asyncio.create_task(self.watch.run()),
            ]
        except BaseException:
            await asyncio.shield(self.close())
            raise
        return self

    async def _serve(self) -> None:
        app = web.Application(
            client_max_size=MAX_BODY_BYTES, middlewares=[self._check_host, _headers]
        )
        app.router.add_get("/", self._index)
        app.router.add_get("/api/events", self._events)
        app.router.add_get("/api/bench/cancel", self._bench)
        app.router.add_post("/api/stop", self._stop)
        app.router.add_post("/api/rescrape", self._rescrape)
        app.router.add_post("/api/demo/{pane}/ask", self._demo_ask)
        app.router.add_post("/api/demo/{pane}/cancel", self._demo_cancel)
        app.router.add_static("/static/", STATIC)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.settings.web_host, self.port)
        try:
            await site.start()
        except OSError as error:
            raise _port_error(self.settings.web_host, self.port, error) from None
        self.port = self._runner.addresses[0][1]  # the real one when 0 was asked

    async def close(self) -> None:
        self.hub.close()  # ends every event stream, so the server stops at once
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for task in self._tasks:
            task.cancel()
        if self._tasks:  # bounded: a task that swallowed its cancellation must not hang this
            await asyncio.wait(self._tasks, timeout=CLOSE_TIMEOUT_S)
        await self.watch.close()
        await self.actions.close()
        await self.demo.close()
        await self.observer.close()
        await self.client.close()
        await self.broker.close()

    async def __aenter__(self) -> Console:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def render(self) -> dict[str, Any]:
        now = time.time()
        return {
            "now": now,
            "prefix": self.settings.prefix,
            "queue": self.state.snapshot(now),
            "engine": self.state.health,
            "kb": self.state.kb,
            "kb_spaces": self.state.kb_spaces,  # None without spaces (docs/spaces.md)
            "demo": self.demo.snapshot(),
            "actions_enabled": self.guard.actions_enabled,
        }

    # --- handlers ------------------------------------------------------------------------

    @web.middleware
    async def _check_host(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.guard.check_host(request)
        response: web.StreamResponse = await handler(request)
        return response

    async def _index(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        self.guard.check_view(request)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        subscriber = self.hub.subscribe()
        try:
            async for document in subscriber.documents():
                await response.write(f"event: state\ndata: {document}\n\n".encode())
        except ConnectionResetError:
            pass  # the page went away
        finally:
            self.hub.unsubscribe(subscriber)
        return response

    async def _bench(self, request: web.Request) -> web.Response:
        self.guard.check_view(request)
        data = await asyncio.to_thread(
            cancel_results, self.cancel_results_path, settings=self.settings
        )
        return web.json_response(data)

    async def _stop(self, request: web.Request) -> web.Response:
        self.guard.check_action(request)
        body = await _json(request)
        return web.json_response(await self.actions.stop(str(body.get("session_id", ""))))

    async def _rescrape(self, request: web.Request) -> web.Response:
        self.guard.check_action(request)
        space = (await _json(request)).get("space", DEFAULT_SPACE)
        if space not in self.watch.spaces.names:
            known = ", ".join(self.watch.spaces.names)
            raise refuse(400, f"no space {space!r}: the spaces are {known}")
        return web.json_response(await self.actions.rescrape(space))

    async def _demo_ask(self, request: web.Request) -> web.Response:
        self.guard.check_action(request)
        body = await _json(request)
        depth = body.get("depth", 0)
        if not isinstance(depth, int):
            raise refuse(400, "depth must be a whole number")
        return web.json_response(await self.demo.pane(request.match_info["pane"]).ask(depth))

    async def _demo_cancel(self, request: web.Request) -> web.Response:
        self.guard.check_action(request)
        return web.json_response(await self.demo.pane(request.match_info["pane"]).cancel())


@web.middleware
async def _headers(request: web.Request, handler: Any) -> web.StreamResponse:
    response: web.StreamResponse = await handler(request)
    if not response.prepared:  # an event stream sent its headers already
        response.headers.update(SECURITY_HEADERS)
    return response


async def _json(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json() if request.can_read_body else {}
    except (ValueError, json.JSONDecodeError):
        raise refuse(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise refuse(400, "the body is not a JSON object")
    return body


def _port_error(host: str, port: int, error: OSError) -> ConfigError:
    where = f"cannot serve the web console on {host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return ConfigError(f"{where}: the port is in use; set CONCIERGE_WEB_PORT to a free one")
    return ConfigError(
        f"{where} ({error.strerror or type(error).__name__}); check CONCIERGE_WEB_HOST and "
        "CONCIERGE_WEB_PORT"
    )


async def web_command(
    settings: Settings,
    stop: asyncio.Event,
    *,
    cancel_results_path: Path | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> int:
    """Serve the console until ``stop`` is set (``concierge web``, which ``concierge up`` runs
    as its child when ``CONCIERGE_WEB_PORT`` is set; ``on_ready`` gets the URL once it serves).
    Raises ``ConfigError`` (exit 78) for a bind it refuses."""
    async with Console(
        settings, port=settings.web_port, cancel_results_path=cancel_results_path
    ) as console:
        log.info("web console: open %s", console.url)
        if on_ready is not None:
            on_ready(console.url)
        await stop.wait()
    return 0
