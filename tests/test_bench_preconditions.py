"""Every benchmark checks its own preconditions per run and makes no summary from runs that
missed them (``cancel``'s are in tests/test_benchmarks.py). Each miss here is brought about
on purpose in a tiny real run; none of these tests times anything.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from cli.benchmarks import conversation, queue, stream
from cli.benchmarks.command import add_bench_parser, bench_command
from cli.benchmarks.conversation import CACHED, UNCACHED, ConversationConfig, run_conversation
from cli.benchmarks.rig import BenchBackend
from config.settings import load_settings
from engine.backends.base import Backend
from engine.backends.state_cache import StateCache


def _quiet(_line: str) -> None:
    pass


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["bench", *argv])


@pytest.mark.broker  # the bench rig connects on a prefix of its own
@pytest.mark.model  # and loads the model itself
async def test_a_stream_pair_with_a_side_of_one_token_gives_no_figure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    measure = stream.measure_in_process

    async def one_token(rig: Any, question: str) -> dict[str, Any]:
        result = await measure(rig, question)
        return {**result, "tokens": 1, "times": result["times"][:1]}

    monkeypatch.setattr(stream, "measure_in_process", one_token)
    args = _args("stream", "--repeat", "1", "--prompts", "1", "--max-tokens", "4", "--json")

    assert await bench_command(args, load_settings()) == 1

    printed, err = capsys.readouterr()
    doc = json.loads(printed)
    assert doc["summary"] is None
    assert doc["invalid_runs"] == {"fewer than two tokens on both sides: no rate": 1}
    assert "no figures: 1 of 1 runs missed their precondition" in err


def test_a_pair_that_parts_ways_is_compared_on_the_tokens_both_wrote() -> None:
    local = {"tokens": 5, "tokens_per_s": 4.0, "times": [0.0, 1.0, 2.0, 3.0, 4.0]}
    piped = {"tokens": 3, "tokens_per_s": 1.0, "times": [0.0, 2.0, 4.0]}

    assert stream.on_shared_tokens(local, piped) == 3

    assert (local["tokens_per_s"], piped["tokens_per_s"]) == (1.0, 0.5)
    assert "times" not in local and "times" not in piped  # not in the document
    assert stream.missed_precondition(local, piped) is None


@pytest.mark.broker  # the bench rig connects on a prefix of its own
@pytest.mark.model  # and loads the model itself
async def test_a_burst_the_queue_did_not_hold_whole_gives_no_figure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As if another consumer had taken requests: the broker counts none waiting."""

    async def emptied(_self: Any) -> int:
        return 0

    monkeypatch.setattr("broker.amqp.Broker.request_queue_depth", emptied)
    args = _args(
        "queue", "-n", "3", "--max-tokens", "1", "--bots", "1",
        "--cancels-published", "2", "--cancels-added", "2", "--json",
    )  # fmt: skip

    assert await bench_command(args, load_settings()) == 1

    printed, err = capsys.readouterr()
    doc = json.loads(printed)
    reason = "the queue held fewer requests than asked when the engine was let go"
    assert doc["requests"]["depth"] == 1 and doc["requests"]["missed"] == reason
    assert doc["invalid_runs"] == {reason: 1}
    assert f"no figures: 1 of 1 runs missed their precondition: {reason}" in err


def test_the_burst_must_have_been_held_whole() -> None:
    assert queue.missed_precondition(200, 200) is None
    assert queue.missed_precondition(200, 199) is not None


def _side(**changes: Any) -> dict[str, Any]:
    side = {"answered": True, "prompt_tokens": 500, "history_used": 4, "history_dropped": 0,
            "state_loaded_tokens": 450}  # fmt: skip
    return {**side, **changes}


@pytest.mark.parametrize(
    ("cached", "uncached", "reason"),
    [
        (_side(), _side(state_loaded_tokens=None), None),
        (_side(history_used=2, state_loaded_tokens=None), _side(history_used=2,
         state_loaded_tokens=None), None),  # turn 2: only the system prompt is saved
        (_side(answered=False), _side(), "the model did not answer the turn both ways"),
        (_side(), _side(prompt_tokens=501, state_loaded_tokens=None),
         "the turn's two prompts differ"),
        (_side(history_dropped=2), _side(state_loaded_tokens=None),
         "the conversation was cut (history dropped)"),
        (_side(state_loaded_tokens=None), _side(state_loaded_tokens=None),
         "with the cache, no saved state was loaded"),
        (_side(), _side(), "without the cache, a saved state was loaded"),
    ],
)  # fmt: skip
def test_a_conversation_turn_names_the_precondition_it_missed(
    cached: dict[str, Any], uncached: dict[str, Any], reason: str | None
) -> None:
    assert conversation.missed_precondition({CACHED: cached, UNCACHED: uncached}) == reason


@pytest.mark.broker  # the bench rig connects on a prefix of its own
@pytest.mark.timeout(300)  # twelve answers, each reading a prompt of 400 to 600 tokens
async def test_a_conversation_turn_the_cache_did_not_serve_gives_no_figure(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three turns with a cache that never finds a saved state: the third turn, whose saved
    state holds more than the system prompt, is invalid, and no summary is made."""
    monkeypatch.setattr(StateCache, "_find_longest_prefix_key", lambda _self, _key: None)
    config = ConversationConfig(turns=3, interleave=1, max_tokens=2, warm=False)  # no reading ahead
    doc = await run_conversation(load_settings(), BenchBackend(backend, cold=False), config, _quiet)
    assert doc["summary"] is None
    assert doc["invalid_runs"] == {"with the cache, no saved state was loaded": 1}
    assert [turn["missed"] is None for turn in doc["turns"]] == [True, True, False]
    assert all(turn[CACHED]["answered"] and turn[UNCACHED]["answered"] for turn in doc["turns"])
