"""What the model reads: the system text, the conversation, the site's passages, the question.

``chat_messages`` is the one place the model's message list is built: the engine and
``concierge bench`` both call it, so a measured prompt is the prompt the engine sends.
"""

from __future__ import annotations

from collections.abc import Sequence

from config.settings import Settings
from engine.answering.history import (
    NO_HISTORY,
    FittedHistory,
    TokenCounter,
    fit_history_in_blocks,
    without_refusals,
)
from engine.answering.passages import render_passages, select_passages
from engine.backends.base import ChatMessage
from engine.knowledge.models import Passage

CHARS_PER_TOKEN = 3  # a cautious average, so the prompt fits the model's context
PROMPT_OVERHEAD_TOKENS = 200  # chat template, instructions, the question's framing
ARTICLES_INTRO = "Answer from these articles of the site when they are relevant:\n\n"
QUESTION_INTRO = "\n\nQuestion: "
# After the passages, their sentence that best answers the question (evidence.py): the
# default model then restates it instead of another fact of the article, and stops
# (docs/quality.md, "The quote in the prompt").
EVIDENCE_INTRO = "\n\nThe sentence that answers it: "
# A follow-up needs its earlier turns as much as the articles: with a history, the articles
# take at most this share of the room, the turns the rest (and what the articles leave).
ARTICLES_SHARE_WITH_HISTORY = 0.5


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
    from where its conversation's last prompt stops being the same (backends/state_cache.py).
    The articles change with every question: in the system prompt they would make every turn
    after them new; in the last message, a turn re-reads only the last exchange, its articles
    and its question, however long the conversation.
    """
    asked = f"{ARTICLES_INTRO}{articles}{QUESTION_INTRO}{question}" if articles else question
    return [ChatMessage("system", system_prompt), *history, ChatMessage("user", asked)]


class PromptBuilder:
    """Fits the passages and the conversation into the model's context."""

    def __init__(self, settings: Settings, count_tokens: TokenCounter) -> None:
        self.settings = settings
        self.count_tokens = count_tokens

    def build(
        self,
        question: str,
        history: list[ChatMessage],
        passages: Sequence[Passage] = (),
        quote: str = "",
    ) -> tuple[list[ChatMessage], FittedHistory]:
        """The messages for the model, and the turns of ``history`` they hold."""
        pointer = EVIDENCE_INTRO + quote if quote else ""
        # a history of refusals alone is none: the model reads none of it
        budget = self._budget_chars(question, bool(without_refusals(history))) - len(pointer)
        articles = render_passages(select_passages(list(passages), budget)) + pointer
        fitted = self._fit(question, articles, history)
        messages = chat_messages(
            self.settings.system_prompt,
            question,
            articles=articles,
            history=without_refusals(fitted.turns),
        )
        return messages, fitted

    def lead(
        self, question: str, history: list[ChatMessage], passages: Sequence[Passage], quote: str
    ) -> list[ChatMessage]:
        """The system text and the turns of ``history`` that a prompt with them would hold:
        what a follow-up's prompt begins with, though this question's may hold none."""
        return self.build(question, history, passages, quote)[0][:-1]

    def _fit(self, question: str, articles: str, history: list[ChatMessage]) -> FittedHistory:
        """The newest turns that leave the answer its room (CONCIERGE_MAX_TOKENS) in the
        model's context, counted in its tokens, the oldest dropped in blocks so the next
        follow-up begins as this one (history.py)."""
        room = self.settings.context_size - self.settings.max_tokens

        def fits(turns: Sequence[ChatMessage]) -> bool:
            messages = chat_messages(
                self.settings.system_prompt,
                question,
                articles=articles,
                history=without_refusals(turns),
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
