"""How an answer ended, as the terminal event its asker gets: one pure function of the
generation, so every way of ending is tested without a model or a broker."""

from __future__ import annotations

from broker.protocol import Cancelled, Done, Failed
from config.texts import Locale, t
from engine.answering.history import NO_HISTORY, FittedHistory
from engine.answering.pipeline import Plan
from engine.generation.loop import Generation
from engine.replies import EventHeader


def ending_event(
    generation: Generation,
    header: EventHeader,
    *,
    cancel_received_at: float | None,
    time_limit_s: float,
    history: FittedHistory = NO_HISTORY,
    plan: Plan | None = None,
    locale: Locale = "en",
) -> Done | Cancelled | Failed:
    """The terminal event of a generation that has stopped.

    ``cancel_received_at`` is when the engine took the session's cancel (``time.monotonic()``),
    if it did; ``time_limit_s`` is the limit a generation stopped by its time limit ran into;
    ``plan``, what the answer stood on (its sources, or none: not on the site);
    ``locale``, the language of a failure's reason (the asker's).
    """
    text, tokens = generation.text, generation.tokens
    if generation.abandoned:  # the engine is shutting down
        return Failed(**header, reason=t("engine.interrupted", locale), text=text)
    if generation.stopped_by_cancel:
        return Cancelled(
            **header,
            text=text,
            tokens=tokens,
            tokens_after_cancel=generation.tokens_after(cancel_received_at),
            stop_latency_s=_stop_latency_s(generation, cancel_received_at),
        )
    if generation.stopped_by_time_limit:
        reason = t("engine.time_limit", locale, limit_s=f"{time_limit_s:g}")
        return Failed(**header, reason=reason, text=text)
    return _done(generation, header, history, plan)


def _stop_latency_s(generation: Generation, cancel_received_at: float | None) -> float | None:
    if cancel_received_at is None:
        return None
    return (generation.finished_at or 0) - cancel_received_at


def _done(
    generation: Generation,
    header: EventHeader,
    history: FittedHistory,
    plan: Plan | None,
) -> Done:
    """Timings from the generation's own clock: first token, and the rate after it."""
    finished = generation.finished_at or generation.started_at  # set once the loop returns
    first = generation.first_token_at
    decode_s = finished - first if first is not None else 0.0
    return Done(
        **header,
        text=generation.text,
        tokens=generation.tokens,
        ttft_s=first - generation.started_at if first is not None else None,
        tokens_per_s=(generation.tokens - 1) / decode_s if decode_s > 0 else None,
        elapsed_s=finished - generation.started_at,
        history_used=history.used,
        history_dropped=history.dropped,
        finish_reason=generation.finish_reason,
        sources=plan.sources if plan else (),
        not_on_site=plan.not_on_site if plan else False,
    )
