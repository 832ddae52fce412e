"""A long conversation's oldest turns dropped in blocks, so that consecutive follow-ups begin
with the same turns and llama.cpp's saved state of the last one still serves the next
(engine/answering/history.py): the pure rule, and the prompts the engine builds, in the model's
tokens."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.history_window import block_start, history_block
from broker.protocol import HistoryTurn, make_request
from cli.benchmarks.town import ANSWERS, ARTICLES, CONVERSATION
from config.settings import Settings
from engine.answering.history import fit_history, fit_history_in_blocks
from engine.answering.pipeline import AnswerPlanner
from engine.backends.base import Backend, ChatMessage
from engine.knowledge.scrape.builder import build_kb


def turns(count: int) -> list[ChatMessage]:
    roles = ("user", "assistant")
    return [ChatMessage(roles[i % 2], f"turn {i} " + "x" * 20) for i in range(count)]


def fits_at_most(count: int) -> tuple[list[int], Callable[[Sequence[ChatMessage]], bool]]:
    asked: list[int] = []

    def fits(kept: Sequence[ChatMessage]) -> bool:
        asked.append(len(kept))
        return len(kept) <= count

    return asked, fits


@pytest.mark.parametrize("window", range(50))
def test_a_growing_conversation_keeps_its_start_for_a_block_of_turns(window: int) -> None:
    """Two messages a turn: the start moves only in steps of a block, never at every turn, and
    what is kept is never more than fits nor (from a window of 4) half of it or less."""
    starts = [block_start(total, window) for total in range(0, 101, 2)]
    for total, start in zip(range(0, 101, 2), starts, strict=True):
        kept = total - start
        assert 0 <= start <= total and kept <= max(window, 0)
        assert kept == total or window < 4 or kept > window / 2
    moves = sum(1 for before, after in itertools.pairwise(starts) if after != before)
    dropping = sum(1 for total in range(2, 101, 2) if total > window)
    if window >= 8:  # blocks of 4 messages and more: two turns or more from each start
        assert moves <= dropping / 2 + 1  # the first move, from 0, counts too


def test_the_rule_as_docs_protocol_states_it_for_clients() -> None:
    """block = the largest power of two <= max(1, N // 2); first kept = ceil((total - N) /
    block) * block when total > N (docs/protocol.md, the request's history)."""
    assert [history_block(n) for n in (0, 1, 3, 4, 7, 8, 12, 16, 31, 32, 50)] == [
        1, 1, 1, 2, 2, 4, 4, 8, 8, 16, 16,
    ]  # fmt: skip
    assert [block_start(total, 12) for total in (12, 13, 14, 16, 17, 18, 20)] == [
        0, 4, 4, 4, 8, 8, 8,
    ]  # fmt: skip
    assert block_start(5, 0) == 5  # none may stay: none is kept


def test_nothing_is_dropped_when_everything_fits() -> None:
    history = turns(12)
    _, fits = fits_at_most(12)

    fitted = fit_history_in_blocks(history, fits)

    assert fitted.turns == tuple(history) and fitted.dropped == 0


def test_when_turns_must_go_they_go_in_a_block_and_the_rest_still_fits() -> None:
    history = turns(14)
    _, fits = fits_at_most(12)

    exact = fit_history(history, fits)
    fitted = fit_history_in_blocks(history, fits)

    assert exact.dropped == 2  # the oldest exchange would do
    assert fitted.dropped == 4 and fitted.turns == tuple(history[4:])  # a block of 4 goes
    assert fitted.turns[0].role == "user"  # blocks keep exchanges whole


@pytest.fixture
def town(settings: Settings, tmp_path: Path) -> Settings:
    """The benchmark town's knowledge base and a 768-token context: its conversation outgrows
    the context from the seventh turn on (``concierge bench conversation``)."""
    kb = tmp_path / "town.sqlite3"
    build_kb(kb, kb, ARTICLES, [], datetime.now(UTC))
    return settings.model_copy(
        update={
            "kb_path": kb,
            "context_size": 768,
            "max_tokens": 64,
            "model_answers_yes_no": True,  # as the benchmark: every turn reaches the model
        }
    )


def test_consecutive_follow_ups_begin_alike_once_the_context_is_full(
    town: Settings, backend: Backend
) -> None:
    """The town's conversation twice over (16 turns), each prompt as the engine builds it: of
    the turns whose history no longer fits whole, most begin with the same turns as the one
    before, so llama.cpp reads them from the last turn's saved state, not from the start.
    A new question's model reads no turn: its conversation is what the read-ahead prepares
    for the next follow-up (``Plan.lead``), fitted the same way."""
    prompts = AnswerPlanner(town, backend.count_tokens)
    history: list[HistoryTurn] = []
    firsts: list[ChatMessage | None] = []  # each prompt's oldest history turn
    dropped: list[int] = []
    for question, answer in zip(CONVERSATION * 2, ANSWERS * 2, strict=True):
        request = make_request(
            reply_to="b", user_id="u", question=question, ttl_s=9, history=tuple(history)
        )
        prompt = prompts.plan(request)
        assert backend.count_tokens(prompt.messages) <= town.context_size - town.max_tokens
        conversation = prompt.lead()[1:]  # the turns, after the system text
        firsts.append(conversation[0] if conversation else None)
        dropped.append(len(history) - len(conversation))
        history += [
            HistoryTurn(role="user", text=question),
            HistoryTurn(role="assistant", text=answer),
        ]

    cut = [i for i in range(1, len(dropped)) if dropped[i] > 0]
    same_start = [i for i in cut if firsts[i] == firsts[i - 1]]
    assert len(cut) >= 6  # the context really is full for a good part of the conversation
    assert len(same_start) >= len(cut) / 2, (dropped, same_start)
