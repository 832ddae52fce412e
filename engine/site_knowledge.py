"""The engine's side of the knowledge base: prompts built from the site's articles, and the
``/rescrape`` job that rebuilds them while streaming progress to the asker."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from broker.protocol import Cancelled, Done, Failed, Progress, Request
from config.settings import Settings
from engine.knowledge import (
    NO_ARTICLES_MESSAGE,
    KnowledgeBase,
    RescrapeFailed,
    RescrapeStopped,
    ScrapeProgress,
    build_prompt_context,
    format_sources,
    rescrape,
    select_passages,
)
from engine.llm import ChatMessage
from engine.replies import STOPPED_BY_USER, Replies

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3  # a cautious average, so the prompt fits the model's context
PROMPT_OVERHEAD_TOKENS = 200  # chat template, instructions, the question's framing


@dataclasses.dataclass(frozen=True)
class Prompt:
    """What the model reads, and what is appended to its answer (the links it was given)."""

    messages: list[ChatMessage]
    appendix: str = ""


class SiteKnowledge:
    """Answers from the site's articles; rebuilds them on ``/rescrape``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.kb = KnowledgeBase(settings.kb_path)

    def build_prompt(self, request: Request) -> Prompt:
        settings = self.settings
        passages = self.kb.search(request.question, settings.retrieval_passages)
        chosen = select_passages(passages, self._context_budget_chars(request.question))
        system = settings.system_prompt
        if chosen:
            context = build_prompt_context(chosen, self._context_budget_chars(request.question))
            system += (
                "\n\nAnswer from these articles of the site when they are relevant:\n\n" + context
            )
            appendix = "\n\n" + format_sources(chosen)
        elif self.kb.is_empty():
            appendix = f"\n\n_{NO_ARTICLES_MESSAGE}_"
        else:
            appendix = ""
        messages = [ChatMessage("system", system), ChatMessage("user", request.question)]
        return Prompt(messages, appendix)

    def _context_budget_chars(self, question: str) -> int:
        settings = self.settings
        free_tokens = settings.context_size - settings.max_tokens - PROMPT_OVERHEAD_TOKENS
        budget = free_tokens * CHARS_PER_TOKEN - len(settings.system_prompt) - len(question)
        return max(0, budget)

    async def rescrape(
        self, request: Request, replies: Replies, stop_reason: Callable[[], str | None]
    ) -> None:
        """Rebuild the knowledge base; progress and the outcome go to the asker.

        ``stop_reason()`` says why to stop: ``STOPPED_BY_USER`` (a cancel) or a failure.
        """
        started = time.monotonic()
        progress = ProgressRelay(replies)
        try:
            result = await rescrape(
                self.settings, progress.report, lambda: stop_reason() is not None
            )
        except RescrapeStopped:
            await progress.close()
            kept = "the previous knowledge base is still in use."
            reason = stop_reason() or STOPPED_BY_USER
            if reason == STOPPED_BY_USER:
                text = f"{progress.last_text}\nRescrape stopped; {kept}"
                await replies.send(Cancelled, text=text)
            else:
                await replies.send(Failed, reason=f"{reason}; {kept}", text=progress.last_text)
        except RescrapeFailed as error:
            await progress.close()
            await replies.send(Failed, reason=f"rescrape failed: {error}")
        else:
            await progress.close()
            await replies.send(
                Done,
                text=result.text,
                tokens=0,
                ttft_s=None,
                tokens_per_s=None,
                elapsed_s=time.monotonic() - started,
            )


class ProgressRelay:
    """Sends progress in order from a synchronous callback, without blocking the scraper."""

    def __init__(self, replies: Replies) -> None:
        self.replies = replies
        self.last_text = ""
        self._updates: asyncio.Queue[ScrapeProgress | None] = asyncio.Queue()
        self._pump = asyncio.create_task(self._send_all())

    def report(self, progress: ScrapeProgress) -> None:
        self.last_text = progress.text
        self._updates.put_nowait(progress)

    async def close(self) -> None:
        self._updates.put_nowait(None)
        await self._pump

    async def _send_all(self) -> None:
        while (progress := await self._updates.get()) is not None:
            counts = {
                "found": progress.found,
                "fetched": progress.fetched,
                "unchanged": progress.unchanged,
                "failed": progress.failed,
                "skipped": progress.skipped,
            }
            await self.replies.send(Progress, text=progress.text, counts=counts)
