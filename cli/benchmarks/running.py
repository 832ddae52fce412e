"""What running a benchmark takes, whichever: its settings from the options, the model loaded
for it, the engine's logs quieted, its document saved. ``command`` (one benchmark) and ``suite``
(all four) both use them."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cli.benchmarks.rig import BenchBackend
    from config.settings import Settings

QUIET_LOGGERS = ("engine", "bots", "broker", "aio_pika", "aiormq")


def progress_printer() -> Any:
    from rich.console import Console

    console = Console(stderr=True)
    return lambda line: console.print(f"[dim]{line}[/dim]", highlight=False, soft_wrap=True)


def with_options(args: argparse.Namespace, settings: Settings) -> Settings:
    from config.settings import ConfigError

    update: dict[str, Any] = {}
    if args.model is not None:
        if not args.model.is_file():
            raise ConfigError(f"--model: no model file at {args.model}")
        update["model_path"] = args.model
    if args.threads is not None:
        update["threads"] = args.threads
    if args.backend is not None:
        update["backend"] = args.backend
    if getattr(args, "phase", None) == "prefill":  # the model's context is fixed when loaded
        from cli.benchmarks.cancel import CancelConfig

        update["context_size"] = max(settings.context_size, CancelConfig.context_size)
    return settings.model_copy(update=update)


async def load_bench_backend(settings: Settings, *, cold: bool, filler_tokens: int) -> BenchBackend:
    from cli.benchmarks.rig import BenchBackend
    from engine.backends.configured import backend_options, model_options
    from engine.backends.llama import LlamaBackend
    from engine.backends.openai.backend import OpenAIBackend
    from engine.backends.openai.options import OpenAIOptions

    inner: LlamaBackend | OpenAIBackend
    options = backend_options(settings)
    if isinstance(options, OpenAIOptions):
        inner = await asyncio.to_thread(OpenAIBackend.connect, options)
    else:
        inner = await asyncio.to_thread(LlamaBackend, model_options(settings))
    return BenchBackend(inner, filler_max_tokens=filler_tokens, cold=cold)


@contextmanager
def quiet(verbose: bool) -> Iterator[None]:
    """The engine logs every request; a benchmark of two hundred does not need them."""
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    if not verbose:
        for logger in loggers:
            logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def save_results(doc: dict[str, Any], path: Path) -> bool:
    """Save the document and say where, on stderr (stdout may be ``--json > file``). The
    results are printed already: a failure costs only the file, so it is one line, not an
    error."""
    from cli.benchmarks import report

    try:
        report.save(doc, path)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        if error.filename is not None and Path(error.filename) in path.parents:
            reason = f"cannot make the directory {error.filename} ({reason})"
        print(f"results not saved to {path}: {reason}", file=sys.stderr)
        return False
    print(f"results saved to {path}", file=sys.stderr)
    return True
