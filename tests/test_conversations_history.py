"""Follow-up questions: the builder and the client turn a conversation into its history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.history import (
    CUT_OFF_MARK,
    STOPPED_MARK,
    TRUNCATED_MARK,
    Conversation,
    Said,
    last_turns,
    within_body,
)
from bots.renderer import Status, footer_for
from bots.terminal.answer import Outcome
from bots.terminal.chat import Turns
from broker.amqp import Broker
from broker.history_window import history_block
from broker.protocol import (
    MAX_BODY_BYTES,
    MAX_HISTORY_TURN_CHARS,
    MAX_HISTORY_TURNS,
    HistoryTurn,
    encode,
    make_request,
)
from config.settings import Settings
from tests.conversations_helpers import SOURCES, bot, turns, user
from tests.helpers import WireTap


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
