"""The knowledge base's search, its sources and the prompts built from its passages."""

from __future__ import annotations

import re
from pathlib import Path

from broker.protocol import make_request
from config.settings import Settings
from engine.answering.closing import closing
from engine.answering.evidence import find_evidence
from engine.answering.passages import format_sources, render_passages, select_passages
from engine.answering.pipeline import AnswerPlanner, Plan
from engine.answering.prompt import chat_messages
from engine.backends.base import Backend, ChatMessage
from engine.knowledge.models import PATH_SEPARATOR, Passage
from engine.knowledge.scrape.discover import parse_feed
from engine.knowledge.store import NO_ARTICLES_MESSAGE, KnowledgeBase
from tests import knowledge_helpers
from tests.knowledge_helpers import scrape
from tests.site_fixture import FakeSite

settings = knowledge_helpers.settings  # the fixture


async def test_empty_knowledge_base(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "missing.sqlite3")

    assert kb.search("anything at all", limit=4) == []
    assert kb.is_empty()
    assert kb.stats().articles == 0
    assert "no articles yet" in NO_ARTICLES_MESSAGE
    assert not (tmp_path / "missing.sqlite3").exists()


def test_the_selected_passages_render_within_the_budget() -> None:
    passages = [
        Passage(title=f"Article {n}", url=f"https://team.example/{n}", text="word " * 100)
        for n in range(5)
    ]

    for budget in (0, 10, 150, 300, 700, 1200, 5000):
        context = render_passages(select_passages(passages, max_chars=budget))
        assert len(context) <= budget
    assert render_passages(select_passages(passages, 5000)).count("[") == 5
    small = render_passages(select_passages(passages, 300))
    assert small.startswith("[1] Article 0 (https://team.example/0)\n")
    assert small.endswith("…")
    assert select_passages(passages, 1200) == passages[:2]  # no room left worth a cut
    cut = select_passages(passages, 1400)  # two whole, then 270 characters of the third
    assert cut[:2] == passages[:2]
    assert len(cut) == 3
    assert cut[2].text.endswith("…")


def test_format_sources_lists_each_article_once() -> None:
    passages = [
        Passage(title="Widgets", url="https://team.example/widgets", text="a"),
        Passage(title="Gears", url="https://team.example/gears", text="b"),
        Passage(title="Widgets", url="https://team.example/widgets", text="c"),
    ]

    assert format_sources(passages) == (
        "Sources:\n- Widgets <https://team.example/widgets>\n- Gears <https://team.example/gears>"
    )
    assert format_sources([]) == ""


def test_the_quoted_section_is_listed_first() -> None:
    """The reader checks the quote in its section: seen in `concierge chat` on Valgrind's
    manual, a quote about --leak-check listed under --keep-stacktraces, the search's first."""
    manual = "https://team.example/manual.html"
    keep, leak = (f"Manual{PATH_SEPARATOR}--{name}" for name in ("keep-stacktraces", "leak-check"))
    passages = [
        Passage("Manual", manual, "Keep stack traces.", heading=keep, anchor="keep"),
        Passage("Manual", manual, "--leak-check=full shows leaks.", heading=leak, anchor="leak"),
        Passage("FAQ", "https://team.example/faq.html", "c"),
    ]

    assert format_sources(passages, quoted=f"{manual}#leak").splitlines() == [
        "Sources:",
        f"- {leak} <{manual}#leak>",
        f"- {keep} <{manual}#keep>",
        "- FAQ <https://team.example/faq.html>",
    ]
    evidence = find_evidence("What does --leak-check do?", passages[:2])
    assert evidence is not None and evidence.link == f"{manual}#leak"
    plan = Plan("quote_only", "en", tuple(passages), evidence)
    shown = closing(plan, "stop", 64, answer="")
    assert shown.index("--leak-check <") < shown.index("--keep-stacktraces <")


async def test_sources_name_the_article_that_answered(settings: Settings, site: FakeSite) -> None:
    await scrape(settings)

    passages = KnowledgeBase(settings.kb_path).search("widget warranty", limit=2)

    assert format_sources(passages) == (
        f"Sources:\n- The widget warranty explained <{site.base}/articles/widgets>"
    )


async def test_a_prompt_shows_the_model_the_passages_it_cites(
    settings: Settings,
    site: FakeSite,
    backend: Backend,
) -> None:
    await scrape(settings)
    request = make_request(reply_to="b", user_id="u", question="widget warranty?", ttl_s=30)

    prompt = AnswerPlanner(settings, backend.count_tokens).plan(request)

    system, question = prompt.messages
    assert system == ChatMessage("system", settings.system_prompt)
    assert question.role == "user" and question.content.endswith("\n\nQuestion: widget warranty?")
    cited = list(prompt.sources)
    shown = re.findall(r"^\[\d+\] .* \((http[^)]+)\)$", question.content, re.MULTILINE)
    assert cited == [f"{site.base}/articles/widgets"]  # the one article that covers it
    assert cited == list(dict.fromkeys(shown))  # only what it cites is shown


async def test_a_prompt_from_an_empty_knowledge_base_is_the_question_and_a_note(
    tmp_path: Path, backend: Backend
) -> None:
    settings = Settings(_env_file=None, kb_path=tmp_path / "none.sqlite3")  # type: ignore[call-arg]
    question = "What are the office hours?"  # ("Hello?" is small talk: no model, no note)
    request = make_request(reply_to="b", user_id="u", question=question, ttl_s=30)

    prompt = AnswerPlanner(settings, backend.count_tokens).plan(request)

    assert prompt.messages == chat_messages(settings.system_prompt, question)
    assert prompt.note == NO_ARTICLES_MESSAGE and prompt.not_on_site


def test_chat_messages_are_system_then_history_then_articles_and_question() -> None:
    earlier = [ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello!")]

    messages = chat_messages("Be brief.", "And now?", articles="[1] A (u)\ntext", history=earlier)

    assert [message.role for message in messages] == ["system", "user", "assistant", "user"]
    assert messages[0] == ChatMessage("system", "Be brief.")  # the same for every question
    assert messages[1:3] == earlier
    assert "[1] A (u)\ntext" in messages[-1].content
    assert messages[-1].content.endswith("\n\nQuestion: And now?")
    assert chat_messages("Be brief.", "Q") == [
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "Q"),
    ]


def test_atom_feed_links_are_found() -> None:
    from xml.etree import ElementTree

    atom = ElementTree.fromstring(
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>A</title>'
        '<link rel="alternate" href="/posts/a"/><link rel="edit" href="/edit/a"/></entry>'
        '<entry><link href="https://team.example/posts/b"/></entry></feed>'
    )

    assert parse_feed(atom, base_url="https://team.example/feed.atom") == [
        "https://team.example/posts/a",
        "https://team.example/posts/b",
    ]
