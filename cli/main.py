"""The ``concierge`` command: one subcommand per role, settings built once here."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker.amqp import BrokerUnavailable
from config.logging import setup_logging
from config.settings import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from engine.worker import Worker

EXIT_CONFIG = 78  # EX_CONFIG
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def engine_command(settings: Settings) -> int:
    from engine.main import run_engine

    stop = asyncio.Event()
    _stop_on_signals(stop)
    await run_engine(settings, stop)
    return 0


async def up_command(settings: Settings) -> int:
    """The engine and every configured adapter in one process (the small-VPS deployment)."""
    from bots.terminal import chat
    from engine.main import run_engine

    stop = asyncio.Event()
    ready: asyncio.Future[Worker] = asyncio.get_running_loop().create_future()
    engine = asyncio.create_task(run_engine(settings, stop, ready=ready))
    await _first_of(ready, engine)
    adapters = _configured_adapters(settings)
    if adapters:
        _stop_on_signals(stop)
        runs = [
            asyncio.create_task(run(adapter_settings(settings, platform), stop))
            for platform, run in adapters
        ]
        await asyncio.gather(engine, *runs)
        return 0
    code = await chat(settings)
    stop.set()
    await engine
    return code


async def _first_of(*aws: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        task.result()  # an engine that failed to start raises here


AdapterRun = Callable[[Settings, asyncio.Event], Awaitable[None]]


def _configured_adapters(settings: Settings) -> list[tuple[str, AdapterRun]]:
    """The platform adapters whose tokens are set, by platform."""
    adapters: list[tuple[str, AdapterRun]] = []
    if settings.discord_token is not None:
        adapters.append(("discord", _run_discord()))
    if settings.slack_bot_token is not None:
        adapters.append(("slack", _run_slack()))
    return adapters


def adapter_settings(settings: Settings, platform: str) -> Settings:
    """One process runs every adapter under ``up``: each needs a reply queue of its own, so a
    stable ``bot_name`` becomes ``<bot_name>-<platform>`` (two consumers on one queue would get
    each other's replies)."""
    if not settings.bot_name:
        return settings
    return settings.model_copy(update={"bot_name": f"{settings.bot_name}-{platform}"})


async def adapter_command(run: AdapterRun, settings: Settings) -> int:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    await run(settings, stop)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="concierge", description="A self-hosted AI concierge for Discord and Slack."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("engine", help="run the engine worker")
    commands.add_parser("up", help="run the engine and every configured adapter")
    commands.add_parser("chat", help="chat with the bot in this terminal")
    commands.add_parser("discord", help="run the Discord bot")
    commands.add_parser("slack", help="run the Slack bot")
    ask = commands.add_parser("ask", help="ask one question, stream the answer to stdout")
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print every reply event as JSON")
    rescrape = commands.add_parser("rescrape", help="rebuild the knowledge base from the site")
    rescrape.add_argument("--json", action="store_true", help="print every reply event as JSON")
    status = commands.add_parser("status", help="queues, consumers, engine health, knowledge base")
    status.add_argument(
        "--engine", action="append", default=[], help="also show this engine's cancel queue"
    )
    status.add_argument("--bot", action="append", default=[], help="also show this bot's queue")
    kb = commands.add_parser("kb", help="inspect the knowledge base")
    kb_commands = kb.add_subparsers(dest="kb_command", required=True)
    kb_commands.add_parser("stats", help="articles, passages, last rescrape, size")
    search = kb_commands.add_parser("search", help="the passages a question would retrieve")
    search.add_argument("words")
    search.add_argument("--limit", type=int, default=5)
    from engine.benchmarks.cli import add_bench_parser

    add_bench_parser(commands)
    return parser


def _dispatch(args: argparse.Namespace, settings: Settings) -> Awaitable[int]:
    """The coroutine that runs ``args.command``; modules load only when their command runs."""
    from bots import terminal

    commands: dict[str, Callable[[], Awaitable[int]]] = {
        "engine": lambda: engine_command(settings),
        "up": lambda: up_command(settings),
        "chat": lambda: terminal.chat(settings),
        "ask": lambda: terminal.ask(settings, args.question, as_json=args.json),
        "rescrape": lambda: terminal.ask(settings, "", as_json=args.json, kind="rescrape"),
        "discord": lambda: adapter_command(_run_discord(), settings),
        "slack": lambda: adapter_command(_run_slack(), settings),
        "kb": lambda: _kb(args, settings),
        "status": lambda: _status(args, settings),
        "bench": lambda: _bench(args, settings),
    }
    return commands[args.command]()


def _run_discord() -> AdapterRun:
    from bots.discord_adapter import run_discord

    return run_discord


def _run_slack() -> AdapterRun:
    from bots.slack_adapter import run_slack

    return run_slack


async def _status(args: argparse.Namespace, settings: Settings) -> int:
    from bots.status import status_command

    return await status_command(settings, engine_names=args.engine, bot_names=args.bot)


async def _bench(args: argparse.Namespace, settings: Settings) -> int:
    from engine.benchmarks.cli import bench_command

    return await bench_command(args, settings)


async def _kb(args: argparse.Namespace, settings: Settings) -> int:
    from bots.kb_commands import kb_search, kb_stats

    if args.kb_command == "stats":
        return kb_stats(settings)
    return kb_search(settings, args.words, args.limit)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"concierge: {error}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(settings.log_level, json_lines=settings.log_json)
    try:
        return asyncio.run(_dispatch(args, settings))
    except BrokerUnavailable as error:
        print(f"concierge: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except ConfigError as error:
        print(f"concierge: {error}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
