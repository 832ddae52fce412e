"""The parts of an answer's text that both sides read: the engine ends a ``done``'s text with
the list of its sources ("Sources:" then "- Title <url>" lines), which a bot leaves out when it
sends the answer back as a conversation's turn, and which the engine must leave out in the
same way when it prepares for that turn (``engine.jobs.answer``: the next prompt's beginning).
"""

from __future__ import annotations

import re

SOURCES_RE = re.compile(r"\n*Sources:\n(?:- [^\n]*(?:\n|\Z))+\s*\Z")


def without_sources(text: str) -> str:
    """``text`` without the sources list it ends with, and without surrounding whitespace:
    the answer as a conversation's turn."""
    return SOURCES_RE.sub("", text).strip()
