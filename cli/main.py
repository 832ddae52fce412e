"""The ``concierge`` command: one subcommand per role, settings built once here."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import aiohttp

from broker.errors import BrokerUnavailable
from cli.errors import broker_unavailable, platform_unreachable
from cli.eval import add_eval_parser, eval_command
from config.errors import EXIT_UNAVAILABLE, EXIT_USAGE, ConciergeError
from config.logging import setup_logging
from config.removed import warn_of_removed_settings
from config.settings import Settings, load_settings

if TYPE_CHECKING:
    from cli.console.process import ConsoleProcess
    from engine.worker import Worker

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
PLATFORMS = {"discord": "Discord", "slack": "Slack"}  # named when their command cannot connect
CHAT_LOG = Path("concierge.log")  # the log of `concierge up` with the terminal chat


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


async def up_command(settings: Settings, chat_log: Path) -> int:
    """The engine and every configured adapter in one process (the small-VPS deployment);
    with no platform configured, the terminal chat (the log then goes to ``chat_log``). The web
    console, when ``CONCIERGE_WEB_PORT`` is set, is a process of its own beside them."""
    from bots.terminal.chat import chat
    from cli.sample_site import sample_site_note, with_sample_site
    from cli.spaces import terminal_space
    from engine.main import run_engine

    adapters = _configured_adapters(settings)
    sample = None if adapters else with_sample_site(settings)
    settings = sample or settings
    if settings.web_port is not None:  # a refused console address stops the start at once
        from cli.console import check_bind

        check_bind(settings)
    if not adapters:
        print("starting the engine…", file=sys.stderr)
    stop = asyncio.Event()
    ready: asyncio.Future[Worker] = asyncio.get_running_loop().create_future()
    engine = asyncio.create_task(run_engine(settings, stop, ready=ready))
    await _first_of(ready, engine)
    if adapters:  # (the terminal chat takes Ctrl+C itself)
        _stop_on_signals(stop)
    try:
        console = await _start_console(settings, chat_log if not adapters else None)
    except BaseException:
        stop.set()
        await engine
        raise
    try:
        if adapters:
            runs = [
                asyncio.create_task(run(adapter_settings(settings, platform), stop))
                for platform, run in adapters
            ]
            await asyncio.gather(engine, *runs)
            return 0
        note = sample_site_note(settings) if sample is not None else None
        chat_settings, space = terminal_space(settings, None)  # the terminal's, or default
        code = await chat(chat_settings, log_file=chat_log, note=note, space=space)
        stop.set()
        await engine
        return code
    finally:
        if console is not None:
            await console.stop()


async def _start_console(settings: Settings, log_file: Path | None) -> ConsoleProcess | None:
    """The web console's process, serving, when ``CONCIERGE_WEB_PORT`` is set (its log lines
    go to ``log_file`` when given, else to stderr). Raises ``ConsoleFailed``."""
    if settings.web_port is None:
        return None
    from cli.console.process import ConsoleProcess

    log_stream = log_file.open("a", encoding="utf-8") if log_file is not None else sys.stderr
    console = ConsoleProcess(log_stream)
    print(f"web console: {await console.start()}", file=sys.stderr)
    return console


async def web_command(settings: Settings, *, child: bool = False) -> int:
    """``concierge web``: the console alone, until SIGINT or SIGTERM (``child``: run by
    ``concierge up``, until it closes our stdin), at a lower priority than the engine's."""
    from cli.console import web_command as serve
    from cli.console.process import announce_ready, lower_priority, stop_when_stdin_closes

    lower_priority()
    stop = asyncio.Event()
    _stop_on_signals(stop)
    if not child:
        return await serve(settings, stop)
    watching = asyncio.create_task(stop_when_stdin_closes(stop))
    try:
        return await serve(settings, stop, on_ready=announce_ready)
    finally:
        watching.cancel()


async def _first_of(*aws: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        task.result()  # an engine that failed to start raises here


AdapterRun = Callable[[Settings, asyncio.Event], Coroutine[object, object, None]]


def _configured_adapters(settings: Settings) -> list[tuple[str, AdapterRun]]:
    """The platform adapters whose tokens are set, by platform."""
    runs = {"discord": _run_discord, "slack": _run_slack}
    return [(platform, runs[platform]()) for platform in _configured_platforms(settings)]


def _configured_platforms(settings: Settings) -> list[str]:
    tokens = {"discord": settings.discord_token, "slack": settings.slack_bot_token}
    return [platform for platform, token in tokens.items() if token is not None]


def _log_stream(command: str, settings: Settings) -> TextIO | None:
    """Where the log goes: stderr, but under ``up`` with the terminal chat a file, so the
    engine's lines never land in the chat (the chat's banner says where)."""
    if command != "up" or _configured_platforms(settings):
        return None
    return CHAT_LOG.open("a", encoding="utf-8")  # open until the process ends


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
    parser.add_argument(
        "--version", action="version", version=f"concierge {_version()}", help="print the version"
    )
    parser.set_defaults(show_help=parser.print_help)
    commands = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", help="what to run"
    )
    commands.add_parser("engine", help="run the engine worker")
    commands.add_parser("up", help="run the engine and every configured adapter")
    chat = commands.add_parser("chat", help="chat with the bot in this terminal")
    commands.add_parser("discord", help="run the Discord bot")
    commands.add_parser("slack", help="run the Slack bot")
    ask = commands.add_parser("ask", help="ask one question, stream the answer to stdout")
    ask.add_argument("question", help="the question (quote it)")
    ask.add_argument("--json", action="store_true", help="print every reply event as JSON")
    rescrape = commands.add_parser("rescrape", help="rebuild the knowledge base from the site")
    rescrape.add_argument("--json", action="store_true", help="print every reply event as JSON")
    for in_space in (chat, ask, rescrape):
        in_space.add_argument("--space", help="the space (docs/spaces.md); default: the terminal's")
    web = commands.add_parser(
        "web",
        help="the web console: the queue live, stop and rescrape for admins, the cancel demo "
        "(at CONCIERGE_WEB_HOST:CONCIERGE_WEB_PORT, default 127.0.0.1:8780)",
    )
    web.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # run by `up`
    status = commands.add_parser("status", help="queues, consumers, engine health, knowledge base")
    status.add_argument(
        "--engine", action="append", default=[], help="also show this engine's cancel queue"
    )
    status.add_argument("--bot", action="append", default=[], help="also show this bot's queue")
    kb = commands.add_parser("kb", help="inspect the knowledge base")
    kb.set_defaults(show_help=kb.print_help)
    kb_commands = kb.add_subparsers(
        title="commands", dest="kb_command", metavar="KB_COMMAND", help="what to show"
    )
    stats = kb_commands.add_parser("stats", help="articles, passages, last rescrape, size")
    search = kb_commands.add_parser("search", help="the passages a question would retrieve")
    search.add_argument("words", help="the question or words to look up")
    search.add_argument("--limit", type=int, default=5, help="at most this many passages")
    for kb_command in (stats, search):
        kb_command.add_argument("--json", action="store_true", help="print one JSON document")
        kb_command.add_argument("--space", help="the space's knowledge base (docs/spaces.md)")
    from cli.benchmarks.command import add_bench_parser

    add_bench_parser(commands)
    add_eval_parser(commands)
    return parser


