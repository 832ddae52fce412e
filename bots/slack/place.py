"""Where a Slack answer goes, and whose place it is: the value an adapter's listener fills in
from the event before it starts an answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncBoltContext

from config.spaces import DEFAULT_SPACE


@dataclass(frozen=True)
class Where:
    """Where an answer goes: a channel, the thread (None: in the channel itself), the
    question's message (a mention's), the asker's team (Slack streams to a recipient), and
    the space that answers."""

    channel: str
    thread_ts: str | None
    question_ts: str = ""
    team: str = ""
    space: str = DEFAULT_SPACE

    def place(self) -> dict[str, str]:
        """Its entry in the request's context (echoed back; a successor reads it, the space
        too: its persona's name goes on the messages it posts)."""
        thread = self.thread_ts or ""
        place = {"channel": self.channel, "thread": thread, "question": self.question_ts}
        return place | ({"space": self.space} if self.space != DEFAULT_SPACE else {})


def workspace_of(event: Mapping[str, Any], context: AsyncBoltContext) -> str:
    """The workspace the event happened in (a Slack Connect guest's own team may differ)."""
    return str(context.team_id or event.get("team") or "")


def team_of(event: Mapping[str, Any], context: AsyncBoltContext) -> str:
    """The asker's team: their own (a Slack Connect guest's differs), else the workspace's."""
    return str(event.get("user_team") or event.get("team") or context.team_id or "")
