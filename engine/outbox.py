"""Reply events held while the broker is away: in order, bounded, token events merged.

When the engine's connection drops mid-answer, aio-pika's robust connection is back within
seconds (on another node of a cluster), but every publish meanwhile fails. ``Replies`` holds
the events of that answer here and publishes them, in order, once the connection is back: the
asker gets every token once, late but in ``seq`` order. While held, a token event takes in the
text of the tokens after it (one event whose ``seq`` is its own: the next event made gets the
following number, so ``seq`` has no gap), and a progress event is replaced by the next one
(whose text replaces it anyway, under the same ``seq``). So an outage held through a whole
answer is a few events, whatever its length. Past ``max_events`` (only events of other kinds
alternating could get there), the events that are not terminal are dropped and counted; a
terminal event is always kept: it carries the whole text. An event that may have gone out
already (its confirmation was lost with the connection) is *sealed*: sent again exactly as it
was, since an asker that has it drops it by its ``seq``, and one that does not needs all of it.
"""

from __future__ import annotations

from collections import deque

from broker.protocol import TERMINAL_TYPES, Progress, ReplyEvent, TokenEvent

OUTBOX_MAX_EVENTS = 1000
# A merged token event stays far below the 64 KiB a message may be (a character of JSON text
# takes at most 6 bytes, "\\uXXXX"); the next token starts a new event.
MERGED_MAX_CHARS = 8000


class Outbox:
    """The held events of one reply stream, oldest first."""

    def __init__(self, max_events: int = OUTBOX_MAX_EVENTS) -> None:
        self.max_events = max_events
        self.dropped = 0  # events not kept because the outbox was full
        self._held: deque[ReplyEvent] = deque()
        self._sealed: set[int] = set()  # seqs of events that may have gone out: never changed

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, event: ReplyEvent) -> bool:
        """Keep ``event`` after the others; False if it was dropped (full, not terminal)."""
        if len(self._held) >= self.max_events and event.type not in TERMINAL_TYPES:
            self.dropped += 1
            return False
        self._held.append(event)
        return True

    def seal(self, event: ReplyEvent) -> None:
        """``event`` (held next) may have gone out already: nothing merges into it."""
        self._sealed.add(event.seq)

    def merge_tokens(self, text: str, count: int) -> TokenEvent | None:
        """Add a token piece to the last held event if it is a token event with room; the
        merged event, or None (then the piece is an event of its own, with the next seq)."""
        last = self._held[-1] if self._held else None
        if not isinstance(last, TokenEvent) or len(last.text) + len(text) > MERGED_MAX_CHARS:
            return None
        if last.seq in self._sealed:
            return None
        merged = last.model_copy(update={"text": last.text + text, "tokens": last.tokens + count})
        self._held[-1] = merged
        return merged

    def replace_progress(self, text: str, counts: dict[str, int]) -> Progress | None:
        """Put newer progress in the place of the last held event if it is progress too."""
        last = self._held[-1] if self._held else None
        if not isinstance(last, Progress) or last.seq in self._sealed:
            return None
        newer = last.model_copy(update={"text": text, "counts": counts})
        self._held[-1] = newer
        return newer

    def take(self) -> ReplyEvent | None:
        """The oldest held event, out of the outbox (``put_back`` if it could not be sent)."""
        return self._held.popleft() if self._held else None

    def put_back(self, event: ReplyEvent) -> None:
        """``event``, taken and not sent, first again: nothing merges into it meanwhile."""
        self._held.appendleft(event)

    def clear(self) -> list[ReplyEvent]:
        """Give up: every held event, out of the outbox."""
        held, self._held = list(self._held), deque()
        return held
