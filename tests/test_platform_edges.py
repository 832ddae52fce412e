"""The platforms' edges, driven from outside as Slack and Discord drive the bots (issue 19).

Slack: what anyone who can reach the HTTP port may send (unsigned, oversized, malformed), a
channel the bot cannot post in, the bot's own :octagonal_sign:, and who asked an ``/ask``.
Discord: ``/rescrape`` registered without clobbering other commands, and only on change.
Slack's side is ``tests/fake_slack.py`` (signed deliveries through the bot's real aiohttp
listener and Bolt), Discord's is ``tests/fake_discord.py``; the broker and model are real.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import discord
import pytest
import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from bots.renderer import MessageContent
from bots.slack.app import run_slack
from bots.slack.format import (
    HEADING_CHARS,
    STOP_REACTION,
    asked_line,
    cannot_post_text,
)
from bots.slack.http import EVENTS_PATH, MAX_BODY_BYTES
from bots.slack.sink import SlackMessage
from broker.amqp import Broker
from config.settings import Settings
from tests import slack_fixture
from tests.conftest import RunningEngine
from tests.fake_discord import FakeDiscord, start
from tests.fake_discord_wire import APP_ID
from tests.fake_slack import FakeSlack, Message
from tests.fake_slack_delivery import SlackDelivery
from tests.slack_fixture import ASKER, CHANNEL, SIGNING_SECRET, mention, slack_bot
from tests.test_secrets import log_output

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake = slack_fixture.settings, slack_fixture.fake

DONE_MARK = "✅"


async def post_raw(url: str, body: bytes, headers: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as r:
        return r.status


class Heard(logging.Handler):
    """Sets ``event`` when a line containing ``text`` is logged: for what only the log says."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.event = text, asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


def signed(body: bytes, secret: str = SIGNING_SECRET, at: float | None = None) -> dict[str, str]:
    """Slack's headers for ``body`` as bytes (``signature_headers`` signs text)."""
    timestamp = str(int(time.time() if at is None else at))
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


# --- Slack over HTTP: signature first, bodies capped, never logged ------------------------------

JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
MARKER = "zz-body-marker-zz"


