"""What Slack is sent and what it sends: message text that never pings, questions from mentions.

Slack reads ``<...>`` as a link or a mention (``<!channel>``, ``<@U123>``), so generated text is
escaped as its docs require for literal text: ``&``, ``<`` and ``>`` become entities. Messages
are plain ``text`` (no blocks): a section block holds only 3,000 characters and an escaped answer
can grow several times longer than the text, while ``text`` is cut only past 40,000.
"""

from __future__ import annotations

import re

from bots.renderer import MessageContent

MESSAGE_CHARS = 4000  # Slack's advice for one message's text
FOOTER_CHARS = 200  # room kept for the status line on the last message
BODY_CHARS = MESSAGE_CHARS - FOOTER_CHARS  # the Renderer's max_chars
FOOTER_SEPARATOR = "\n\n"
STOP_REACTION = "octagonal_sign"

_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape(text: str) -> str:
    """Literal text for Slack: no link, no mention, no ``@channel`` can come out of it."""
    return text.translate(_ENTITIES)


def message_text(content: MessageContent) -> str:
    """One message: the escaped body, then the status line (trimmed to its room) if any."""
    body = escape(content.body)
    if not content.footer:
        return body
    footer = escape(content.footer)
    if len(footer) > FOOTER_CHARS:
        footer = footer[: FOOTER_CHARS - 1] + "…"
    return f"{body}{FOOTER_SEPARATOR}{footer}" if body else footer


def unescape(text: str) -> str:
    """What a person typed: Slack sends ``&``, ``<`` and ``>`` in messages as entities."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def question_from_mention(text: str, bot_user_id: str | None) -> str:
    """The question in an ``app_mention``: its text without the bot's mention(s)."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)
    return unescape(text).strip()
