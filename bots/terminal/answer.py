"""One exchange followed at the terminal, from "queued" to the line that says how it ended.

Tokens are shown as they arrive, not throttled: a terminal has no rate limit. The answer's
text goes to stdout (``AnswerText``), everything about it to stderr (``TerminalStatus``), so
``concierge ask ... > answer.md`` keeps only the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from rich.markup import escape

from bots.history import CUT_OFF_MARK, STOPPED_MARK
from bots.renderer import history_notice
from bots.session import Detached, ReplyTimeout, Session, SessionItem, StopRequested
from bots.terminal.status import TerminalStatus
from bots.terminal.text import AnswerText
from broker.answer_text import SOURCES_RE
from broker.protocol import (
    Cancelled,
    Done,
    Expired,
    Failed,
    Progress,
    ReplyEvent,
    Started,
    TerminalEvent,
    TokenEvent,
)
from config.texts import Locale, t

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
STOP_CONFIRM_TIMEOUT_S = 10.0

FINISHED_EARLY = {"length": "terminal.cut_length", "repetition": "terminal.cut_repetition"}


@dataclass(frozen=True)
class Outcome:
    """How an exchange ended: the exit code it deserves, and the answer as shown without its
    sources list, for the conversation (what a bot sends back: ``bots.history``)."""

    code: int
    reply: str | None = None
    mark: str = ""  # how the conversation marks a reply that did not run to its end


def done_line(event: Done, locale: Locale) -> str:
    """``done · 42 tokens · 35.1 tokens/s``; just ``done`` for a text the model did not write
    (the engine's own, as when the site does not cover the question)."""
    parts = [t("terminal.done", locale)]
    if event.tokens:
        parts.append(t("terminal.tokens", locale, count=event.tokens))
    if event.tokens_per_s:
        parts.append(t("terminal.tokens_per_s", locale, rate=f"{event.tokens_per_s:.1f}"))
    return " · ".join(parts)


class TerminalAnswer:
    """Follows one session: its text to ``text`` (or every event as JSON to ``json_out``),
    its state to ``status``."""

    def __init__(
        self,
        session: Session,
        text: AnswerText,
        status: TerminalStatus,
        *,
        json_out: TextIO | None = None,
    ) -> None:
        self.session = session
        self.text = text
        self.status = status
        self.json_out = json_out
        self.streamed = ""  # every piece shown
        self.stopping = False
        self.began = False  # a ``started`` came: an attempt after it is an answer begun again

    async def follow(self) -> Outcome:
        """Show events until the exchange ends."""
        request = self.session.request
        ttl_s = request.deadline - request.sent_at if request is not None else 0.0
        self.status.queued(self.session, ttl_s)
        try:
            while True:
                timeout_s = STOP_CONFIRM_TIMEOUT_S if self.stopping else self.session.timeout_s
                try:
                    item = await self.session.next_item(timeout_s)
                except ReplyTimeout:
                    return self._timed_out(timeout_s)
                if (outcome := self._apply(item)) is not None:
                    return outcome
        finally:
            self.status.close()

    def _apply(self, item: SessionItem) -> Outcome | None:
        if isinstance(item, StopRequested):
            return self._stop_requested()
        if isinstance(item, Detached):  # never sent to this client: it does not detach
            return Outcome(EXIT_INTERRUPTED)
        self._print_json(item)
        match item:
            case Started(attempt=attempt):
                if attempt > 1 and self.began:  # else it only waited while a broker node went
                    self._begin_again()
                self.began = True
                self.status.started(self.session.kind)
            case TokenEvent(text=piece):
                self._add(piece)
            case Progress():
                self.status.progress(item)
            case Done() | Cancelled() | Failed() | Expired():
                return self._end(item)
        return None

    def _begin_again(self) -> None:
        """An engine died answering: a line says so, then the new answer comes whole (what
        was shown stays above it: a terminal, or a file, cannot take lines back)."""
        if self.json_out is None:
            self.text.begin_again()
        self.status.tell("terminal.restarted")
        self.streamed = ""

    def _stop_requested(self) -> Outcome | None:
        """Ctrl+C: a queued question is gone at once; a running answer stops at the engine."""
        if self.session.taken:
            self.stopping = True
            return None
        self.status.tell("terminal.removed")
        return Outcome(EXIT_INTERRUPTED)

    def _add(self, piece: str) -> None:
        if not self.streamed:
            self.status.text_begins()
        if self.json_out is None:
            self.text.add(piece)
        self.streamed += piece

    def _print_json(self, event: ReplyEvent) -> None:
        if self.json_out is not None:
            self.json_out.write(event.model_dump_json() + "\n")
            self.json_out.flush()

    def _end(self, event: TerminalEvent) -> Outcome:
        self.status.close()
        final = self.streamed if isinstance(event, Expired) else event.text or self.streamed
        if self.json_out is None and final:
            self.text.finish(final)
        rescrape = self.session.kind == "rescrape"
        match event:
            case Done():
                self._say_done(event, rescrape=rescrape)
                mark = CUT_OFF_MARK if event.finish_reason != "stop" else ""
                return Outcome(EXIT_OK, self._reply(final), mark)
            case Cancelled(tokens=tokens):
                if rescrape:
                    self.status.tell("terminal.stopped")
                else:
                    self.status.tell("terminal.stopped_after", tokens=tokens)
                return Outcome(EXIT_INTERRUPTED, self._reply(final), STOPPED_MARK)
            case Failed(reason=reason):
                self.status.tell("terminal.failed", reason=escape(reason))
                return Outcome(EXIT_FAILED, self._reply(final), CUT_OFF_MARK)
            case Expired(reason=reason):
                self.status.tell("terminal.expired", reason=escape(reason))
        return Outcome(EXIT_FAILED)

    def _say_done(self, event: Done, *, rescrape: bool) -> None:
        if rescrape:  # its text is its summary
            return
        locale = self.session.locale
        line = f"[dim]{done_line(event, locale)}[/]"
        if event.finish_reason in FINISHED_EARLY:
            line += f" · [yellow]{t(FINISHED_EARLY[event.finish_reason], locale)}[/]"
        self.status.say(line)
        # older messages left out, by the engine or the client: the bots' own notice
        if notice := history_notice(None, self.session.history_cut, event, locale):
            self.status.say(f"[dim]{notice}[/]")

    def _reply(self, final: str) -> str | None:
        """``final`` without its sources list, as a bot sends an answer back. Its quote of
        the site stays: given only its own words back, the default model repeated them as
        the next answer ("This sentence provides a detailed explanation of … small dogs",
        whatever was asked; docs/quality.md, "One paragraph")."""
        if self.session.kind == "rescrape" or not final:
            return None
        return SOURCES_RE.sub("", final).strip() or None

    def _timed_out(self, waited_s: float) -> Outcome:
        self.status.tell("terminal.timed_out", wait_s=f"{waited_s:g}")
        if self.stopping:
            return Outcome(EXIT_INTERRUPTED)
        return Outcome(EXIT_FAILED)
