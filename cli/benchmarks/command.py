"""``concierge bench {cancel,stream,queue,conversation,queue-types,chaos,all}``: options,
running one benchmark, showing it.

Kept light to import (argparse only at the top): ``cli.main`` builds its parser from here.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.benchmarks.running import (
    load_bench_backend,
    progress_printer,
    quiet,
    save_results,
    with_options,
)
from cli.benchmarks.suite import add_all_parser

if TYPE_CHECKING:
    from cli.benchmarks.cancel import CancelConfig
    from cli.benchmarks.rig import BenchBackend
    from config.settings import Settings


def _depths(text: str) -> tuple[int, ...]:
    try:
        depths = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text}") from None
    if not depths or min(depths) < 0:
        raise argparse.ArgumentTypeError("depths must be integers >= 0")
    return depths


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the configured model)")
    parser.add_argument("--threads", type=_positive, help="llama.cpp threads (default: settings)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="draw the result")
    parser.add_argument("--verbose", action="store_true", help="keep the engine's logs")
    parser.add_argument(
        "--backend",
        choices=("llama", "openai"),
        help="the model in process, or the server at CONCIERGE_OPENAI_BASE_URL (default: settings)",
    )


def add_bench_parser(subcommands: Any) -> argparse.ArgumentParser:
    """Add ``bench`` and its benchmarks to the ``concierge`` subcommands."""
    bench: argparse.ArgumentParser = subcommands.add_parser(
        "bench",
        help="measure cancels, streaming, the queue and follow-ups (real broker and model)",
    )
    kinds = bench.add_subparsers(dest="benchmark", required=True, help="which benchmark")

    cancel = kinds.add_parser("cancel", help="stop time: cancel queue against request queue")
    cancel.add_argument(
        "--phase", choices=("decode", "prefill"), default="decode", help="when the cancel arrives"
    )
    cancel.add_argument("--depths", type=_depths, help="queue depths (default 0,1,5,10,50)")
    cancel.add_argument("--repeat", type=_positive, help="runs per mode and depth")
    cancel.add_argument("--max-tokens", type=_positive, help="the running answer's limit")
    cancel.add_argument(
        "--tokens-before-cancel", type=_positive, default=8, help="decode: cancel after these"
    )
    cancel.add_argument("--filler-tokens", type=_positive, default=8, help="queued answers' limit")
    cancel.add_argument("--prompt-tokens", type=_positive, default=1800, help="prefill prompt")
    cancel.add_argument("--cancel-after", type=float, help="prefill: seconds after Started")
    _common(cancel)

    stream = kinds.add_parser("stream", help="tokens/s: llama.cpp in process against pipeline")
    stream.add_argument("--repeat", type=_positive, default=3, help="pairs per prompt")
    stream.add_argument("--max-tokens", type=_positive, default=128, help="each answer's limit")
    stream.add_argument("--prompts", type=_positive, default=3, help="distinct prompts (1-3+)")
    _common(stream)

    queue = kinds.add_parser("queue", help="a burst of requests; cancelled_sessions bounded")
    queue.add_argument("-n", "--requests", type=_positive, default=200, help="requests sent")
    queue.add_argument("--max-tokens", type=_positive, default=8, help="each answer's limit")
    queue.add_argument("--bots", type=_positive, default=4, help="bot clients asking")
    queue.add_argument("--ttl", type=float, default=900.0, help="request time to live, s")
    queue.add_argument(
        "--cancels-published", type=int, default=5_000, help="cancels sent through the broker"
    )
    queue.add_argument(
        "--cancels-added", type=int, default=100_000, help="added straight to cancelled_sessions"
    )
    _common(queue)

    chat = kinds.add_parser("conversation", help="a follow-up's first token, state cache or not")
    chat.add_argument("--turns", type=_turns, default=8, help="the conversation's turns (1-8)")
    chat.add_argument(
        "--interleave", type=_count, default=2, help="other questions before each measured turn"
    )
    chat.add_argument("--max-tokens", type=_positive, default=64, help="each answer's limit")
    chat.add_argument("--repeat", type=_positive, default=1, help="the whole conversation")
    chat.add_argument(
        "--no-warm", dest="warm", action="store_false", help="no reading ahead while idle"
    )
    _common(chat)

    types = kinds.add_parser("queue-types", help="classic against quorum queues: latency, memory")
    types.add_argument("-n", "--messages", type=_positive, default=10_000, help="per round")
    types.add_argument("--latency-samples", type=_positive, default=500, help="one at a time")
    types.add_argument("--repeat", type=_positive, default=3, help="rounds per queue type")
    types.add_argument(
        "--ctl",
        default="rabbitmqctl",
        help="reaches the broker's node (rabbitmqctl, or 'scripts/cluster.sh ctl 1')",
    )
    types.add_argument("--json", action="store_true", help="print one JSON document instead")
    _chaos_parser(kinds)
    add_all_parser(kinds, _positive)
    return bench


def _chaos_parser(kinds: Any) -> None:
    chaos = kinds.add_parser(
        "chaos", help="answers through node kills, engine kills and bot restarts (a local cluster)"
    )
    chaos.add_argument("-n", "--questions", type=_positive, default=40, help="questions asked")
    chaos.add_argument("--askers", type=_positive, default=8, help="named bots asking at once")
    chaos.add_argument("--seed", type=int, default=1, help="draws the faults' moments")
    chaos.add_argument("--node-kills", type=_count, default=1, help="broker nodes SIGKILLed")
    chaos.add_argument("--engine-kills", type=_count, default=1, help="engines SIGKILLed")
    chaos.add_argument("--bot-restarts", type=_count, default=1, help="bots restarted")
    chaos.add_argument("--max-tokens", type=_positive, default=32, help="each answer's limit")
    chaos.add_argument("--logs", type=Path, help="keep the engines' and bots' logs here")
    chaos.add_argument("--json", action="store_true", help="print one JSON document instead")


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def _turns(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 8:
        raise argparse.ArgumentTypeError("must be 1 to 8 (the conversation has eight turns)")
    return value


@dataclass(frozen=True)
class PhaseDefaults:
    depths: tuple[int, ...]
    repeat: int
    max_tokens: int


# Defaults that differ by phase: a decoding answer must outlast the cancel; a prefill run in
# the request queue sits through the whole prompt, so it is run fewer times and kept short.
PHASE_DEFAULTS = {
    "decode": PhaseDefaults(depths=(0, 1, 5, 10, 50), repeat=3, max_tokens=160),
    "prefill": PhaseDefaults(depths=(0, 5, 50), repeat=1, max_tokens=16),
}


def cancel_config(args: argparse.Namespace) -> CancelConfig:
    from cli.benchmarks.cancel import CancelConfig

    defaults = PHASE_DEFAULTS[args.phase]
    return CancelConfig(
        phase=args.phase,
        depths=args.depths or defaults.depths,
        repeat=args.repeat or defaults.repeat,
        max_tokens=args.max_tokens or defaults.max_tokens,
        tokens_before_cancel=args.tokens_before_cancel,
        filler_max_tokens=args.filler_tokens,
        prompt_tokens=args.prompt_tokens,
        cancel_after_s=args.cancel_after,
    )


async def run_benchmark(
    args: argparse.Namespace, settings: Settings, backend: BenchBackend
) -> dict[str, Any]:
    from cli.benchmarks import cancel, conversation, queue, stream

    progress = progress_printer()
    match args.benchmark:
        case "cancel":
            return await cancel.run_cancel(settings, backend, cancel_config(args), progress)
        case "stream":
            config = stream.StreamConfig(args.repeat, args.max_tokens, args.prompts)
            return await stream.run_stream(settings, backend, config, progress)
        case "queue":
            queue_config = queue.QueueConfig(
                args.requests,
                args.max_tokens,
                args.bots,
                args.ttl,
                args.cancels_published,
                args.cancels_added,
            )
            return await queue.run_queue(settings, backend, queue_config, progress)
        case "conversation":
            chat = conversation.ConversationConfig(
                turns=args.turns,
                interleave=args.interleave,
                repeat=args.repeat,
                max_tokens=args.max_tokens,
                warm=args.warm,
            )
            return await conversation.run_conversation(settings, backend, chat, progress)
    raise AssertionError(args.benchmark)


async def bench_command(args: argparse.Namespace, settings: Settings) -> int:
    """Run the chosen benchmark; print a table (or ``--json``) and draw ``--plot``; ``cancel``
    also saves its document where the web console's chart reads it."""
    from rich.console import Console

    from cli.benchmarks import report
    from cli.benchmarks.validity import refusal
    from config.settings import ConfigError

    if args.benchmark == "all":  # the four, one after another: cli/benchmarks/suite.py
        from cli.benchmarks.suite import all_command

        return await all_command(args, settings)
    if args.benchmark == "queue-types":  # the broker alone: no model to load
        return await _queue_types(args, settings)
    if args.benchmark == "chaos":  # a cluster of its own, the engine a process of its own
        from cli.benchmarks.chaos import chaos_command

        return await chaos_command(args, settings)
    if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
        raise ConfigError("--plot: needs matplotlib (pip install 'concierge[plot]')")
    settings = with_options(args, settings)
    filler_tokens = getattr(args, "filler_tokens", 8)
    # the queue and conversation benchmarks measure the engine as deployed (its caches too)
    cold = args.benchmark not in ("queue", "conversation")
    with quiet(args.verbose):
        backend = await load_bench_backend(settings, cold=cold, filler_tokens=filler_tokens)
        doc = await run_benchmark(args, settings, backend)
    if args.json:
        print(report.to_json(doc))
    if doc.get("invalid_runs"):
        print(refusal(doc), file=sys.stderr)
        return 1
    if not args.json:
        report.print_report(doc, Console())
    if args.benchmark == "cancel":
        from cli.benchmarks.cancel import results_path

        save_results(doc, results_path(settings, args.phase))
    if args.plot is not None:
        report.plot(doc, args.plot)
    return 0


async def _queue_types(args: argparse.Namespace, settings: Settings) -> int:
    from cli.benchmarks.queue_types import QueueTypesConfig, print_report, run_queue_types
    from config.settings import ConfigError

    if args.latency_samples > args.messages:
        raise ConfigError("--latency-samples: more than --messages")
    config = QueueTypesConfig(args.messages, args.latency_samples, args.repeat, args.ctl)
    with quiet(verbose=False):
        doc = await run_queue_types(settings, config, progress_printer())
    print_report(doc, as_json=args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run without the ``concierge`` wiring: ``python -m cli.benchmarks.command cancel ...``."""
    from config.logging import setup_logging
    from config.settings import load_settings

    parser = argparse.ArgumentParser(prog="concierge")
    add_bench_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", *(argv if argv is not None else sys.argv[1:])])
    settings = load_settings()
    setup_logging(settings.log_level, json_lines=settings.log_json)
    return asyncio.run(bench_command(args, settings))


if __name__ == "__main__":
    sys.exit(main())
