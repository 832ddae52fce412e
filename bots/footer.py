"""An answer's status line (its footer) under the body, as a platform lays it out and reads it
back: one way for every platform, each giving its own separator.

The line is shortened to a fixed room, so the body's room per message is fixed too. Reading a
conversation back, each of the bot's messages is split again into body and status line; a
last line that ``status_of`` does not know is part of the body (a continuation, or a message
that is no answer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bots.renderer import status_of
from config.text_helpers import shorten


def _as_written(text: str) -> str:
    return text


@dataclass(frozen=True)
class FooterLayout:
    """Where a platform puts the status line: after ``separator`` under a body, after
    ``alone`` in a message with no body, in at most ``max_chars``."""

    separator: str
    alone: str
    max_chars: int

    def after(self, body: str, footer: str) -> str:
        """What follows ``body`` in its message: the status line, shortened to its room, with
        its separator ("" if there is no status line). A stream appends just this."""
        footer = shorten(footer, self.max_chars)
        if not footer:
            return ""
        return f"{self.separator}{footer}" if body else f"{self.alone}{footer}"

    def join(self, body: str, footer: str) -> str:
        """One message: the body, then the status line."""
        return body + self.after(body, footer)

    def split(self, text: str, read: Callable[[str], str] = _as_written) -> tuple[str, str]:
        """A message as ``join`` made it, as (body, status line); the status line is "" if
        its last line is none. ``read`` turns the line as the platform has it back into text
        (Slack's entities); the body stays as the platform has it."""
        if "\n" not in text and text.startswith(self.alone):
            alone = read(text.removeprefix(self.alone))
            if status_of(alone) is not None:
                return "", alone
        body, separator, footer = text.rpartition(self.separator)
        if separator and "\n" not in footer and status_of(read(footer)) is not None:
            return body, read(footer)
        return text, ""