def _dispatch(args: argparse.Namespace, settings: Settings) -> Coroutine[object, object, int]:
    """The coroutine that runs ``args.command``; modules load only when their command runs."""
    commands: dict[str, Callable[[], Coroutine[object, object, int]]] = {
        "engine": lambda: engine_command(settings),
        "up": lambda: up_command(settings, CHAT_LOG.resolve()),
        "chat": lambda: _terminal(args, settings),
        "ask": lambda: _terminal(args, settings),
        "rescrape": lambda: _terminal(args, settings),
        "discord": lambda: adapter_command(_run_discord(), settings),
        "slack": lambda: adapter_command(_run_slack(), settings),
        "kb": lambda: _kb(args, settings),
        "status": lambda: _status(args, settings),
        "bench": lambda: _bench(args, settings),
        "eval": lambda: eval_command(args, settings),
        "web": lambda: web_command(settings, child=args.child),
    }
    return commands[args.command]()


async def _terminal(args: argparse.Namespace, settings: Settings) -> int:
    """``chat``, ``ask`` and ``rescrape``: the terminal client, in the space it asks in."""
    from bots.terminal import chat as terminal
    from cli.spaces import terminal_space

    settings, space = terminal_space(settings, args.space)
    if args.command == "chat":
        return await terminal.chat(settings, space=space)
    if args.command == "rescrape":
        return await terminal.ask(settings, "", as_json=args.json, kind="rescrape", space=space)
    return await terminal.ask(settings, args.question, as_json=args.json, space=space)


def _run_discord() -> AdapterRun:
    from bots.discord.app import run_discord

    return run_discord


def _run_slack() -> AdapterRun:
    from bots.slack.app import run_slack

    return run_slack


async def _status(args: argparse.Namespace, settings: Settings) -> int:
    from cli.status import status_command

    return await status_command(settings, engine_names=args.engine, bot_names=args.bot)


async def _bench(args: argparse.Namespace, settings: Settings) -> int:
    from cli.benchmarks.command import bench_command

    return await bench_command(args, settings)


async def _kb(args: argparse.Namespace, settings: Settings) -> int:
    from cli.kb import kb_search, kb_stats
    from cli.spaces import named_space

    settings = named_space(settings, args.space).settings  # its knowledge base
    if args.kb_command == "stats":
        return kb_stats(settings, as_json=args.json)
    return kb_search(settings, args.words, args.limit, as_json=args.json)


def _version() -> str:
    try:
        return version("concierge")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def _fail(message: str, code: int) -> int:
    print(f"concierge: {message}", file=sys.stderr)
    return code


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a command whose reader left


def main(argv: list[str] | None = None) -> int:
    """Run the command; an error of ours ends it with its class's one line and exit code."""
    args = build_parser().parse_args(argv)
    if args.command is None or (args.command == "kb" and args.kb_command is None):
        args.show_help()
        return EXIT_USAGE
    try:
        return _run(args)
    except BrokerUnavailable as error:  # its cause is aiormq's, read in cli/errors.py
        return _fail(broker_unavailable(error), error.exit_code)
    except ConciergeError as error:
        return _fail(error.user_message, error.exit_code)
    except aiohttp.ClientConnectorError as error:  # from inside discord.py or slack-sdk
        return _fail(platform_unreachable(error, PLATFORMS.get(args.command)), EXIT_UNAVAILABLE)
    except KeyboardInterrupt:  # Ctrl+C before a command took it over (connecting): no traceback
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `concierge ask ... | head -n 1`: the reader has what it wanted
        # Python's own advice: point stdout at /dev/null, so the flush at exit cannot fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _run(args: argparse.Namespace) -> int:
    """Settings, logging, the command: inside ``main``'s one ``try``, so a bad setting ends
    the same way as a failure in the command (``ConfigError``: its line, exit 78)."""
    settings = load_settings()
    setup_logging(
        settings.log_level,
        json_lines=settings.log_json,
        stream=_log_stream(args.command, settings),
    )
    warn_of_removed_settings()
    return asyncio.run(_dispatch(args, settings))


if __name__ == "__main__":
    sys.exit(main())
