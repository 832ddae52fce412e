"""What Slack is sent and what it sends: message text that never pings, questions from mentions.

Slack reads ``<...>`` as a link or a mention (``<!channel>``, ``<@U123>``), so generated text is
escaped as its docs require for literal text: ``&``, ``<`` and ``>`` become entities. The only
``<...>`` the bot writes itself are links to ``http(s)`` addresses (messages go out with
``parse=none``, so Slack links nothing by itself): a bare address, a ``<address>`` as the
sources list writes it, and a Markdown ``[label](address)``. The model's Markdown bold
(``**x**``) and headings become Slack's ``*x*``; code is left as it is. Messages are plain
``text`` (no blocks): a section block holds only 3,000 characters and an escaped answer can
grow several times longer than the text, while ``text`` is cut only past 40,000. Only a done
answer's last message has blocks (its feedback buttons); its text then shows in section blocks,
cut at line ends (``section_blocks``), and ``text`` stays what notifications and readers see.
(A streamed answer is Markdown: ``slack_markdown``.)
"""

from __future__ import annotations

import re
from typing import Any

from bots.footer import FooterLayout
from bots.renderer import MessageContent
from config.text_helpers import shorten
from config.texts import CATALOGUE, LOCALES, Locale, t

MESSAGE_CHARS = 4000  # Slack's advice for one message's text
FOOTER_CHARS = 200  # room kept for the status line on the last message
BODY_CHARS = MESSAGE_CHARS - FOOTER_CHARS  # the Renderer's max_chars
FOOTER_SEPARATOR = "\n\n"
FOOTER = FooterLayout(FOOTER_SEPARATOR, "", FOOTER_CHARS)
STOP_REACTION = "octagonal_sign"
HEADING_CHARS = 200  # the "who asked what" line of an /ask answer; it rides in the context
HEADING_SEPARATOR = "\n"
ASKER_NAME_CHARS = 60
SECTION_CHARS = 3000  # Slack's limit for a section block's text

_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape(text: str) -> str:
    """Literal text for Slack: no link, no mention, no ``@channel`` can come out of it."""
    return text.translate(_ENTITIES)


# A Markdown link, an address in angle brackets, or a bare address; none may hold <, > or |.
_ADDRESS = r"https?://[^\s<>|]+[^\s<>|.,;:!?'\")\]*_]"
_LINK = re.compile(
    rf"\[(?P<label>[^\]\n]+)\]\((?P<labelled>{_ADDRESS})\)|<(?P<bracketed>{_ADDRESS})>|(?P<bare>{_ADDRESS})"
)
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)
_BOLD = re.compile(r"\*\*(?=\S)(?P<text>[^*\n]+?)(?<=\S)\*\*")
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<text>\S[^\n]*?)[ \t#]*$", re.MULTILINE)


def slack_text(text: str) -> str:
    """Generated text as Slack shows it: escaped, its links and emphasis in Slack's syntax,
    code untouched (but escaped). Nothing in it can ping."""
    pieces: list[str] = []
    start = 0
    for code in _CODE.finditer(text):
        pieces.append(_prose(text[start : code.start()]))
        pieces.append(escape(code.group()))
        start = code.end()
    pieces.append(_prose(text[start:]))
    return "".join(pieces)


def _prose(text: str) -> str:
    pieces: list[str] = []
    start = 0
    for link in _LINK.finditer(text):
        pieces.append(_emphasis(escape(text[start : link.start()])))
        address = link["labelled"] or link["bracketed"] or link["bare"]
        label = link["label"]
        pieces.append(f"<{escape(address)}|{_label(label)}>" if label else f"<{escape(address)}>")
        start = link.end()
    pieces.append(_emphasis(escape(text[start:])))
    return _HEADING.sub(_heading, "".join(pieces))


def _heading(line: re.Match[str]) -> str:
    text = line["text"]
    return text if len(text) > 1 and text[0] == text[-1] == "*" else f"*{text}*"


def _emphasis(escaped: str) -> str:
    return _BOLD.sub(lambda m: f"*{m['text']}*", escaped)


def _label(label: str) -> str:
    return escape(label.replace("|", "¦"))


def message_text(content: MessageContent) -> str:
    """One message: the body as Slack shows it, then the status line (trimmed to its room)."""
    return FOOTER.join(slack_text(content.body), escape(content.footer))


def section_blocks(text: str) -> list[dict[str, Any]]:
    """``text`` (as ``message_text`` made it) in section blocks: cut after a line's end where
    one is in a block's second half, else after a space; never inside ``<...>`` or an entity."""
    pieces: list[str] = []
    while len(text) > SECTION_CHARS:
        cut = _section_cut(text[:SECTION_CHARS])
        pieces.append(text[:cut])
        text = text[cut:]
    pieces.append(text)
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": piece}}
        for piece in pieces
        if piece.strip()
    ]


def _section_cut(window: str) -> int:
    for separator in ("\n", " "):
        at = window.rfind(separator)
        while at >= len(window) // 2:
            if not _in_markup(window, at):
                return at + 1
            at = window.rfind(separator, 0, at)
    at = len(window)
    while at > len(window) // 2 and _in_markup(window, at):
        at -= 1
    return at


def _in_markup(text: str, at: int) -> bool:
    """Whether ``at`` falls inside a ``<...>`` or an entity (``&amp;``) of ``text``."""
    if text.rfind("<", 0, at) > text.rfind(">", 0, at):
        return True
    entity = text.rfind("&", 0, at)
    return entity >= 0 and at - entity < 5 and ";" not in text[entity:at]


def asked_line(name: str, question: str, locale: Locale = "en") -> str:
    """The first line of an ``/ask`` answer in a channel: who asked what, escaped, and at most
    ``HEADING_CHARS`` long. A name, not a ``<@U…>`` mention: a bot's mention notifies."""
    name = " ".join(name.replace("*", "").split())[:ASKER_NAME_CHARS] or t("slack.someone", locale)
    line = t("slack.asked", locale, name=escape(name), question="")
    question = escape(" ".join(question.split()))
    room = HEADING_CHARS - len(line)
    if len(question) > room:  # cut, but not inside an entity (&amp; and the like)
        question = re.sub(r"&[a-z]*(?=…$)", "", shorten(question, room))
    return line + question


def _asked_patterns() -> list[re.Pattern[str]]:
    patterns = []
    for locale in LOCALES:
        template = re.escape(CATALOGUE["slack.asked"][locale])
        template = template.replace(r"\{name\}", r"(?P<name>[^*\n]+)", 1)
        template = template.replace(r"\{question\}", r"(?P<question>[^\n]*)", 1)
        patterns.append(re.compile(rf"\A{template}\n"))
    return patterns


_ASKED = _asked_patterns()


def read_asked(text: str) -> re.Match[str] | None:
    """How ``asked_line`` began ``text`` (in any locale): its ``name`` and ``question``
    groups, escaped as Slack has them; None if it did not."""
    return next((found for p in _ASKED if (found := p.match(text))), None)


def cannot_post_text(error: str, locale: Locale = "en") -> str:
    """What the asker is told when Slack refused the answer's first message with ``error``."""
    key = f"slack.cannot_post.{error}"
    if error != "other" and key in CATALOGUE:
        return t(key, locale)
    return t("slack.cannot_post.other", locale, error=escape(error))


def unescape(text: str) -> str:
    """What a person typed: Slack sends ``&``, ``<`` and ``>`` in messages as entities."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def question_from_mention(text: str, bot_user_id: str | None) -> str:
    """The question in an ``app_mention``: its text without the bot's mention(s)."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)
    return unescape(text).strip()
