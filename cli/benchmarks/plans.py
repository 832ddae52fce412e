"""What the engine would decide for each question of an eval file, without the model:
``python -m cli.benchmarks.plans QUESTIONS.jsonl [--site DIR] [--kb KB.sqlite3] [--show]``.

The answering pipeline decides most of an answer before the model runs: on the site or not,
which page, which quote (``engine/answering/pipeline.py``). This runs that decision for every
question in seconds, so a change to retrieval or the on-site rule can be judged on a whole
eval file before the minutes a ``concierge eval`` run takes. It builds the knowledge base
from ``--site`` (default: the questions file's ``site/`` folder, served on a free local port
and read through its sitemap, as ``scripts/eval.sh`` does) unless ``--kb`` names one.

A plan is **right** when an answerable question is planned on the site citing only its page
(``expect_source``) and a ``not_on_site`` one is planned "not on the site". **Quote right**:
the quote shown after the answer holds one of ``expect_any``, which is what the asker reads
even when the model garbles it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.server
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.protocol import HistoryTurn, Request, new_session_id
from config.settings import Settings
from engine.answering.pipeline import AnswerPlanner, Plan
from engine.knowledge.scrape.rescrape import rescrape


@dataclass(frozen=True)
class Judged:
    """One question's plan, judged."""

    id: str
    kind: str  # the id's prefix: direct, para, ja, trap...
    step: str
    sources: tuple[str, ...]
    right: bool
    quote_right: bool | None  # None for a not_on_site question
    quote: str


def judge(line: dict[str, object], plan: Plan) -> Judged:
    expect_source = line.get("expect_source")
    quote = plan.evidence.quote if plan.evidence is not None else ""
    if line.get("not_on_site"):
        right, quote_right = plan.step == "not_on_site", None
    else:
        on_site = plan.step in ("model", "quote_only")
        cites_it = not expect_source or (
            bool(plan.sources) and all(str(expect_source) in url for url in plan.sources)
        )
        right = on_site and cites_it
        expected = [str(text).lower() for text in line.get("expect_any", [])]  # type: ignore[attr-defined]
        quote_right = on_site and any(text in quote.lower() for text in expected)
    return Judged(
        id=str(line["id"]),
        kind=str(line["id"]).split("-", 1)[0],
        step=plan.step,
        sources=plan.sources,
        right=right,
        quote_right=quote_right,
        quote=quote,
    )


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """``folder`` on a free local port, as scripts/eval.sh serves a site."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Not one line per page on stderr."""


def build(site: Path, kb_path: Path) -> None:
    with served(site) as base:
        settings = Settings(kb_path=kb_path, site_sitemap_url=f"{base}/sitemap.xml")
        result = asyncio.run(rescrape(settings, lambda progress: None, lambda: False))
    print(f"built {kb_path}: {result.articles} articles, {result.passages} passages")


def asked(question: str, history: Sequence[HistoryTurn] = ()) -> Request:
    now = time.time()
    return Request(session_id=new_session_id(), user_id="plans", question=question,
                   reply_to="plans", sent_at=now, deadline=now + 60,
                   history=tuple(history))  # fmt: skip


def plan_line(planner: AnswerPlanner, line: dict[str, Any]) -> Plan:
    """The plan for a line's question, after its ``before`` questions asked in turn, each
    with the ones before it; an earlier answer is its plan's quote (or the engine's note),
    what the asker would read of it without the model's words."""
    history: list[HistoryTurn] = []
    for earlier in line.get("before", []):
        plan = planner.plan(asked(str(earlier), history))
        answer = plan.evidence.quote if plan.evidence is not None else plan.note
        history += [HistoryTurn(role="user", text=str(earlier)),
                    HistoryTurn(role="assistant", text=answer or "…")]  # fmt: skip
    return planner.plan(asked(str(line["question"]), history))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m cli.benchmarks.plans")
    parser.add_argument("questions", type=Path)
    parser.add_argument("--site", type=Path, help="default: the questions file's site/ folder")
    parser.add_argument(
        "--kb",
        type=Path,
        default=Path("plans-kb.sqlite3"),
        help="the knowledge base, built if missing (default: %(default)s)",
    )
    parser.add_argument("--show", action="store_true", help="one line per question")
    args = parser.parse_args()
    lines = [json.loads(text) for text in args.questions.read_text().splitlines() if text]
    if not args.kb.exists():
        build(args.site or args.questions.parent / "site", args.kb)
    planner = AnswerPlanner(Settings(kb_path=args.kb), lambda text: len(text) // 4 + 1)
    judged = [judge(line, plan_line(planner, line)) for line in lines]
    if args.show:
        for item in judged:
            mark = "ok " if item.right else "-- "
            quote = "" if item.quote_right is None else ("Q+ " if item.quote_right else "Q- ")
            print(f"{mark}{quote}{item.id:32} {item.step:12} {' '.join(item.sources)[:90]}")
    kinds, right, quotes = Counter[str](), Counter[str](), Counter[str]()
    for item in judged:
        kinds[item.kind] += 1
        right[item.kind] += item.right
        quotes[item.kind] += bool(item.quote_right)
    for kind in kinds:
        print(f"{kind:8} plan right {right[kind]:3}/{kinds[kind]:<3} quote right {quotes[kind]:3}")
    print(f"{'all':8} plan right {sum(right.values()):3}/{len(judged):<3} "
          f"quote right {sum(quotes.values()):3}")  # fmt: skip


if __name__ == "__main__":
    main()