async def test_what_anyone_can_send_is_refused_before_it_is_read_and_never_logged(
    settings: Settings, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> None:
    not_json = f"not json {{ {MARKER}".encode()
    broken = f'{{"type": "event_callback", "x": "{MARKER}"'.encode()
    big = (f"token=x&text={MARKER}" + "a" * (400 * 1024)).encode()
    too_big = b"x" * (MAX_BODY_BYTES + 1)
    cases = [  # (body, headers, status)
        (not_json, FORM, 401),  # unsigned
        (broken, JSON | signed(broken, secret="not-the-secret"), 401),
        (not_json, FORM | signed(not_json, at=time.time() - 600), 401),  # stale
        (broken, JSON | signed(broken) | {"X-Slack-Request-Timestamp": "soon"}, 401),
        (b"\xff\xfe" + MARKER.encode(), FORM | signed(b"\xff\xfe" + MARKER.encode()), 401),
        (big, FORM, 401),  # under the cap, unsigned: not logged either
        (too_big, FORM | signed(too_big), 413),  # past the cap: not even read
        (broken, JSON | signed(broken), 400),  # signed, but not JSON
        (b"[1, 2]", JSON | signed(b"[1, 2]"), 400),  # JSON, but not an object
        (b"payload=%7Bnot-json", FORM | signed(b"payload=%7Bnot-json"), 400),
        (b'{"team": 5, "type": "x"}', JSON | signed(b'{"team": 5, "type": "x"}'), 400),
    ]
    with log_output("DEBUG", "DEBUG") as output:
        async with slack_bot(settings, client, fake) as bot:
            statuses = [await post_raw(bot.slack.url, body, h) for body, h, _ in cases]
            still_answers = await bot.slack.event(mention("", "100.1"))  # a bare mention: help
    log = output.getvalue()

    assert statuses == [status for _, _, status in cases]
    assert still_answers == 200 and fake.calls_of("chat.postMessage")  # the help text
    assert MARKER not in log and "Traceback" not in log
    assert max(len(line) for line in log.splitlines()) < 1000
    assert log.count("refused a request without a valid signature") == 1  # at most once a minute
    assert "Invalid request signature detected" not in log  # Bolt's own, body and all
    assert await broker.request_queue_depth() == 0


async def test_run_slack_in_http_mode_listens_on_the_configured_host_and_port(
    settings: Settings, broker: Broker, fake: FakeSlack
) -> None:
    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = settings.model_copy(
        update={"slack_mode": "http", "slack_http_host": "127.0.0.1", "slack_http_port": port}
    )
    stop = asyncio.Event()
    web = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    heard = Heard(f"listening for events on 127.0.0.1:{port}")
    logging.getLogger("bots.slack.http").addHandler(heard)
    with log_output("INFO"):
        running = asyncio.create_task(run_slack(http, stop, web=web))
        slack = SlackDelivery(f"http://127.0.0.1:{port}{EVENTS_PATH}", SIGNING_SECRET, fake)
        try:
            await asyncio.wait_for(heard.event.wait(), 30)
            body = b'{"type": "url_verification", "challenge": "c1"}'
            refused = await post_raw(slack.url, body, JSON)
            status, answer = await slack.post(body.decode(), "application/json")
        finally:
            logging.getLogger("bots.slack.http").removeHandler(heard)
            await slack.close()
            stop.set()
            await asyncio.wait_for(running, 30)

    assert (refused, status, json.loads(answer)) == (401, 200, {"challenge": "c1"})
    assert Settings.model_fields["slack_http_host"].default == "127.0.0.1"  # unless told


# --- Slack: a channel the bot cannot post in --------------------------------------------------


@pytest.mark.parametrize("error", ["not_in_channel", "is_archived"])
async def test_ask_where_the_bot_cannot_post_sends_nothing_and_tells_the_asker_alone(
    settings: Settings, client: ConciergeClient, broker: Broker, fake: FakeSlack, error: str
) -> None:
    fake.errors["chat.postMessage"] = error
    async with slack_bot(settings, client, fake) as bot:
        status, body = await bot.slack.command("/ask", "Hours?", user_id=ASKER, channel_id=CHANNEL)
        await fake.wait_for(lambda: fake.responses)
    # Left: every answer it started has ended, so nothing more can come.

    assert (status, body) == (200, "")
    assert [(r["response_type"], r["text"]) for r in fake.responses] == [
        ("ephemeral", cannot_post_text(error))
    ]
    assert len(fake.calls_of("chat.postMessage")) == 1  # tried once, not retried
    assert await broker.request_queue_depth() == 0  # no question sent to the engine
    if error == "not_in_channel":
        invite_me = cannot_post_text(error)
        assert "/invite" in invite_me and "chat:write.public" in invite_me


async def test_a_mention_whose_answer_cannot_be_posted_sends_no_request(
    settings: Settings, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> None:
    fake.errors["chat.postMessage"] = "restricted_action"
    async with slack_bot(settings, client, fake) as bot:
        assert await bot.slack.event(mention("Hours?", "200.1")) == 200
        await fake.wait_for(lambda: fake.calls_of("chat.postMessage"))

    assert len(fake.calls_of("chat.postMessage")) == 1
    assert await broker.request_queue_depth() == 0


# --- Slack: the stop button and who asked -----------------------------------------------------


def in_channel(fake: FakeSlack) -> list[Message]:
    """The bot's messages in the channel itself (not in a thread)."""
    return [m for m in fake.messages if m.channel == CHANNEL and m.thread_ts is None]


async def test_the_bot_adds_its_stop_reaction_to_its_answer_and_takes_it_back_at_the_end(
    settings: Settings, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    async with slack_bot(settings, client, fake) as bot:
        await bot.slack.event(mention("Say hello.", "300.1"))
        await fake.wait_for(lambda: fake.calls_of("reactions.remove"), 60)

    answer = fake.thread(CHANNEL, "300.1")[0]
    assert answer.text.endswith(DONE_MARK + " done")
    where = {"channel": CHANNEL, "timestamp": answer.ts, "name": STOP_REACTION}
    added, removed = fake.calls_of("reactions.add"), fake.calls_of("reactions.remove")
    assert [call.params for call in added] == [where] == [call.params for call in removed]
    updates = fake.calls_of("chat.update")
    assert updates and added[0].at <= updates[0].at and removed[0].at >= updates[-1].at


async def test_a_stop_reaction_slack_never_confirms_taking_back_costs_one_log_line(
    settings: Settings, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    fake.dropped = {"reactions.remove"}  # carried out, the connection cut before the answer
    heard = Heard("no answer about the stop button")
    logging.getLogger("bots.slack.sink").addHandler(heard)
    try:
        with log_output("INFO") as output:
            async with slack_bot(settings, client, fake) as bot:
                await bot.slack.event(mention("Say hello.", "310.1"))
                await asyncio.wait_for(heard.event.wait(), 60)
    finally:
        logging.getLogger("bots.slack.sink").removeHandler(heard)
    log = output.getvalue()

    answer = fake.thread(CHANNEL, "310.1")[0]
    assert answer.text.endswith(DONE_MARK + " done")
    assert fake.calls_of("reactions.remove")
    assert log.count("no answer about the stop button") == 1
    assert "Traceback" not in log and "an answer failed" not in log
    assert re.search(r"session \w+: done", log)  # the answer's end was carried through


async def test_an_ask_answer_opens_with_who_asked_what_and_pings_no_one(
    settings: Settings, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    fake.users[ASKER] = {"profile": {"display_name": "Jo <Doe> & *co*", "real_name": "Jo"}}
    async with slack_bot(settings, client, fake, max_chars=30) as bot:
        await bot.slack.command("/ask", "Say hello.", user_id=ASKER, channel_id=CHANNEL)
        await fake.wait_for(lambda: fake.calls_of("reactions.remove"), 60)

    first = in_channel(fake)[0]
    continuations = fake.thread(CHANNEL, first.ts)
    heading = "*Jo &lt;Doe&gt; &amp; co* asked: Say hello.\n"
    assert continuations, "the answer should go on in the thread"
    assert all(text.startswith(heading) for text in first.texts)  # placeholder, edits, end
    assert not any(message.text.startswith("*Jo") for message in continuations)
    assert all("<@" not in text for message in [first, *continuations] for text in message.texts)


async def test_an_ask_answer_taken_over_after_a_restart_keeps_its_heading(
    settings: Settings, client: ConciergeClient, fake: FakeSlack
) -> None:
    """The heading rides in the request's context, which the next process reads back."""
    heading = asked_line("Jo", "Say hello.")
    context = {"channel": CHANNEL, "thread": "", "question": "", "heading": heading}
    async with slack_bot(settings, client, fake) as bot:
        posted = [await bot.adapter.web.chat_postMessage(channel=CHANNEL, text="…") for _ in "12"]
        resumed = bot.adapter.answers.resume(context | {"message": posted[0]["ts"]})
        assert resumed is not None
        stage, first = resumed
        await stage.edit(first, MessageContent("Hello!", "✅ done"))
        await stage.edit(SlackMessage(CHANNEL, posted[1]["ts"], first.ts), MessageContent("…"))

    first_edit, continuation_edit = (call.params["text"] for call in fake.calls_of("chat.update"))
    assert first_edit == f"{heading}\nHello!\n\n✅ done"
    assert continuation_edit == "…"


def test_the_asked_line_is_short_escaped_and_never_cut_inside_an_entity() -> None:
    line = asked_line("A <b>", "x" * 171 + " & more " * 40)

    assert len(line) <= HEADING_CHARS and line.endswith("…")
    assert line.startswith("*A &lt;b&gt;* asked: xxx")
    assert "&…" not in line and "&am…" not in line and "&amp" in line
    assert asked_line("", "why?") == "*Someone* asked: why?"


# --- Discord: /rescrape registered beside other commands, only when it changed -------------------


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord()
    server = await start(fake)
    monkeypatch.setattr(discord.http.Route, "BASE", fake.base)
    yield fake
    await server.close()


async def log_in_and_out(settings: Settings) -> None:
    bot = ConciergeBot(settings, ConciergeClient(settings, "discord"), guild_ready_timeout=0.05)
    await bot.login("fake-token")  # runs setup_hook, which registers the commands
    await bot.close()


async def test_rescrape_is_registered_beside_other_commands_and_only_when_changed(
    settings: Settings, fake_discord: FakeDiscord
) -> None:
    other = {"id": "1", "name": "poll", "type": 1, "description": "another tool's command"}
    stale = {"id": "2", "name": "rescrape", "type": 1, "description": "old", "dm_permission": True}
    fake_discord.commands = [other, stale]
    commands_path = f"/applications/{APP_ID}/commands"

    await log_in_and_out(settings)
    registered = [c for c in fake_discord.calls if c.path == commands_path]
    await log_in_and_out(settings)  # nothing changed since
    again = [c for c in fake_discord.calls if c.path == commands_path][len(registered) :]

    assert [call.method for call in registered] == ["GET", "POST"]  # never PUT (deletes others)
    assert [call.method for call in again] == ["GET"]
    rescrape = next(c for c in fake_discord.commands if c["name"] == "rescrape")
    assert other in fake_discord.commands
    assert rescrape["default_member_permissions"] == str(1 << 5)  # Manage Server
    assert rescrape["contexts"] == [0]  # in servers only, not in DMs


# --- the README's Slack manifest --------------------------------------------------------------


def test_the_readme_slack_manifest_parses_and_grants_what_the_bot_calls() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = re.search(r"\n( *)```yaml\n(.*?)\n\1```", readme, re.DOTALL)
    assert block is not None
    indent = len(block[1])
    manifest = yaml.safe_load("\n".join(line[indent:] for line in block[2].splitlines()))

    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "chat:write", "commands", "reactions:read"} <= scopes
    assert {"reactions:write", "users:read", "chat:write.public"} <= scopes  # stop, names, /ask
    assert {"channels:history", "groups:history", "im:history", "mpim:history"} <= scopes
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "app_mention",
        "reaction_added",
        "agent_session_stopped",  # Slack's own stop button
    }
    assert manifest["settings"]["interactivity"]["is_enabled"] is True  # the feedback buttons
    assert manifest["features"]["agent_view"]["agent_description"]  # agent sessions: the button
    commands = {command["command"] for command in manifest["features"]["slash_commands"]}
    assert commands == {"/ask", "/rescrape"}
