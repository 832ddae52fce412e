"""What the model reads for a question, and what the answer stands on
(engine/answering/grounding.py).

``chat_messages`` is the one place the model's message list is built: the engine and
``concierge bench`` both call it, so a measured prompt is the prompt the engine sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.protocol import Request
from config.settings import Settings
from engine.answering.grounding import Grounding, ground
from engine.answering.history import (
    NO_HISTORY,
    FittedHistory,
    TokenCounter,
    as_messages,
    fit_history_in_blocks,
    search_text,
)
from engine.answering.passages import render_passages, select_passages
from engine.answering.smalltalk import without_small_talk
from engine.backends.base import ChatMessage
from engine.knowledge.store import KnowledgeBase

CHARS_PER_TOKEN = 3  # a cautious average, so the prompt fits the model's context
PROMPT_OVERHEAD_TOKENS = 200  # chat template, instructions, the question's framing
ARTICLES_INTRO = "Answer from these articles of the site when they are relevant:\n\n"
QUESTION_INTRO = "\n\nQuestion: "
# After the article, its sentence that best answers the question (engine/answering/grounding.py):
# the
# default model then restates it instead of another fact of the article, and stops (on
# eval/, 0 answers cut for repetition at temperature 0, against 9 of 20 without it).
EVIDENCE_INTRO = "\n\nThe sentence that answers it: "
# A follow-up needs its earlier turns as much as the articles: with a history, the articles
# take at most this share of the room, the turns the rest (and what the articles leave).
ARTICLES_SHARE_WITH_HISTORY = 0.5


@dataclass(frozen=True)
class Prompt:
    """What the model reads (when ``grounding.asks_model``), and what the answer stands on:
    the passages, the quote and the source that follow the model's words."""

    messages: list[ChatMessage]
    grounding: Grounding
    history: FittedHistory = NO_HISTORY  # the request's turns given to the model, and left out


def chat_messages(
    system_prompt: str,
    question: str,
    *,
    articles: str = "",
    history: Sequence[ChatMessage] = (),
) -> list[ChatMessage]:
    """The system prompt, the conversation so far (``history``, oldest first), then the
    question, after the site's ``articles`` if there are any.

    What stays the same from one turn to the next comes first, so llama.cpp reads a follow-up
    from where its conversation's last prompt stops being the same (engine/backends/state_cache.py).
    The articles change with every question: in the system prompt they would make every turn
    after them new; in the last message, a turn re-reads only the last exchange, its articles
    and its question, however long the conversation.
    """
    asked = f"{ARTICLES_INTRO}{articles}{QUESTION_INTRO}{question}" if articles else question
    return [ChatMessage("system", system_prompt), *history, ChatMessage("user", asked)]


class SitePrompts:
    """Prompts from the knowledge base: the passages of the article that covers the question,
    if one does, shown to the model and quoted after its answer."""

    def __init__(self, settings: Settings, count_tokens: TokenCounter) -> None:
        self.settings = settings
        self.count_tokens = count_tokens
        self.kb = KnowledgeBase(settings.kb_path)

    def build(self, request: Request) -> Prompt:
        question, history = request.question, as_messages(request.history)
        asked = without_small_talk(question)  # "Hi, when...": the site need not cover "hi"
        searched = search_text(asked, history)
        found = self.kb.search(searched, self.settings.retrieval_passages)
        grounding = ground(
            asked,
            found,
            kb_empty=not found and self.kb.is_empty(),
            model_languages=self.settings.model_languages,
            model_answers_yes_no=self.settings.model_answers_yes_no,
            follow_up_of=searched if history else "",
        )
        if not grounding.asks_model:
            return Prompt([], grounding)
        pointer = EVIDENCE_INTRO + grounding.evidence.quote if grounding.evidence else ""
        budget = self._budget_chars(question, bool(history)) - len(pointer)
        articles = render_passages(select_passages(list(grounding.passages), budget)) + pointer
        fitted = self._fit(question, articles, history)
        messages = chat_messages(
            self.settings.system_prompt, question, articles=articles, history=fitted.turns
        )
        return Prompt(messages, grounding, fitted)

    def _fit(self, question: str, articles: str, history: list[ChatMessage]) -> FittedHistory:
        """The newest turns that leave the answer its room (CONCIERGE_MAX_TOKENS) in the
        model's context, counted in its tokens, the oldest dropped in blocks so the next
        follow-up begins as this one (engine/answering/history.py)."""
        room = self.settings.context_size - self.settings.max_tokens

        def fits(turns: Sequence[ChatMessage]) -> bool:
            messages = chat_messages(
                self.settings.system_prompt, question, articles=articles, history=turns
            )
            return self.count_tokens(messages) <= room

        return fit_history_in_blocks(history, fits) if history else NO_HISTORY

    def _budget_chars(self, question: str, has_history: bool) -> int:
        """What is left of the model's context for the articles, in characters."""
        settings = self.settings
        free_tokens = settings.context_size - settings.max_tokens - PROMPT_OVERHEAD_TOKENS
        budget = free_tokens * CHARS_PER_TOKEN - len(settings.system_prompt) - len(question)
        if has_history:
            budget = int(budget * ARTICLES_SHARE_WITH_HISTORY)
        return max(0, budget)
