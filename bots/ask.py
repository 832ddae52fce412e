"""The one value that goes from an adapter to the wire, whatever the platform."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from broker.protocol import HistoryTurn
from config.spaces import DEFAULT_SPACE
from config.texts import Locale

Kind = Literal["ask", "rescrape"]


@dataclass(frozen=True)
class Ask:
    """A question (or a rescrape) as an adapter hands it to ``ConciergeClient``.

    ``asker`` is the platform's user id (the stop rule and the per-asker cap use it).
    ``place`` says where the answer is shown, in the platform's own words (a channel, a
    thread, the question's message id): it becomes the request's ``context``, which every
    reply event echoes, so the next process of a named bot can find the answer again.
    ``history`` is the conversation before the question, oldest first (see ``bots.history``);
    ``history_cut`` says that older messages of it were left out (the answer then says so).
    ``locale`` is the asker's, as the platform tells it (None: ``CONCIERGE_LOCALE``): the
    bot's own texts, and a rescrape's progress, come in it. ``space`` is the space whose site
    and persona answer (config/spaces.py): the Discord and Slack adapters take the one their
    place belongs to (``Access.space_at``: the channel a space names, a thread by its parent
    too, else its server or workspace; a Discord DM and a place no space names: ``default``),
    the terminal its ``--space`` or the space naming the terminal.
    """

    question: str
    asker: str
    kind: Kind = "ask"
    place: Mapping[str, str] = field(default_factory=dict)
    history: tuple[HistoryTurn, ...] = ()
    history_cut: bool = False
    locale: Locale | None = None
    space: str = DEFAULT_SPACE

    def __post_init__(self) -> None:
        # A copy nobody can change: the caller's dict may be reused for the next question.
        object.__setattr__(self, "place", MappingProxyType(dict(self.place)))
