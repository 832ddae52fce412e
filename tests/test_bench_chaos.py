"""``concierge bench chaos`` in small: a real run on the test cluster (a node killed, the engine
process SIGKILLed) whose counts add up and whose missed precondition gives no figure; and the
judging of a question, and the plan of faults, without a broker.
"""

from __future__ import annotations

import argparse
import json

import pytest

from broker.protocol import Done, Failed, ReplyEvent, Started, TokenEvent
from cli.benchmarks import chaos
from cli.benchmarks.chaos import ChaosConfig, Fault, chaos_command, plan_faults
from cli.benchmarks.chaos_askers import Record, count_outcomes, judge
from cli.benchmarks.chaos_rig import ClusterNodes
from config.settings import load_settings
from tests.cluster_fixture import Cluster

OUTCOMES = ("whole", "not whole", "interrupted", "lost")


def _args(*argv: str) -> argparse.Namespace:
    from cli.benchmarks.command import add_bench_parser

    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["bench", *argv])


@pytest.mark.model  # the engine process loads the model
@pytest.mark.timeout(400)  # about 50 s on a quiet machine; a loaded one answers far slower
async def test_a_small_chaos_run_counts_each_question_once_and_a_missed_fault_gives_no_figure(
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The planned node kill and engine kill strike answers in flight; a bot restart planned
    after the last answer never strikes, so the run with faults is invalid."""
    planned = plan_faults

    def with_one_too_late(config: ChaosConfig) -> list[Fault]:
        return [*planned(config), Fault("bot restart", 1, config.questions + 1, 1)]

    monkeypatch.setattr(chaos, "plan_faults", with_one_too_late)
    monkeypatch.setattr("cli.benchmarks.chaos_askers.LOST_AFTER_S", 30.0)  # 6 answers, not 60
    args = _args(
        "chaos", "-n", "6", "--askers", "2", "--node-kills", "1", "--engine-kills", "1",
        "--bot-restarts", "0", "--max-tokens", "16", "--json",
    )  # fmt: skip
    nodes = ClusterNodes(cluster.env, cluster.base_port)

    assert await chaos_command(args, load_settings(), nodes) == 1

    printed, err = capsys.readouterr()
    doc = json.loads(printed)
    baseline, run = doc["runs"]
    for each in (baseline, run):
        assert sum(each["counts"][outcome] for outcome in OUTCOMES) == 6, each["counts"]
        not_queued = [p for p in each["problems"] if p.get("reason", "").startswith("not queued")]
        assert each["latency_s"]["n"] == 6 - each["counts"]["lost"] - len(not_queued)
    assert baseline["missed"] is None and baseline["counts"]["whole"] == 6
    struck, too_late = run["faults"][:-1], run["faults"][-1]
    assert sorted(fault["kind"] for fault in struck) == ["engine kill", "node kill"]
    for fault in struck:  # each really happened, while an answer was being given
        assert fault["verified"] and fault["answer_in_flight"] and fault["missed"] is None, fault
    reason = "bot restart 1: the questions ran out before it"
    assert too_late["missed"] == reason and run["missed"] == reason
    assert doc["invalid_runs"] == {reason: 1} and doc["summary"] is None
    assert f"no figures: 1 of 2 runs missed their precondition: {reason}" in err


# --- without a broker ------------------------------------------------------------------------

SID = "s" * 8


def _record(*events: ReplyEvent) -> Record:
    record = Record(0, 0, "q", asked_at=0.0)
    for at, event in enumerate(events, start=1):
        record.events.append(event)
        if event.type in ("done", "failed"):
            record.ends.append((float(at), event))
    return record


def _done(seq: int, text: str) -> Done:
    return Done(session_id=SID, seq=seq, text=text, tokens=2, ttft_s=0.1, tokens_per_s=1.0,
                elapsed_s=1.0)  # fmt: skip


def _token(seq: int, text: str) -> TokenEvent:
    return TokenEvent(session_id=SID, seq=seq, text=text, tokens=1)


def test_a_question_is_judged_on_its_last_attempt_and_its_first_end() -> None:
    start, again = Started(session_id=SID, seq=0, waited_s=0.0), None
    again = Started(session_id=SID, seq=0, waited_s=0.0, attempt=2)
    whole = _record(start, _token(1, "Old"), again, _token(1, "A"), _token(2, " cat"),
                    _done(3, "A cat"))  # fmt: skip
    gap = _record(start, _token(2, " cat"), _done(3, "A cat"))
    failed = Failed(session_id=SID, seq=2, reason="interrupted")
    twice = _record(start, _token(1, "A"), _done(2, "A"), _done(2, "A"))
    judged = [judge(record) for record in (whole, gap, _record(start, failed), _record(), twice)]

    assert [verdict["outcome"] for verdict in judged] == [
        "whole", "not whole", "interrupted", "lost", "whole",
    ]  # fmt: skip
    assert judged[1]["seqs_missing"] == [1] and judged[2]["reason"] == "interrupted"
    assert judged[3]["latency_s"] is None
    assert count_outcomes(judged) == {
        "whole": 2, "not whole": 1, "interrupted": 1, "lost": 1, "duplicated": 1,
    }  # fmt: skip


def test_the_faults_are_drawn_from_the_seed_within_the_questions() -> None:
    config = ChaosConfig(questions=10, node_kills=2, engine_kills=1, bot_restarts=1)
    plan = plan_faults(config)
    assert plan == plan_faults(config)  # the same seed, the same moments
    assert plan != plan_faults(ChaosConfig(questions=10, node_kills=2, seed=2))
    assert sorted(fault.kind for fault in plan) == [
        "bot restart", "engine kill", "node kill", "node kill",
    ]  # fmt: skip
    moments = [fault.after_answers for fault in plan]
    assert moments == sorted(moments) and len(set(moments)) == 4
    assert all(2 <= moment <= 9 for moment in moments)
    assert all(1 <= fault.after_tokens <= config.max_tokens // 2 for fault in plan)
