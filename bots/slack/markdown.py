"""Generated text for Slack's streaming API, which takes standard Markdown (``markdown_text``).

A streamed message is written in Markdown, not in Slack's ``mrkdwn`` (``slack_format``): the
model's own ``**bold**``, ``[label](address)`` and headings show as they are, and nothing needs
translating. What must not come through is Slack's own markup, which Slack turns Markdown into
(``mrkdwn``): ``<!channel>``, ``<@U123>`` and ``<address|label>`` ping or mislead, and an entity
(``&lt;``) could become one. So every ``<`` and ``&`` is followed by an invisible word joiner
(U+2060): neither can begin markup then, in prose or in code, and the text reads the same.

The change is one character at a time, so the Markdown of a text's beginning is the beginning
of its Markdown: an answer can be streamed piece by piece, appending only what it grew by.
"""

from __future__ import annotations

JOINER = "\u2060"  # WORD JOINER: invisible, and no markup can start right after "<" or "&"
_BREAK_MARKUP = str.maketrans({"<": "<" + JOINER, "&": "&" + JOINER})


def stream_markdown(text: str) -> str:
    """``text`` as a streamed message shows it: Markdown in which nothing can ping."""
    return text.translate(_BREAK_MARKUP)


def plain_markdown(text: str) -> str:
    """A streamed text read back (a thread's history): without the joiners."""
    return text.replace(JOINER, "")
