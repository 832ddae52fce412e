"""``concierge eval FILE.jsonl [--json]``: every question of a file through the running engine,
each answer judged, then a table or one JSON document (docs/quality.md).

Exit 0 once every question has an answer (right or wrong), 2 for a questions file it cannot
use, 69 when no engine takes requests (said at once, not after a timeout). This module is
only the command line: ``cli/eval_run.py`` (asking, loaded when the command runs) and
``cli/eval_scoring.py`` (the file format and the verdicts) do the work.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from config.settings import Settings


def add_eval_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``eval`` on the ``concierge`` command line."""
    parser = commands.add_parser("eval", help="ask every question of a JSONL file, judge them")
    parser.add_argument("file", type=Path, help="one question per line (docs/quality.md)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


async def eval_command(args: argparse.Namespace, settings: Settings) -> int:
    from cli.eval_run import run_eval

    return await run_eval(settings, args.file, as_json=args.json)
