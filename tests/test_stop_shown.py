"""A stop shows at once (#28 item 3): the edit after the engine's confirmation says "stopped",
takes the Stop button away in the same edit, and is never held by the platform's rate limit.

The end-to-end test runs the real engine, RabbitMQ and discord.py against the fake Discord;
time is held still by holding an edit in flight (as discord.py holds one for Discord's rate
limit), so the order of events is certain without sleeping. The renderer's part is tested on
its own with a recording sink.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import pairwise

import discord
import pytest
from aiohttp import web

from bots.discord import adapter
from bots.renderer import MessageContent, Renderer, Status
from bots.session import SessionRegistry, StopRequested
from broker.protocol import Cancelled, Done, ReplyEvent, Started, TokenEvent
from config.settings import Settings
from tests import discord_fixture as base
from tests.conftest import LONG_QUESTION
from tests.discord_fixture import ASKER, StartBot, StartEngine, answering, split_footer
from tests.fake_discord import FakeDiscord, start
from tests.fake_discord_wire import Handler
from tests.test_renderer import SESSION_ID, RecordingSink, new_session

engine_for = base.engine_for
start_bot = base.start_bot

STOPPED = "🛑 stopped"
# The Discord adapter's pace, read before the tests' settings set it to 0.05 s.
DISCORD_PACE_S = adapter.EDIT_INTERVAL_S


@dataclass
class HeldDiscord(FakeDiscord):
    """The fake Discord, able to hold the edits of one message unanswered until released."""

    held_message: int | None = None
    holding: asyncio.Event = field(default_factory=asyncio.Event)  # an edit is held
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = super().app()
        app.middlewares.append(self._hold)  # inside the recording: ``at`` is the arrival
        return app

    @web.middleware
    async def _hold(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        held = f"/messages/{self.held_message}"
        if request.method == "PATCH" and request.path.endswith(held):
            self.holding.set()
            await self.released.wait()
        return await handler(request)


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    fake = HeldDiscord()
    server = await start(fake)
    monkeypatch.setattr(discord.http.Route, "BASE", fake.base)
    yield fake
    fake.released.set()
    await server.close()


async def test_a_stop_confirmed_before_the_next_edit_shows_stopped_without_its_button_at_once(
    settings: Settings,
    start_bot: StartBot,
    engine_for: StartEngine,
    fake_discord: HeldDiscord,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The 🛑 comes while an edit is in flight; the engine's ``cancelled`` reaches the bot
    before that edit returns. The next edit says "stopped" and has no Stop button: no
    "stopping…" edit, which would take an edit of Discord's 5 per 5 s and hold the end."""
    settings = settings.model_copy(update={"max_tokens": 400, "answer_paragraphs": 0})
    await engine_for(settings)
    discord_ = await start_bot(settings)
    confirmed = _noting_confirmations(discord_.bot.concierge.sessions, monkeypatch)
    question_id = discord_.ask(ASKER, LONG_QUESTION)
    request = await discord_.tap.request_from(ASKER["id"])
    first_id = await discord_.first_reply(question_id)
    await answering(discord_, first_id)

    fake_discord.held_message = first_id
    await asyncio.wait_for(fake_discord.holding.wait(), 30)  # the bot's next edit waits
    reacted_at = time.monotonic()
    discord_.react(ASKER, first_id)
    await asyncio.wait_for(confirmed[request.session_id].wait(), 60)  # the bot has it
    fake_discord.released.set()
    shown = await discord_.finished(first_id)
    end = (await discord_.tap.ending(request.session_id))[-1]

    edits = fake_discord.edits(first_id)
    after_stop = [call for call in edits if call.at > reacted_at]
    assert [split_footer(call.body["content"])[1] for call in after_stop] == [STOPPED]
    assert after_stop[0].body["components"] == []  # the Stop button gone in the same edit
    assert not any("stopping" in call.body["content"] for call in edits)
    assert isinstance(end, Cancelled)
    assert (shown.footer, shown.text) == (STOPPED, end.text)


def _noting_confirmations(
    registry: SessionRegistry, monkeypatch: pytest.MonkeyPatch
) -> dict[str, asyncio.Event]:
    """An event per session, set once the bot's client has handed on its ``cancelled``."""
    confirmed = _Confirmations()
    deliver = registry.deliver

    def noting(event: ReplyEvent) -> bool:
        delivered = deliver(event)
        if isinstance(event, Cancelled):
            confirmed[event.session_id].set()
        return delivered

    monkeypatch.setattr(registry, "deliver", noting)
    return confirmed


class _Confirmations(dict[str, asyncio.Event]):
    """By session id; one that has not come yet is an event not set yet."""

    def __missing__(self, session_id: str) -> asyncio.Event:
        self[session_id] = asyncio.Event()
        return self[session_id]


