"""``concierge bench chaos``: answers through faults, against the same questions without them.

On a local three-node cluster of its own (quorum queues), one engine process answers N
questions from M askers (named bots, each asking its next question once the last ended). The
questions are asked twice, on fresh queues each time: first with no fault, then while the
benchmark kills a broker node (the one the engine is connected to) and starts it again,
SIGKILLs the engine and starts another, and restarts a bot, each at a moment drawn from
``--seed``: once so many answers have begun, when the answer in flight has shown so many
tokens. Each question is judged from what its asker was handed (``judge``), and the latency
(asked to end) compared with the run without faults.

A fault that never struck an answer in flight (the questions ran out first, say), or a run
without faults that did not answer every question whole, measures nothing: no figure then.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from cli.benchmarks.chaos_askers import (
    Board,
    Bot,
    Record,
    count_outcomes,
    judge,
    print_report,
    summary,
)
from cli.benchmarks.chaos_rig import (
    CLUSTER_SCRIPT,
    ChaosRig,
    ClusterNodes,
    engine_log_counts,
    logs_in,
)
from cli.benchmarks.rig import Progress, document, summarize
from cli.benchmarks.validity import count_reasons, refusal
from config.settings import ConfigError, Settings

QUIET_S = 5.0  # after the last end, a second end of some answer still counts as shown
RUN_LIMIT_S = 24 * 3600.0  # a fault waits for its moment as long as the questions last
ANIMALS = ("cat", "fox", "owl", "whale", "tortoise", "parrot", "otter", "goat", "bee", "crow")
PLACES = ("Paris", "the Moon", "a library", "the sea", "a volcano", "Tokyo", "a forest")


@dataclass(frozen=True)
class ChaosConfig:
    questions: int = 40  # the defaults of the command's options
    askers: int = 8
    seed: int = 1
    node_kills: int = 1
    engine_kills: int = 1
    bot_restarts: int = 1
    max_tokens: int = 32

    @property
    def faults(self) -> int:
        return self.node_kills + self.engine_kills + self.bot_restarts


FaultKind = Literal["node kill", "engine kill", "bot restart"]


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    number: int
    after_answers: int  # strikes once this many answers have begun...
    after_tokens: int  # ...when the answer in flight has shown this many tokens


def plan_faults(config: ChaosConfig) -> list[Fault]:
    """The faults in the order they strike, each at a seeded moment of its own."""
    rng = random.Random(config.seed)
    counts: dict[FaultKind, int] = {
        "node kill": config.node_kills,
        "engine kill": config.engine_kills,
        "bot restart": config.bot_restarts,
    }
    kinds = [kind for kind, count in counts.items() for _ in range(count)]
    rng.shuffle(kinds)
    positions = sorted(rng.sample(range(1, config.questions - 1), len(kinds)))
    numbers: dict[FaultKind, int] = {}
    plan = []
    for kind, position in zip(kinds, positions, strict=True):
        numbers[kind] = numbers.get(kind, 0) + 1
        tokens = rng.randint(1, max(1, config.max_tokens // 2))
        plan.append(Fault(kind, numbers[kind], position + 1, tokens))
    return plan


def questions(config: ChaosConfig) -> list[Record]:
    """The same questions for both runs; asker ``a`` asks every ``askers``-th, in order."""
    return [
        Record(
            index,
            index % config.askers,
            f"Question {index}: write a short story about a "
            f"{ANIMALS[index % len(ANIMALS)]} who visits {PLACES[index % len(PLACES)]}.",
        )
        for index in range(config.questions)
    ]


async def strike(fault: Fault, rig: ChaosRig, board: Board, bots: list[Bot]) -> dict[str, Any]:
    """Wait for the fault's moment and strike; what it took down comes back (a node in the
    background, the next node kill waiting for it: one node down at a time)."""
    result: dict[str, Any] = {"fault": f"{fault.kind} {fault.number}", **asdict(fault)}
    if fault.kind == "node kill":
        await rig.node_back()  # before the moment, so the strike is not late for it

    def moment() -> bool:
        begun = sum(record.started for record in board.records)
        return begun >= fault.after_answers and any(
            record.tokens >= fault.after_tokens for record in board.in_flight()
        )

    await board.until(lambda: board.finished or moment(), timeout_s=RUN_LIMIT_S)
    if not moment():
        return {**result, "missed": f"{result['fault']}: the questions ran out before it"}
    record = max(board.in_flight(), key=lambda each: each.tokens)
    result.update(question=record.index, struck_at_s=time.monotonic() - board.began)
    if fault.kind == "node kill":
        node = rig.engine_node
        result.update(await _kill_node(rig, node, record))
        rig.node_down(node, result, board.began)  # back_at_s once it runs again
    elif fault.kind == "engine kill":
        result.update(await _kill_engine(rig, record))
    else:
        bot = bots[record.asker]
        in_flight = await bot.restart(record)
        result.update(what=bot.bot_id, verified=True, answer_in_flight=in_flight)
        result["refused_starts"] = bot.refused_starts  # the broker still counted the old one
    if fault.kind != "node kill":
        result["back_at_s"] = time.monotonic() - board.began
    result["missed"] = fault_missed(result)
    return result


async def _kill_node(rig: ChaosRig, node: int, record: Record) -> dict[str, Any]:
    """SIGKILL the node the engine is on (its addresses' order says which)."""
    group = rig.nodes.kill(node)
    in_flight = not record.ended
    gone = await rig.nodes.gone(node, group)
    return {"what": f"node {node}", "verified": gone, "answer_in_flight": in_flight}


async def _kill_engine(rig: ChaosRig, record: Record) -> dict[str, Any]:
    """SIGKILL the engine process, then start another (its startup purge keeps the request)."""
    assert rig.engine is not None
    rig.engine.kill_now()
    in_flight = not record.ended
    status = await rig.engine.kill()
    await rig.start_engine("chaos")
    return {"what": f"exit {status}", "verified": status == -9, "answer_in_flight": in_flight}


def fault_missed(result: dict[str, Any]) -> str | None:
    """Why a fault that struck measures nothing, or None."""
    if not result.get("verified"):
        return f"{result['fault']}: it did not happen as planned ({result['what']})"
    if not result.get("answer_in_flight"):
        return f"{result['fault']}: no answer was in flight when it struck"
    return None


async def run_phase(
    rig: ChaosRig, config: ChaosConfig, faults: list[Fault], progress: Progress
) -> dict[str, Any]:
    """Every question once, through ``faults``; each judged, and the faults' reports."""
    phase = "chaos" if faults else "baseline"
    rig.prefix = f"chaos-{uuid.uuid4().hex[:12]}"
    board = Board(questions(config))
    await rig.start_engine(phase)
    bots = [
        await Bot(rig.bot_settings(a), f"chaos-bot-{a}", board).start()
        for a in range(config.askers)
    ]
    board.began = board.last_event_at = began = time.monotonic()
    try:
        striking = asyncio.ensure_future(_strike_all(faults, rig, board, bots, progress))
        asking = asyncio.gather(*(_ask_all(bots[a], board, a) for a in range(config.askers)))
        both: list[asyncio.Future[Any]] = [striking, asking]
        await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)  # a fault left waits on
        if striking.done() and striking.exception() is not None:
            asking.cancel()  # a fault that failed to strike ends the run at once
            await striking
        await asking
        board.finished = True
        board.changed()
        struck = await striking
        await rig.node_back()
        await board.until(lambda: False, QUIET_S)  # a second end still coming counts
    finally:
        striking.cancel()
        await rig.node_back()  # every node runs again before the next run
        for bot in bots:
            await bot.close()
        if rig.engine is not None:
            await rig.engine.stop()
        await rig.delete_queues([bot.bot_id for bot in bots])
    judged = [judge(record) for record in board.records]
    counts = count_outcomes(judged)
    missed = [result["missed"] for result in struck if result["missed"]]
    if not faults and (counts["whole"] != config.questions or counts["duplicated"]):
        missed.insert(0, "the run without faults did not answer every question whole, once")
    progress(f"{phase}: {counts} in {time.monotonic() - began:.0f} s")
    return {
        "phase": phase,
        "duration_s": time.monotonic() - began,
        "counts": counts,
        "latency_s": summarize([each["latency_s"] for each in judged]),
        "faults": struck,
        "problems": [each for each in judged if each["outcome"] != "whole" or each["ends"] > 1],
        "engine_log": engine_log_counts(rig.folder, phase),
        "missed": "; ".join(missed) or None,
    }


