"""Noticing an answer that repeats itself, one token at a time, so it can be stopped at once.

A small model at a low temperature falls into loops: the same line again and again until
the token cap ("The last ferry leaves at 17:40.\\nThe last ferry leaves at 17:40.\\n..."),
a block of lines (a period of a hundred tokens), or a numbered list whose counter changes
while the rest does not. Two checks catch them, each a constant amount of work per token:

- the end of the answer is periodic: the same span of tokens, back to back, at least
  ``min_copies`` times and ``min_span`` tokens in all (3 copies of a short span, 2 of a long
  one: a long span repeated exactly is never prose);
- one run of ``ngram`` tokens has come back ``ngram_repeats`` times (a counted list, or
  a paragraph that changes a number each time around);
- one run of ``LONG_NGRAM`` tokens has come back ``LONG_NGRAM_REPEATS`` times: a sentence
  said again and again with its ending changed each time, too different for the first check
  and too few times for the second (seen on Python's documentation: "The default behavior
  when no index is provided for an item that has already been removed from the list: …"
  three times, each ending its own way, to the token cap).

Normal prose, a list whose items differ, and code repeat fragments, never whole spans back
to back nor the same eight tokens eight times in one answer (tests/test_quality.py holds
the samples, real loops of SmolLM2 among them).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

MAX_PERIOD = 160  # tokens: a loop of several lines (seen: 6 lines, about 100 tokens)
MIN_SPAN = 32  # tokens of repetition before a loop is called: a few words can recur
LONG_PERIOD = 16  # from this many tokens a span seen twice in a row is a loop
NGRAM = 8
NGRAM_REPEATS = 8  # a week of opening hours is 7 lines alike: one more than that
LONG_NGRAM = 24  # tokens: most of a sentence; prose never says it three times over
LONG_NGRAM_REPEATS = 3
LONG_NGRAM_CHARS = 80  # ... when those tokens are words: 24 Japanese pieces are 24 characters,
# a list's shared ending ("…詳しくは公式ドキュメントを参照してください。"), and 24 pieces of code
# a call repeated with its arguments ("csv.reader(f, delimiter=',', quotechar='"')")


@dataclass(frozen=True, slots=True)
class Loop:
    """Why the answer counts as repeating, and from which token (0-based) the repetition
    began: the text before ``since`` holds one whole copy."""

    kind: Literal["periodic", "ngram"]
    period: int  # tokens in the repeated span (for "ngram": between its last two uses)
    since: int


class RepetitionDetector:
    """Fed each piece of an answer in turn; ``feed`` returns the loop once there is one."""

    def __init__(
        self,
        max_period: int = MAX_PERIOD,
        min_span: int = MIN_SPAN,
        ngram: int = NGRAM,
        ngram_repeats: int = NGRAM_REPEATS,
        long_ngram_repeats: int = LONG_NGRAM_REPEATS,
    ) -> None:
        self.max_period = max_period
        self.min_span = min_span
        self.loop: Loop | None = None
        self._ids: dict[str, int] = {}  # pieces as small ints: cheap to compare and hash
        self._recent: deque[int] = deque(maxlen=max_period + 1)
        self._runs = [0] * (max_period + 1)  # runs[p]: tokens in a row equal to p back
        self._recurrences = (
            _Recurrence(ngram, ngram_repeats),
            _Recurrence(LONG_NGRAM, long_ngram_repeats, min_chars=LONG_NGRAM_CHARS),
        )
        self._count = 0

    def feed(self, piece: str) -> Loop | None:
        """Take the next piece; the loop found (now or before), else None."""
        if self.loop is None:
            token = self._ids.setdefault(piece, len(self._ids))
            self._recent.append(token)
            self._count += 1
            self.loop = self._periodic() or self._recurring(token, len(piece))
        return self.loop

    def _periodic(self) -> Loop | None:
        """The shortest period whose span the answer now ends by repeating, if any."""
        recent, runs = self._recent, self._runs
        newest = len(recent) - 1
        found: Loop | None = None
        for period in range(1, min(newest, self.max_period) + 1):
            runs[period] = runs[period] + 1 if recent[newest - period] == recent[newest] else 0
            span = runs[period] + period  # the periodic end of the answer, in tokens
            copies = span / period
            if found is None and span >= self.min_span and copies >= self._min_copies(period):
                found = Loop("periodic", period, since=self._count - runs[period])
        return found

    def _min_copies(self, period: int) -> int:
        return 2 if period >= LONG_PERIOD else 3

    def _recurring(self, token: int, chars: int) -> Loop | None:
        found: Loop | None = None
        for recurrence in self._recurrences:  # each sees every token; the first found wins
            loop = recurrence.feed(token, chars, self._count)
            found = found or loop
        return found


class _Recurrence:
    """A loop once the newest ``ngram`` tokens have been seen ``repeats`` times (not
    overlapping: one token repeated is the periodic check's)."""

    def __init__(self, ngram: int, repeats: int, min_chars: int = 0) -> None:
        self.ngram = ngram
        self.repeats = repeats
        self.min_chars = min_chars  # runs shorter than this, in characters, are not counted
        self._tail: deque[int] = deque(maxlen=ngram)
        self._chars: deque[int] = deque(maxlen=ngram)  # with min_chars: each token's length
        self._tail_chars = 0  # their sum, kept as they come and go
        self._grams: dict[tuple[int, ...], tuple[int, int, int]] = {}  # count, second, last

    def feed(self, token: int, chars: int, count: int) -> Loop | None:
        """Take the answer's ``count``-th token, of ``chars`` characters."""
        self._tail.append(token)
        if self.min_chars:
            if len(self._chars) == self.ngram:
                self._tail_chars -= self._chars[0]
            self._chars.append(chars)
            self._tail_chars += chars
        if len(self._tail) < self.ngram:
            return None
        if self._tail_chars < self.min_chars:
            return None
        gram = tuple(self._tail)
        start = count - self.ngram
        seen, second, last = self._grams.get(gram, (0, -1, -self.ngram))
        if start < last + self.ngram:
            return None
        if seen == 1:
            second = start
        self._grams[gram] = (seen + 1, second, start)
        if seen + 1 < self.repeats:
            return None
        return Loop("ngram", period=start - last, since=second)
