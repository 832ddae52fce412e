"""The one value that goes from an adapter to the wire, whatever the platform."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Kind = Literal["ask", "rescrape"]


@dataclass(frozen=True)
class Ask:
    """A question (or a rescrape) as an adapter hands it to ``ConciergeClient``.

    ``asker`` is the platform's user id (the stop rule and the per-asker cap use it).
    ``place`` says where the answer is shown, in the platform's own words (a channel, a
    thread, the question's message id): it becomes the request's ``context``, which every
    reply event echoes, so the next process of a named bot can find the answer again.
    """

    question: str
    asker: str
    kind: Kind = "ask"
    place: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A copy nobody can change: the caller's dict may be reused for the next question.
        object.__setattr__(self, "place", MappingProxyType(dict(self.place)))
