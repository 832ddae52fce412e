"""The Slack bot as a process: its Bolt app, its startup checks, and how Slack reaches it
(Socket Mode by default, which needs no public URL; HTTP if configured)."""

from __future__ import annotations

import asyncio
import logging

from pydantic import SecretStr
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bots.client import ConciergeClient
from bots.slack.adapter import SlackAdapter
from bots.slack.http import serve_http
from config.settings import ConfigError, Settings
from config.spaces import load_spaces

log = logging.getLogger(__name__)

RATE_LIMIT_RETRIES = 5  # chat.update answered "ratelimited": wait Retry-After, this many times
SLACK_API_URL = "https://slack.com/api/"  # a test's fake Slack replaces it


def build_app(
    settings: Settings, web: AsyncWebClient, *, process_before_response: bool = False
) -> AsyncApp:
    """A Bolt app on ``web`` that waits out rate limits; requests are verified in HTTP mode."""
    if not any(isinstance(h, AsyncRateLimitErrorRetryHandler) for h in web.retry_handlers):
        web.retry_handlers.append(AsyncRateLimitErrorRetryHandler(RATE_LIMIT_RETRIES))
    secret = settings.slack_signing_secret
    return AsyncApp(
        name="concierge",
        client=web,
        signing_secret=secret.get_secret_value() if secret else "",
        process_before_response=process_before_response,
    )


async def run_slack(
    settings: Settings, stop: asyncio.Event, *, web: AsyncWebClient | None = None
) -> None:
    """Run the Slack bot until ``stop`` is set: Socket Mode by default, HTTP if configured.
    A bad spaces file stops it before it reaches Slack (``ConfigError``).

    ``web`` replaces the Web API client (tests in this process use one of their own).
    """
    spaces = load_spaces(settings)
    bot_token = _required(settings.slack_bot_token, "slack_bot_token")
    socket_mode = settings.slack_mode == "socket"
    if socket_mode:
        app_token = _required(settings.slack_app_token, "slack_app_token")
    else:
        signing_secret = _required(settings.slack_signing_secret, "slack_signing_secret")
    web = web or AsyncWebClient(token=bot_token, base_url=SLACK_API_URL)
    await _check_bot_token(web)
    client = ConciergeClient(settings, "slack", spaces=spaces)
    app = build_app(settings, web)
    # Before replies flow: it takes over answers.
    adapter = SlackAdapter(settings, client, app, spaces=spaces)
    async with client:
        try:
            if socket_mode:
                await _serve_socket_mode(app, app_token, stop)
            else:
                host, port = settings.slack_http_host, settings.slack_http_port
                await serve_http(app, signing_secret, host, port, stop)
        finally:
            await adapter.close()


async def _serve_socket_mode(app: AsyncApp, app_token: str, stop: asyncio.Event) -> None:
    """Hold a Socket Mode connection (no public URL needed) until ``stop`` is set."""
    handler = AsyncSocketModeHandler(app, app_token=app_token)
    await handler.connect_async()  # type: ignore[no-untyped-call]  # slack_bolt: unannotated
    log.info("slack: connected in Socket Mode")
    try:
        await stop.wait()
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]  # slack_bolt: unannotated


async def _check_bot_token(web: AsyncWebClient) -> None:
    """Fail at startup, naming the setting, if Slack refuses the bot token."""
    try:
        identity = await web.auth_test()
    except SlackApiError as error:
        reason = error.response.get("error", "refused")
        raise ConfigError(
            f"slack_bot_token (CONCIERGE_SLACK_BOT_TOKEN): Slack says {reason}"
        ) from None
    log.info("slack: signed in as %s in team %s", identity.get("user"), identity.get("team_id"))


def _required(secret: SecretStr | None, field: str) -> str:
    if secret is None or not secret.get_secret_value():
        raise ConfigError(f"{field} (CONCIERGE_{field.upper()}): required for the Slack bot")
    return secret.get_secret_value()
