"""``concierge eval FILE.jsonl [--space NAME] [--other-site] [--first N] [--json]``: every
question of a file through the running engine, each answer judged, then a table or one JSON
document (docs/quality.md; in a space and its leaks: docs/spaces.md).

Exit 0 once every question has an answer (right or wrong, leaked or not: the report says),
2 for a questions file it cannot use or a space the spaces file does not have, 69 when no
engine takes requests (said at once, not after a timeout). This module is only the command
line: ``cli/eval_run.py`` (asking, loaded when the command runs), ``cli/eval_scoring.py`` (the
file format and the verdicts) and ``cli/eval_site.py`` (a space's site) do the work.
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
    parser.add_argument(
        "--space",
        help="ask in this space (docs/spaces.md); an answer citing an address off its site is "
        "a leak; default: the terminal's space",
    )
    parser.add_argument(
        "--other-site",
        action="store_true",
        help="the file's questions are another site's: each right answer is 'not on the site'",
    )
    parser.add_argument(
        "--first", type=_positive, metavar="N", help="only the file's first N questions"
    )


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least 1")
    return number


async def eval_command(args: argparse.Namespace, settings: Settings) -> int:
    from cli.eval_run import EvalOptions, run_eval

    options = EvalOptions(space=args.space, other_site=args.other_site, first=args.first)
    return await run_eval(settings, args.file, as_json=args.json, options=options)