# --- the renderer on its own ------------------------------------------------------------------


class HeldSink(RecordingSink):
    """A sink whose ``held``-th edit waits until released, as a platform's rate limit holds
    one; it notes every edit's footer."""

    def __init__(self, held: int) -> None:
        super().__init__()
        self.footers: list[str] = []
        self.held = held
        self.holding, self.released = asyncio.Event(), asyncio.Event()

    async def edit(self, handle: int, content: MessageContent) -> None:
        self.footers.append(content.footer)
        if len(self.footers) == self.held:
            self.holding.set()
            await self.released.wait()
        await super().edit(handle, content)


async def test_a_stop_confirmed_while_an_edit_is_held_ends_in_one_edit_saying_stopped() -> None:
    """On every platform: a stop and its confirmation that come while an edit is in flight
    make one more edit, "stopped", not "stopping…" then "stopped"."""
    sink, session = HeldSink(held=1), new_session()  # the first edit: "started" and a token
    renderer = Renderer(sink, max_chars=100, edit_interval_s=0)  # every event shown at once
    session.items.put_nowait(Started(session_id=SESSION_ID, seq=0, waited_s=0))
    session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=1, text="Once upon"))
    following = asyncio.create_task(renderer.run(session))
    await asyncio.wait_for(sink.holding.wait(), 10)  # the edit showing "Once upon"
    session.items.put_nowait(StopRequested("u"))
    session.items.put_nowait(Cancelled(session_id=SESSION_ID, seq=2, text="Once upon", tokens=1))
    sink.released.set()

    assert await following is Status.STOPPED
    assert sink.footers[sink.held :] == [STOPPED]
    assert sink.text() == "Once upon"


async def test_tokens_that_came_while_an_edit_was_held_do_not_delay_the_stop_it_confirms() -> None:
    """Seen in a CI run: tokens arrived behind the held edit, then the stop and its
    confirmation; the slot was due when the edit returned, and the first token alone made an
    "answering…" edit before the stop was read. All that has arrived is read first."""
    sink, session = HeldSink(held=1), new_session()
    renderer = Renderer(sink, max_chars=100, edit_interval_s=0)
    session.items.put_nowait(Started(session_id=SESSION_ID, seq=0, waited_s=0))
    session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=1, text="Once"))
    following = asyncio.create_task(renderer.run(session))
    await asyncio.wait_for(sink.holding.wait(), 10)
    session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=2, text=" upon"))
    session.items.put_nowait(StopRequested("u"))
    session.items.put_nowait(Cancelled(session_id=SESSION_ID, seq=3, text="Once upon", tokens=2))
    sink.released.set()

    assert await following is Status.STOPPED
    assert sink.footers[sink.held :] == [STOPPED]


async def test_at_discords_pace_streaming_leaves_one_edit_of_its_window_for_the_end() -> None:
    """Discord allows 5 edits per 5 s in a channel, and discord.py holds an edit that takes the
    last one until the window ends. Streaming at the adapter's pace never takes all 5, so
    the edit that ends an answer always finds one (scaled down: 5 s becomes 0.5 s)."""
    scale = 0.1
    window_s = adapter.DISCORD_EDIT_WINDOW_S * scale
    sink, session = RecordingSink(), new_session()
    renderer = Renderer(sink, max_chars=100_000, edit_interval_s=DISCORD_PACE_S * scale)
    session.items.put_nowait(Started(session_id=SESSION_ID, seq=0, waited_s=0))

    async def produce() -> None:  # a token every tenth of the pace: an edit at every slot
        for seq in range(1, 120):
            session.items.put_nowait(TokenEvent(session_id=SESSION_ID, seq=seq, text="word "))
            await asyncio.sleep(DISCORD_PACE_S * scale / 10)
        text = "word " * 119
        done = Done(
            session_id=SESSION_ID,
            seq=120,
            text=text,
            tokens=119,
            ttft_s=0,
            tokens_per_s=10,
            elapsed_s=1,
        )
        session.items.put_nowait(done)

    producing = asyncio.create_task(produce())
    assert await renderer.run(session) is Status.DONE
    await producing

    edits = [at for kind, at in sink.calls if kind == "edit"]
    streaming = edits[:-1]
    in_window = [sum(1 for at in streaming if end - window_s < at <= end) for end in streaming]
    assert len(streaming) > adapter.DISCORD_EDITS_PER_WINDOW  # it streamed over several windows
    assert max(in_window) <= adapter.DISCORD_EDITS_PER_WINDOW - 1
    assert all(later > earlier for earlier, later in pairwise(edits))