async def _ask_all(bot: Bot, board: Board, asker: int) -> None:
    for record in board.records:
        if record.asker == asker:
            await bot.ask(record)
            await board.settled(record)


async def _strike_all(
    faults: list[Fault], rig: ChaosRig, board: Board, bots: list[Bot], progress: Progress
) -> list[dict[str, Any]]:
    struck = []
    for fault in faults:
        result = await strike(fault, rig, board, bots)
        if "struck_at_s" in result:
            progress(
                f"{result['fault']}: {result['what']} at {result['struck_at_s']:.1f} s, "
                f"question {result['question']} in flight"
            )
        struck.append(result)
    return struck


async def run_chaos(
    settings: Settings, config: ChaosConfig, nodes: ClusterNodes, folder: Path, progress: Progress
) -> dict[str, Any]:
    """The run without faults, then the run with them; the summary only if both are valid."""
    started = time.time()
    doc = document("chaos", settings, asdict(config), started)
    rig = ChaosRig(settings.model_copy(update={"max_tokens": config.max_tokens}), nodes, folder)
    faults = plan_faults(config)
    doc["plan"] = [asdict(fault) for fault in faults]
    progress(f"without faults: {config.questions} questions from {config.askers} askers")
    baseline = await run_phase(rig, config, [], progress)
    progress(f"with faults: {', '.join(f'{f.kind} {f.number}' for f in faults)}")
    chaos = await run_phase(rig, config, faults, progress)
    doc["runs"] = [baseline, chaos]
    doc["invalid_runs"] = count_reasons(run["missed"] for run in doc["runs"])
    doc["summary"] = None if doc["invalid_runs"] else summary(baseline, chaos)
    doc["duration_s"] = time.time() - started
    return doc


