"""What the model reads for a question, and what follows its answer.

``chat_messages`` is the one place the model's message list is built: the engine and
``concierge bench`` both call it, so a measured prompt is the prompt the engine sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.protocol import Request
from config.settings import Settings
from engine.knowledge import (
    NO_ARTICLES_MESSAGE,
    KnowledgeBase,
    Passage,
    format_sources,
    render_passages,
    select_passages,
)
from engine.llm import ChatMessage

CHARS_PER_TOKEN = 3  # a cautious average, so the prompt fits the model's context
PROMPT_OVERHEAD_TOKENS = 200  # chat template, instructions, the question's framing
ARTICLES_INTRO = "\n\nAnswer from these articles of the site when they are relevant:\n\n"


@dataclass(frozen=True)
class Prompt:
    """What the model reads, and what is appended to its answer (the links it was given)."""

    messages: list[ChatMessage]
    appendix: str = ""


def chat_messages(
    system_prompt: str,
    question: str,
    *,
    articles: str = "",
    history: Sequence[ChatMessage] = (),
) -> list[ChatMessage]:
    """The system prompt (with the site's ``articles``, if any), the conversation so far
    (``history``, oldest first), then the question."""
    system = system_prompt + (ARTICLES_INTRO + articles if articles else "")
    return [ChatMessage("system", system), *history, ChatMessage("user", question)]


class SitePrompts:
    """Prompts from the knowledge base: the passages that fit are chosen once, then shown to
    the model and cited after its answer."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.kb = KnowledgeBase(settings.kb_path)

    def build(self, request: Request) -> Prompt:
        question = request.question
        found = self.kb.search(question, self.settings.retrieval_passages)
        chosen = select_passages(found, self._budget_chars(question))
        articles = render_passages(chosen)
        messages = chat_messages(self.settings.system_prompt, question, articles=articles)
        return Prompt(messages, self._appendix(chosen))

    def _appendix(self, chosen: list[Passage]) -> str:
        """The sources of a grounded answer; a note when there is nothing to ground it on."""
        if chosen:
            return "\n\n" + format_sources(chosen)
        if self.kb.is_empty():
            return f"\n\n_{NO_ARTICLES_MESSAGE}_"
        return ""

    def _budget_chars(self, question: str) -> int:
        """What is left of the model's context for the articles, in characters."""
        settings = self.settings
        free_tokens = settings.context_size - settings.max_tokens - PROMPT_OVERHEAD_TOKENS
        budget = free_tokens * CHARS_PER_TOKEN - len(settings.system_prompt) - len(question)
        return max(0, budget)
