"""Follow-up questions: the conversation a question continues reaches the engine as its history.

The neutral builder (``bots/history.py``) is tested as a pure piece; the platforms through the
real discord.py and slack-bolt code against the local fakes (tests/fake_discord.py,
tests/fake_slack.py), with a tap on the real broker that sees each request as it was sent.
Chains that happened "before" are laid into the fake, as Discord or Slack would keep them; the
rest is asked and answered by the real engine.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import discord
import pytest
from pydantic import SecretStr
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from bots.discord.history import split_status as discord_split_status
from bots.history import (
    CUT_OFF_MARK,
    STOPPED_MARK,
    TRUNCATED_MARK,
    Conversation,
    Said,
    last_turns,
    within_body,
)
from bots.renderer import MessageContent, Renderer, Status, footer_for, history_notice, status_of
from bots.session import Session
from bots.slack.adapter import SlackAdapter
from bots.slack.app import build_app
from bots.slack.format import asked_line, message_text, slack_text
from bots.slack.history import Me, plain
from bots.slack.history import split_status as slack_split_status
from bots.terminal.answer import Outcome
from bots.terminal.chat import Turns
from broker.amqp import Broker
from broker.history_window import history_block
from broker.protocol import (
    MAX_BODY_BYTES,
    MAX_HISTORY_TURN_CHARS,
    MAX_HISTORY_TURNS,
    Done,
    HistoryTurn,
    Request,
    Started,
    encode,
    make_request,
)
from config.settings import Settings
from tests.conftest import LONG_QUESTION, start_engine
from tests.fake_discord import (
    BOT_ID,
    BOT_USER,
    FakeDiscord,
    guild_payload,
    message_payload,
    reaction_payload,
    ready_payload,
    start,
    thread_payload,
    user_payload,
)
from tests.fake_slack import API_APP_ID, BOT_USER_ID, TEAM_ID, FakeSlack, Message, start_fake_slack
from tests.fake_slack import BOT_ID as SLACK_BOT_ID
from tests.helpers import WireTap

SOURCES = "\n\nSources:\n- Ferries <https://ex.com/ferry>\n- Fares <https://ex.com/fares>"


def user(text: str, who: str = "U1", name: str = "Ann") -> Said:
    return Said(text, who, name)


def bot(text: str, footer: str = "✅ done") -> Said:
    return Said(text, by_bot=True, footer=footer)


def turns(*pairs: tuple[str, str]) -> tuple[HistoryTurn, ...]:
    return tuple(HistoryTurn(role=role, text=text) for role, text in pairs)  # type: ignore[arg-type]


def read(newest_first: Sequence[Said], *, asker: str = "U1", max_turns: int = 12) -> Any:
    conversation = Conversation(max_turns, 4000)
    for said in newest_first:
        conversation.add(said)
    return conversation.history(asker)


# --- the neutral builder ----------------------------------------------------------------------


def test_an_answer_in_pieces_is_one_turn_without_its_sources_and_turns_come_oldest_first() -> None:
    history = read(
        [
            bot("ticket costs 5 €." + SOURCES),  # the last piece has the status line
            bot("The ferry leaves at 16:50; a ", footer=""),
            user("When is the last ferry?"),
        ]
    )
    assert history.turns == turns(
        ("user", "When is the last ferry?"),
        ("assistant", "The ferry leaves at 16:50; a ticket costs 5 €."),
    )
    assert not history.cut


def test_speakers_are_named_only_when_someone_else_speaks_too() -> None:
    alone = read([bot("Yes."), user("Open today?")], asker="U1")
    others = read([bot("Yes."), user("Open today?", "U2", "Bob"), bot("At 9."), user("When?")])
    asked_by_another = read([bot("Yes."), user("Open today?")], asker="U2")

    assert alone.turns == turns(("user", "Open today?"), ("assistant", "Yes."))
    assert [turn.text for turn in others.turns] == [
        "Ann: When?",
        "At 9.",
        "Bob: Open today?",
        "Yes.",
    ]
    assert asked_by_another.turns[0].text == "Ann: Open today?"


def test_an_answer_that_did_not_end_is_marked_and_a_message_showing_nothing_is_left_out() -> None:
    history = read(
        [
            bot("", footer=footer_for(Status.EXPIRED, "too late", 0)),
            user("Third?"),
            bot("Half an ans", footer=footer_for(Status.FAILED, "engine stopped", 0)),
            user("Second?"),
            bot(
                "It is",
                footer=footer_for(Status.STOPPED, "", 0) + " · only the last 2 messages were used",
            ),
            user("First?"),
            user(""),  # an attachment alone, or text Discord hides from the bot
        ]
    )
    assert [turn.text for turn in history.turns] == [
        "First?",
        "It is" + STOPPED_MARK,
        "Second?",
        "Half an ans" + CUT_OFF_MARK,
        "Third?",
    ]


def test_a_conversation_over_the_cap_keeps_its_turns_on_the_grid_and_says_it_was_cut() -> None:
    conversation = Conversation(max_turns=8, max_chars=4000)
    said = [message for n in range(7, 0, -1) for message in (bot(f"A{n}"), user(f"Q{n}"))]
    for message in said:  # newest first, back to the conversation's first: the grid's start
        conversation.add(message)
    history = conversation.history("U1")

    # 14 turns, at most 8, a block of 4: the first 8 go (dropping 6 would slide the start)
    assert [turn.text for turn in history.turns] == ["Q5", "A5", "Q6", "A6", "Q7", "A7"]
    assert history.cut


def test_a_growing_conversation_read_by_an_adapter_keeps_its_start_for_a_block() -> None:
    firsts = []
    for exchanges in range(1, 9):
        said = [m for n in range(exchanges, 0, -1) for m in (bot(f"A{n}"), user(f"Q{n}"))]
        history = read(said, max_turns=8)
        firsts.append((history.turns[0].text, len(history.turns), history.cut))

    assert firsts == [
        ("Q1", 2, False),
        ("Q1", 4, False),
        ("Q1", 6, False),
        ("Q1", 8, False),  # full: the next exchange moves the start a block of 4 on
        ("Q3", 6, True),
        ("Q3", 8, True),
        ("Q5", 6, True),
        ("Q5", 8, True),
    ]


def test_an_answer_that_shows_nothing_is_not_counted_on_the_grid() -> None:
    said = [bot("A3"), user("Q3"), bot("A2"), user("Q2"), bot(SOURCES.strip()), user("Q1")]

    history = read(said, max_turns=4)  # 5 turns that show something, a block of 2
    whole = read(said, max_turns=50)

    assert [turn.text for turn in history.turns] == ["A2", "Q3", "A3"]
    assert (history.turns, history.cut) == last_turns(whole.turns, 4)  # the client's count


def test_a_turn_over_the_character_cap_keeps_its_start_and_its_mark() -> None:
    conversation = Conversation(max_turns=12, max_chars=20)
    conversation.add(bot("x" * 50, footer=footer_for(Status.STOPPED, "", 0)))
    conversation.add(user("y" * 50))
    first, second = conversation.history("U1").turns

    assert first.text == "y" * 19 + TRUNCATED_MARK
    assert second.text == "x" * 9 + TRUNCATED_MARK + STOPPED_MARK
    assert len(second.text) == 20


def test_the_turns_are_kept_on_the_grid_to_the_count_and_the_body_fits_the_protocol() -> None:
    many = turns(*[("user", f"q{n}") for n in range(10)])
    assert last_turns(many, 3) == (many[-3:], True)  # below 4, a block is one turn
    assert last_turns(many, 8) == (many[4:], True)  # a block of 4: 6 kept, not the newest 8
    assert last_turns(many, 10) == (many, False)
    assert last_turns(many, 0) == ((), True)
    assert last_turns(many[4:], 8) == (many[4:], False)  # cut on the grid already: as it is
    long = turns(("user", "q" * 30), ("assistant", "a" * 5))
    assert last_turns(long, 3, max_chars=10) == (
        turns(("user", "q" * 9 + TRUNCATED_MARK), ("assistant", "a" * 5)),
        False,
    )

    big = turns(*[("user", "é" * MAX_HISTORY_TURN_CHARS) for _ in range(10)])  # ~160 KB
    request = make_request(reply_to="bot", user_id="u", question="q?", ttl_s=30, history=big)
    fitted, cut = within_body(request)
    assert cut
    assert len(encode(fitted)) <= MAX_BODY_BYTES
    assert fitted.history == big[-len(fitted.history) :]
    assert len(encode(fitted.model_copy(update={"history": big[-len(fitted.history) - 1 :]}))) > (
        MAX_BODY_BYTES
    )  # one more turn would not have fitted (3 fit: a block is one turn)
    # 8 of 10 turns of half the size fit: a block of 4, so 4 go, not 2 (the grid, as above)
    halves = turns(*[("user", "é" * (MAX_HISTORY_TURN_CHARS // 2)) for _ in range(10)])
    request = make_request(reply_to="bot", user_id="u", question="q?", ttl_s=30, history=halves)
    assert len(encode(request.model_copy(update={"history": halves[2:]}))) <= MAX_BODY_BYTES
    assert len(encode(request.model_copy(update={"history": halves[1:]}))) > MAX_BODY_BYTES
    assert within_body(request) == (request.model_copy(update={"history": halves[4:]}), True)
    small = make_request(reply_to="bot", user_id="u", question="q?", ttl_s=30, history=many)
    assert within_body(small) == (small, False)


def exchanges(count: int) -> tuple[HistoryTurn, ...]:
    return turns(
        *[pair for n in range(count) for pair in (("user", f"q{n}"), ("assistant", f"a{n}"))]
    )


@pytest.mark.parametrize("max_turns", [4, 8, 12, 16, 50])
def test_as_a_conversation_grows_its_first_turn_kept_stays_until_the_window_is_full(
    max_turns: int,
) -> None:
    """An exchange a question: the first turn sent stays put while the window fills, then
    moves on by one block (engine/answering/history.py: the prompt's beginning, and its saved
    state)."""
    whole, block = exchanges(60), history_block(max_turns)
    first, size, moves = 0, 0, 0
    for total in range(2, len(whole) + 1, 2):
        kept, cut = last_turns(whole[:total], max_turns)
        start = total - len(kept)
        assert kept == whole[start:total] and len(kept) <= max_turns and cut == (start > 0)
        if start != first:
            assert size + 2 > max_turns and start - first == block, (total, first, start)
            moves += 1
        first, size = start, len(kept)
    assert moves >= 2


@pytest.mark.parametrize("max_turns", [12, 50])
def test_the_terminal_chat_past_the_protocols_50_turns_keeps_them_on_the_same_grid(
    max_turns: int,
) -> None:
    chat = Turns(max_turns, 4000)
    for n in range(60):
        chat.add(f"q{n}", Outcome(0, f"a{n}"))
        kept = chat.history()
        assert len(kept) <= MAX_HISTORY_TURNS
        # what the client then sends is what it would send of the whole conversation
        assert last_turns(kept, max_turns)[0] == last_turns(exchanges(n + 1), max_turns)[0]
        assert chat.cut == (2 * (n + 1) > MAX_HISTORY_TURNS)  # the answer then says so
    assert kept == exchanges(60)[80:]  # 120 turns: the first 80 went in blocks of 16
    chat.clear()  # /new
    assert not chat.cut and chat.history() == ()


async def test_the_client_sends_a_growing_conversation_from_the_same_turn_until_a_block_goes(
    settings: Settings, broker: Broker
) -> None:
    settings = settings.model_copy(update={"history_max_messages": 8})
    asked = range(1, 9)  # the 2nd to the 9th question of one conversation
    async with ConciergeClient(settings, "test") as client:
        tap = await WireTap.open(broker, client.bot_id)
        sessions = [await client.ask(Ask(f"q{n}", f"g{n}", history=exchanges(n))) for n in asked]
        sent = [await tap.request_from(f"g{n}") for n in asked]
        await tap.channel.close()

    assert [(r.history[0].text, len(r.history)) for r in sent] == [
        ("q0", 2),
        ("q0", 4),
        ("q0", 6),
        ("q0", 8),  # full: a block of 4 goes with the next exchange, and the next
        ("q2", 6),
        ("q2", 8),
        ("q4", 6),
        ("q4", 8),
    ]
    assert [session.history_cut for session in sessions] == [False] * 4 + [True] * 4


async def test_the_client_sends_the_newest_turns_the_settings_allow(
    settings: Settings, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings.model_copy(update={"history_max_messages": 2})
    monkeypatch.setattr("bots.client.HISTORY_TURN_MAX_CHARS", 10)
    history = turns(("user", "q1"), ("assistant", "a1"), ("user", "q2" * 20), ("assistant", "a2"))
    async with ConciergeClient(settings, "test") as client:
        tap = await WireTap.open(broker, client.bot_id)
        whole = await client.ask(Ask("q0", "u1", history=history[:1]))
        cut = await client.ask(Ask("q3", "u2", history=history))
        told_cut = await client.ask(Ask("q4", "u3", history=history[3:], history_cut=True))
        sent = [await tap.request_from(user) for user in ("u1", "u2", "u3")]
        await tap.channel.close()

    assert [request.history for request in sent] == [
        history[:1],
        turns(("user", "q2q2q2q2q" + TRUNCATED_MARK), ("assistant", "a2")),
        history[3:],
    ]
    assert [whole.history_cut, cut.history_cut, told_cut.history_cut] == [False, True, True]


@pytest.mark.parametrize("status", list(Status))
def test_every_footer_is_read_back_as_its_status(status: Status) -> None:
    footer = footer_for(status, "a reason", 2)
    found = status_of(footer + " · only the last 3 messages were used")
    same_text = {Status.GENERATING, Status.DETACHED}
    assert found is status or {found, status} <= same_text
    assert status_of("Just some text") is None


def test_the_notice_counts_the_turns_the_model_read() -> None:
    done = Done(
        session_id="abcdef0123456789", seq=3, text="x", tokens=1, ttft_s=0, tokens_per_s=0,
        elapsed_s=0, history_used=3, history_dropped=2,
    )  # fmt: skip
    untouched = done.model_copy(update={"history_used": 5, "history_dropped": 0})
    assert history_notice(5, False, untouched) == ""
    assert history_notice(5, True, untouched) == "only the last 5 messages were used"
    assert history_notice(5, False, done) == "only the last 3 messages were used"
    assert history_notice(12, True, None) == "only the last 12 messages were used"
    assert history_notice(1, True, None) == "only the last message was used"
    assert history_notice(None, False, done) == "only the last 3 messages were used"
    assert history_notice(2, False, done) == "the earlier messages were not used"


class RecordingSink:
    """What each message shows now, and what each showed when posted."""

    def __init__(self) -> None:
        self.messages: list[MessageContent] = []
        self.posted: list[MessageContent] = []

    async def post(self, content: MessageContent, after: Any | None) -> int:
        self.messages.append(content)
        self.posted.append(content)
        return len(self.messages) - 1

    async def edit(self, handle: int, content: MessageContent) -> None:
        self.messages[handle] = content


async def test_the_final_footer_says_when_older_messages_were_left_out() -> None:
    history = turns(("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2"))
    request = make_request(reply_to="bot", user_id="u", question="q3", ttl_s=30, history=history)
    session = Session.for_request(request, timeout_s=5)
    session.history_cut = True
    session_id = request.session_id
    session.items.put_nowait(Started(session_id=session_id, seq=0, waited_s=0))
    done = Done(
        session_id=session_id, seq=1, text="a3", tokens=1, ttft_s=0, tokens_per_s=0, elapsed_s=0
    )
    session.items.put_nowait(done.model_copy(update={"history_used": 3, "history_dropped": 1}))
    sink = RecordingSink()

    assert await Renderer(sink, max_chars=100, edit_interval_s=0).run(session) is Status.DONE
    assert sink.messages[-1] == MessageContent("a3", "✅ done · only the last 3 messages were used")
    assert sink.posted[0].footer.startswith("⏳ queued")  # said only once the answer ends


# --- how each platform's messages are read back ---------------------------------------------


def test_the_bots_discord_and_slack_messages_are_read_back_as_body_and_status() -> None:
    assert discord_split_status("Hello\nthere\n-# ✅ done") == ("Hello\nthere", "✅ done")
    assert discord_split_status("-# 🛑 stopped") == ("", "🛑 stopped")
    assert discord_split_status("a continuation piece") == ("a continuation piece", "")
    assert discord_split_status("text\n-# a small note") == ("text\n-# a small note", "")

    shown = message_text(MessageContent("Fish & <chips>", "✅ done · only the last 2 messages"))
    assert slack_split_status(shown) == (
        "Fish &amp; &lt;chips&gt;",
        "✅ done · only the last 2 messages",
    )
    assert slack_split_status("piece one\n\npiece two") == ("piece one\n\npiece two", "")


def test_slack_markup_is_read_as_text() -> None:
    me = Me("UBOT", "BBOT")
    text = (
        "<@UBOT> ask <@U2|bob> in <#C1|general> <!here>: "
        "see <https://a.example/x|the page> &amp; <https://b.example>"
    )
    assert (
        plain(text, me)
        == "ask @bob in #general @here: see [the page](https://a.example/x) & https://b.example"
    )


# --- Discord ----------------------------------------------------------------------------------

GUILD_ID = 1_000_000_000_000_000_111
CHANNEL_ID = 1_000_000_000_000_000_211
THREAD_ID = 1_000_000_000_000_000_212  # a thread opened on its own (no message has its id)
CHATTY_THREAD_ID = 1_000_000_000_000_000_213  # began with people talking, not with the bot
ANN = user_payload(1_000_000_000_000_000_411, "ann")
BOB = user_payload(1_000_000_000_000_000_412, "bob")
DONE_FOOTER = "\n-# ✅ done"
_ids = itertools.count(1_500_000_000_000_000_000)


@dataclass
class Discord:
    """The bot under test, the fake it talks to, and a tap on the broker."""

    bot: ConciergeBot
    fake: FakeDiscord
    tap: WireTap

    def lay(
        self,
        author: dict[str, Any],
        content: str,
        *,
        reply_to: int | None = None,
        channel: int = CHANNEL_ID,
        mention: bool = False,
    ) -> dict[str, Any]:
        """A message Discord keeps (said before the bot started, or the bot's own)."""
        reference, referenced = None, None
        if reply_to is not None:
            parent = self.fake.messages[reply_to]  # sent along one level deep, as Discord does
            referenced = {k: v for k, v in parent.items() if k != "referenced_message"}
            reference = {"message_id": str(reply_to), "channel_id": parent["channel_id"]}
        payload = message_payload(
            next(_ids),
            channel,
            author,
            f"<@{BOT_ID}> {content}" if mention else content,
            guild_id=None if author is BOT_USER else GUILD_ID,
            mentions=[BOT_USER] if mention else [],
            reference=reference,
            referenced_message=referenced,
        )
        self.fake.add(payload)
        return payload

    def say(self, author: dict[str, Any], content: str, **how: Any) -> int:
        """A message said now: Discord keeps it and sends it to the bot."""
        payload = self.lay(author, content, **how)
        self.bot._connection.parse_message_create(payload)  # type: ignore[arg-type]
        return int(payload["id"])

    async def answer_to(self, question_id: int) -> list[int]:
        """The answer's messages, once it shows its end (a final status, no Stop button)."""
        first = await self.fake.wait_for(lambda c: c in self.fake.replies_to(question_id))
        return await self.fake.until_ended(int(first.response["id"]))

    async def request(self, number: int) -> Request:
        """The ``number``-th request (from 1) the bot sent."""
        await self.tap.until(lambda: len(self.tap.requests) >= number)
        return self.tap.requests[number - 1]

    async def done(self, request: Request) -> Done:
        done = (await self.tap.ending(request.session_id))[-1]
        assert isinstance(done, Done), done
        return done


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord()
    server = await start(fake)
    monkeypatch.setattr(discord.http.Route, "BASE", fake.base)
    yield fake
    await server.close()


@pytest.fixture
async def discord_bot(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord
) -> AsyncIterator[Discord]:
    """The real bot, logged in against the fake, in a guild with a channel and two threads."""
    tap = await WireTap.open(broker, client.bot_id)
    bot = ConciergeBot(settings, client, guild_ready_timeout=0.05, answer_max_chars=60)
    await bot.login("fake-token")
    bot._connection.parse_ready(ready_payload())  # type: ignore[arg-type]
    threads = [thread_payload(t, GUILD_ID, CHANNEL_ID) for t in (THREAD_ID, CHATTY_THREAD_ID)]
    bot._connection.parse_guild_create(guild_payload(GUILD_ID, [CHANNEL_ID], threads=threads))  # type: ignore[arg-type]
    await bot.wait_until_ready()
    yield Discord(bot, fake_discord, tap)
    await bot.close()
    await tap.channel.close()


@pytest.fixture
async def engine_running(settings: Settings, backend: Any, broker: Broker) -> AsyncIterator[None]:
    running = await start_engine(settings, backend)
    yield
    await running.stop()


def said_by_bot(discord_: Discord, message_ids: list[int]) -> str:
    """The answer's text as its messages show it (the status line taken off the last)."""
    contents = [discord_.fake.messages[message_id]["content"] for message_id in message_ids]
    return "".join(contents[:-1]) + discord_split_status(contents[-1])[0]


async def test_replies_to_the_bots_answers_carry_the_whole_chain_in_order(
    discord_bot: Discord, engine_running: None
) -> None:
    d = discord_bot
    first = d.say(ANN, "What are the office hours?", mention=True)
    answer = await d.answer_to(first)
    second = d.say(ANN, "And on Sundays?", reply_to=answer[-1])  # no mention: a reply is enough
    second_answer = await d.answer_to(second)
    d.say(ANN, "Thanks. Where is the office?", reply_to=second_answer[-1])

    requests = [await d.request(n) for n in (1, 2, 3)]
    dones = [await d.done(request) for request in requests[:2]]
    assert [r.question for r in requests] == [
        "What are the office hours?",
        "And on Sundays?",
        "Thanks. Where is the office?",
    ]
    assert requests[0].history == ()
    assert len(answer) > 1 and len(second_answer) > 1  # each answer took several messages
    assert requests[2].history == turns(
        ("user", "What are the office hours?"),
        ("assistant", dones[0].text.rstrip()),
        ("user", "And on Sundays?"),
        ("assistant", dones[1].text.rstrip()),
    )
    assert requests[1].history == requests[2].history[:2]
    assert said_by_bot(d, answer) == dones[0].text


async def test_someone_elses_reply_in_the_chain_is_named(discord_bot: Discord) -> None:
    d = discord_bot
    question = d.lay(ANN, "Is the museum open today?", mention=True)
    answer = d.lay(
        BOT_USER, "Yes, until 18:00." + SOURCES + DONE_FOOTER, reply_to=int(question["id"])
    )
    aside = d.lay(BOB, "Is it free?", reply_to=int(answer["id"]))
    answer_2 = d.lay(BOT_USER, "No, 12 €." + DONE_FOOTER, reply_to=int(aside["id"]))
    d.say(ANN, "And for children?", reply_to=int(answer_2["id"]))

    request = await d.request(1)
    assert request.history == turns(
        ("user", "ann: Is the museum open today?"),
        ("assistant", "Yes, until 18:00."),
        ("user", "bob: Is it free?"),
        ("assistant", "No, 12 €."),
    )


async def test_a_chain_longer_than_the_cap_keeps_its_turns_on_the_grid_and_the_answer_says_so(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord,
    backend: Any,
) -> None:  # fmt: skip
    settings = settings.model_copy(update={"history_max_messages": 8})
    engine = await start_engine(settings, backend)
    tap = await WireTap.open(broker, client.bot_id)
    bot = ConciergeBot(settings, client, guild_ready_timeout=0.05)
    await bot.login("fake-token")
    bot._connection.parse_ready(ready_payload())  # type: ignore[arg-type]
    bot._connection.parse_guild_create(guild_payload(GUILD_ID, [CHANNEL_ID]))  # type: ignore[arg-type]
    d = Discord(bot, fake_discord, tap)
    try:
        last: int | None = None
        for n in range(1, 6):  # five questions and their answers, each replying to the one before
            asked = d.lay(ANN, f"Question {n}?", reply_to=last, mention=n == 1)
            last = int(
                d.lay(BOT_USER, f"Answer {n}." + DONE_FOOTER, reply_to=int(asked["id"]))["id"]
            )
        question = d.say(ANN, "Question 6?", reply_to=last)
        request = await d.request(1)
        answer = await d.answer_to(question)
        done = await d.done(request)
    finally:
        await bot.close()
        await tap.channel.close()
        await engine.stop()

    # 10 turns, at most 8, a block of 4: the first 4 go, not 2 (bots/history.py)
    assert request.history == turns(
        *[
            pair
            for n in (3, 4, 5)
            for pair in (("user", f"Question {n}?"), ("assistant", f"Answer {n}."))
        ]
    )
    assert done.history_dropped == 0
    footer = discord_split_status(fake_discord.messages[answer[-1]]["content"])[1]
    assert footer == "✅ done · only the last 6 messages were used"  # the number sent, not 8
    # read back to the chain's first message, which the grid counts from: each GET brings
    # the message it replies to along
    assert len(fake_discord.reads()) == 5


async def test_a_stopped_answer_is_in_the_history_as_far_as_it_went(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord,
    backend: Any,
) -> None:  # fmt: skip
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    tap = await WireTap.open(broker, client.bot_id)
    bot = ConciergeBot(settings, client, guild_ready_timeout=0.05)
    await bot.login("fake-token")
    bot._connection.parse_ready(ready_payload())  # type: ignore[arg-type]
    bot._connection.parse_guild_create(guild_payload(GUILD_ID, [CHANNEL_ID]))  # type: ignore[arg-type]
    d = Discord(bot, fake_discord, tap)
    try:
        question = d.say(ANN, LONG_QUESTION, mention=True)
        first = await fake_discord.wait_for(lambda c: c in fake_discord.replies_to(question))
        first_id = int(first.response["id"])
        await fake_discord.wait_for(  # some of the answer shows
            lambda c: (
                c in fake_discord.edits(first_id)
                and discord_split_status(c.body["content"])[0] != ""
            )
        )
        stop = reaction_payload(ANN, CHANNEL_ID, first_id, guild_id=GUILD_ID)
        bot._connection.parse_message_reaction_add(stop)  # type: ignore[arg-type]
        answer = await d.answer_to(question)
        shown = said_by_bot(d, answer)
        d.say(ANN, "Go on, please.", reply_to=answer[-1])
        follow_up = await d.request(2)
    finally:
        await bot.close()
        await tap.channel.close()
        await engine.stop()

    assert discord_split_status(fake_discord.messages[answer[-1]]["content"])[1] == "🛑 stopped"
    assert shown
    assert follow_up.history == turns(
        ("user", LONG_QUESTION), ("assistant", shown.rstrip() + STOPPED_MARK)
    )


async def test_a_thread_that_began_with_a_question_to_the_bot_is_its_conversation(
    discord_bot: Discord,
) -> None:
    d = discord_bot
    question = d.lay(ANN, "Can I bring my dog?", channel=THREAD_ID, mention=True)
    d.lay(
        BOT_USER, "Yes, on a leash." + DONE_FOOTER, channel=THREAD_ID, reply_to=int(question["id"])
    )
    d.lay(BOB, "Mine too?", channel=THREAD_ID, mention=True)
    d.say(ANN, "Where can it drink?", channel=THREAD_ID, mention=True)  # not a reply
    d.lay(BOB, "Good morning all", channel=CHATTY_THREAD_ID)
    d.say(ANN, "When do you open?", channel=CHATTY_THREAD_ID, mention=True)

    in_thread, in_chatty_thread = await d.request(1), await d.request(2)
    assert in_thread.history == turns(
        ("user", "ann: Can I bring my dog?"),
        ("assistant", "Yes, on a leash."),
        ("user", "bob: Mine too?"),
    )
    assert in_chatty_thread.question == "When do you open?"
    assert in_chatty_thread.history == ()


async def test_a_thread_opened_on_the_bots_answer_continues_that_answers_conversation(
    discord_bot: Discord,
) -> None:
    d = discord_bot
    question = d.lay(ANN, "Where do I park?", mention=True)
    answer = d.lay(BOT_USER, "Behind the hall." + DONE_FOOTER, reply_to=int(question["id"]))
    thread_id = int(answer["id"])  # Discord gives a thread opened on a message that message's id
    thread = thread_payload(thread_id, GUILD_ID, CHANNEL_ID)
    d.bot._connection.parse_thread_create(thread)  # type: ignore[arg-type]
    d.say(ANN, "Is it free?", channel=thread_id, mention=True)

    request = await d.request(1)
    assert request.history == turns(("user", "Where do I park?"), ("assistant", "Behind the hall."))


async def test_with_conversations_off_every_question_stands_alone(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord
) -> None:
    tap = await WireTap.open(broker, client.bot_id)
    off = settings.model_copy(update={"history_max_messages": 0})
    bot = ConciergeBot(off, client, guild_ready_timeout=0.05)
    await bot.login("fake-token")
    bot._connection.parse_ready(ready_payload())  # type: ignore[arg-type]
    bot._connection.parse_guild_create(guild_payload(GUILD_ID, [CHANNEL_ID]))  # type: ignore[arg-type]
    d = Discord(bot, fake_discord, tap)
    try:
        question = d.lay(ANN, "Where do I park?", mention=True)
        answer = d.lay(BOT_USER, "Behind the hall." + DONE_FOOTER, reply_to=int(question["id"]))
        d.say(ANN, "Is it free?", reply_to=int(answer["id"]))
        request = await d.request(1)
    finally:
        await bot.close()
        await tap.channel.close()

    assert request.question == "Is it free?"  # a reply to the bot still asks it
    assert request.history == ()
    assert fake_discord.reads() == []


# --- Slack ------------------------------------------------------------------------------------

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_CHANNEL = "C0GENERAL"
SLACK_ANN, SLACK_BOB = "U0ANN0001", "U0BOB0001"


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fake, server = await start_fake_slack()
    fake.users = {SLACK_ANN: {"profile": {"display_name": "Ann"}}}
    fake.users[SLACK_BOB] = {"profile": {"display_name": "Bob"}}
    yield fake
    await server.close()


@dataclass
class Slack:
    """The real Bolt app and adapter, their Web API the fake; events reach Bolt's dispatch."""

    app: AsyncApp
    adapter: SlackAdapter
    fake: FakeSlack
    tap: WireTap

    async def deliver(self, event: dict[str, Any]) -> int:
        """An Events API callback as Socket Mode hands it over; Bolt's answer status."""
        body = {
            "type": "event_callback",
            "team_id": TEAM_ID,
            "api_app_id": API_APP_ID,
            "event_id": f"Ev{next(_ids)}",
            "event_time": 1_700_000_000,
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
            "event": event,
        }
        response = await self.app.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
        return response.status

    async def mention(self, user: str, text: str, thread_ts: str | None = None) -> str:
        """``user`` mentions the bot (in ``thread_ts``, if given); the message's ts."""
        said = f"<@{BOT_USER_ID}> {text}"
        ts = self.fake.said(user, SLACK_CHANNEL, said, thread_ts)
        event = {"type": "app_mention", "user": user, "text": said, "ts": ts}
        event |= {"channel": SLACK_CHANNEL} | ({"thread_ts": thread_ts} if thread_ts else {})
        assert await self.deliver(event) == 200
        return ts

    async def message(self, user: str, text: str, thread_ts: str | None = None) -> str:
        """A plain message (no mention) in the channel or in ``thread_ts``; its ts."""
        ts = self.fake.said(user, SLACK_CHANNEL, text, thread_ts)
        event = {"type": "message", "channel_type": "channel", "user": user, "text": text}
        event |= {"ts": ts, "channel": SLACK_CHANNEL}
        assert await self.deliver(event | ({"thread_ts": thread_ts} if thread_ts else {})) == 200
        return ts

    async def ask(self, user: str, text: str) -> None:
        body = {
            "command": "/ask",
            "text": text,
            "user_id": user,
            "user_name": user.lower(),
            "channel_id": SLACK_CHANNEL,
            "team_id": TEAM_ID,
            "api_app_id": API_APP_ID,
            "response_url": self.fake.response_url(),
            "trigger_id": "1.2.3",
        }
        response = await self.app.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
        assert response.status == 200

    def lay_answer(self, thread_ts: str | None, text: str) -> str:
        """One of the bot's answers, posted before (as Slack keeps it); its ts."""
        ts = self.fake.new_ts()
        self.fake.messages.append(Message(SLACK_CHANNEL, ts, thread_ts, [text], [0.0]))
        return ts

    async def answered(self, thread_ts: str) -> Message:
        """The bot's answer in ``thread_ts``, once its status line says it ended."""

        def ended() -> Message | None:
            mine = self.fake.thread(SLACK_CHANNEL, thread_ts)
            last = mine[-1] if mine else None
            return last if last and "✅" in slack_split_status(last.text)[1] else None

        return await self.fake.wait_for(ended, 60)

    async def request(self, number: int) -> Request:
        await self.tap.until(lambda: len(self.tap.requests) >= number)
        return self.tap.requests[number - 1]


@asynccontextmanager
async def slack_bot(
    settings: Settings, client: ConciergeClient, broker: Broker, fake: FakeSlack, **changes: Any
) -> AsyncIterator[Slack]:
    settings = settings.model_copy(
        update={
            "slack_bot_token": SecretStr("xoxb-test"),
            "slack_signing_secret": SecretStr(SLACK_SECRET),
            **changes,
        }
    )
    web = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    app = build_app(settings, web, process_before_response=True)
    adapter = SlackAdapter(settings, client, app)
    tap = await WireTap.open(broker, client.bot_id)
    try:
        yield Slack(app, adapter, fake, tap)
    finally:
        await adapter.close(grace_s=1.0)
        await tap.channel.close()


ME = Me(BOT_USER_ID, SLACK_BOT_ID)


async def test_a_mention_in_a_thread_the_bot_answered_continues_it_and_so_does_an_ask_thread(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack,
    engine_running: None,
) -> None:  # fmt: skip
    async with slack_bot(settings, client, broker, fake_slack) as slack:
        asked = await slack.mention(SLACK_ANN, "When does the last ferry leave?")
        await slack.answered(asked)
        await slack.mention(SLACK_ANN, "And how much is the ticket?", thread_ts=asked)
        first, follow_up = await slack.request(1), await slack.request(2)
        first_done = (await slack.tap.ending(first.session_id))[-1]

        await slack.ask(SLACK_BOB, "Is the museum open on Mondays?")
        await slack.tap.until(lambda: len(slack.tap.requests) >= 3)
        by_command = slack.tap.requests[2]
        answer = await slack.fake.wait_for(lambda: slack.fake.thread(SLACK_CHANNEL, None)[:1])
        await _ended_in_channel(slack, answer[0].ts)
        await slack.mention(SLACK_BOB, "And on Sundays?", thread_ts=answer[0].ts)
        in_ask_thread = await slack.request(4)
        by_command_done = (await slack.tap.ending(by_command.session_id))[-1]

    assert isinstance(first_done, Done) and isinstance(by_command_done, Done)
    assert follow_up.question == "And how much is the ticket?"
    assert follow_up.history == turns(
        ("user", "When does the last ferry leave?"),
        ("assistant", plain(slack_text(first_done.text), ME)),
    )
    assert in_ask_thread.history == turns(
        ("user", "Is the museum open on Mondays?"),  # the question the answer's first line names
        ("assistant", plain(slack_text(by_command_done.text), ME)),
    )


async def _ended_in_channel(slack: Slack, ts: str) -> None:
    """Wait until the ``/ask`` answer posted in the channel at ``ts`` shows that it ended."""

    def ended() -> bool:
        return "✅" in slack_split_status(slack.fake.message(ts).text)[1]

    await slack.fake.wait_for(ended, 60)


async def test_a_mention_in_a_thread_the_bot_never_answered_stands_alone(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack
) -> None:
    async with slack_bot(settings, client, broker, fake_slack) as slack:
        started = await slack.message(SLACK_BOB, "Anyone know the opening hours?")
        await slack.message(SLACK_ANN, "No idea", thread_ts=started)
        await slack.mention(SLACK_ANN, "What are the opening hours?", thread_ts=started)
        request = await slack.request(1)

    assert request.history == ()
    assert [call.params["ts"] for call in fake_slack.calls_of("conversations.replies")] == [started]


async def test_with_thread_followups_on_a_plain_message_in_the_bots_thread_asks_too(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack
) -> None:
    async with slack_bot(
        settings, client, broker, fake_slack, slack_thread_followups=True
    ) as slack:
        asked = fake_slack.said(SLACK_ANN, SLACK_CHANNEL, f"<@{BOT_USER_ID}> Is parking free?")
        slack.lay_answer(asked, "Yes, *for two hours*." + "\n\n✅ done")
        other = await slack.message(SLACK_BOB, "Lunch anyone?")
        await slack.message(SLACK_ANN, "Pizza?", thread_ts=other)  # not the bot's thread
        await slack.message(SLACK_BOB, "Is that all day?")  # not in a thread
        await slack.message(SLACK_BOB, f"<@{BOT_USER_ID}> hello", thread_ts=other)  # a mention
        await slack.message(SLACK_BOB, "And after that?", thread_ts=asked)
        follow_up = await slack.request(1)
        await slack.mention(SLACK_ANN, "Thanks", thread_ts=asked)  # a marker: asked after them
        await slack.request(2)

    assert follow_up.question == "And after that?"
    assert follow_up.history == turns(
        ("user", "Ann: Is parking free?"), ("assistant", "Yes, *for two hours*.")
    )
    assert len(slack.tap.requests) == 2


async def test_without_thread_followups_a_plain_message_asks_nothing(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack
) -> None:
    async with slack_bot(settings, client, broker, fake_slack) as slack:
        asked = fake_slack.said(SLACK_ANN, SLACK_CHANNEL, f"<@{BOT_USER_ID}> Is parking free?")
        slack.lay_answer(asked, "Yes.\n\n✅ done")
        await slack.message(SLACK_ANN, "Hmm, ok.", thread_ts=asked)
        await slack.mention(SLACK_ANN, "And after that?", thread_ts=asked)
        request = await slack.request(1)

    assert len(slack.tap.requests) == 1
    assert request.history == turns(
        ("user", "Is parking free?"), ("assistant", "Yes."), ("user", "Hmm, ok.")
    )
    assert fake_slack.calls_of("conversations.replies")  # read for the mention only
    assert len(fake_slack.calls_of("conversations.replies")) == 1


async def test_an_ask_answers_first_line_is_read_back_as_its_question_and_its_asker(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack
) -> None:
    async with slack_bot(settings, client, broker, fake_slack) as slack:
        by_ann = slack.lay_answer(
            None, asked_line("Ann", "Is 1 < 2 & 3 > 2?") + "\nYes.\n\n✅ done"
        )
        by_bob = slack.lay_answer(None, asked_line("Bob", "Open late?") + "\nNo.\n\n✅ done")
        await slack.mention(SLACK_ANN, "Why?", thread_ts=by_ann)
        await slack.mention(SLACK_ANN, "Why?", thread_ts=by_bob)
        own, others = await slack.request(1), await slack.request(2)

    assert own.history == turns(("user", "Is 1 < 2 & 3 > 2?"), ("assistant", "Yes."))
    assert others.history == turns(("user", "Bob: Open late?"), ("assistant", "No."))
