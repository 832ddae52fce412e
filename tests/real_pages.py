"""A planner over real documentation pages of an eval site (``eval/<site>/site``), read as a
rescrape reads them, for the tests of what the engine plans on those pages."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from broker.protocol import make_request
from config.settings import Settings
from engine.answering.pipeline import AnswerPlanner, Plan
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.scrape.extract import extract_article

BASE = "http://docs.example"


def planner_on_pages(kb_path: Path, site: Path, pages: Sequence[str]) -> AnswerPlanner:
    """A knowledge base of ``pages`` (paths under ``site``, served at ``BASE``) and its planner."""
    articles = []
    for path in pages:
        url = f"{BASE}/{path}"
        articles.append(extract_article((site / path).read_bytes(), url).article(url))
    build_kb(kb_path, kb_path, articles, [], datetime.now(UTC))
    return AnswerPlanner(Settings(kb_path=kb_path), lambda messages: 0)


def plan_for(planner: AnswerPlanner, question: str) -> Plan:
    """The plan for ``question`` asked alone."""
    return planner.plan(make_request(reply_to="b", user_id="u", question=question, ttl_s=9))