def chaos_config(args: argparse.Namespace) -> ChaosConfig:
    config = ChaosConfig(
        args.questions,
        args.askers,
        args.seed,
        args.node_kills,
        args.engine_kills,
        args.bot_restarts,
        args.max_tokens,
    )
    if config.questions < config.faults + 2:
        raise ConfigError("-n: at least two more questions than faults")
    if config.askers > config.questions:
        raise ConfigError("--askers: more askers than questions")
    return config


async def chaos_command(
    args: argparse.Namespace, settings: Settings, nodes: ClusterNodes | None = None
) -> int:
    """Run it on ``nodes``, or on a cluster of its own started and stopped here; print the
    table (or ``--json``), or why there is no figure (exit 1)."""
    from cli.benchmarks import report
    from cli.benchmarks.running import progress_printer

    config, progress = chaos_config(args), progress_printer()
    with tempfile.TemporaryDirectory(prefix="concierge-chaos-") as scratch:
        folder = args.logs or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        own = nodes is None
        nodes = nodes or await _own_cluster(Path(scratch) / "cluster", progress)
        try:
            with logs_in(folder / "bots.log"):
                doc = await run_chaos(settings, config, nodes, folder, progress)
            if args.logs is not None:  # the document beside the logs that explain it
                report.save(doc, folder / "chaos.json")
        finally:
            if own:
                await nodes.script("stop")
    if args.json:
        print(report.to_json(doc))
    if doc["invalid_runs"]:
        print(refusal(doc), file=sys.stderr)
        return 1
    if not args.json:
        print_report(doc)
    return 0


async def _own_cluster(folder: Path, progress: Progress) -> ClusterNodes:
    import shutil

    if shutil.which("rabbitmq-server") is None or not CLUSTER_SCRIPT.is_file():
        raise ConfigError("bench chaos: needs RabbitMQ installed and scripts/cluster.sh")
    nodes = ClusterNodes.own(folder)
    progress(f"starting three RabbitMQ nodes on 127.0.0.1:{nodes.base_port}-{nodes.base_port + 2}")
    try:
        await nodes.script("start")
    except BaseException:
        await nodes.script("stop")
        raise
    return nodes
