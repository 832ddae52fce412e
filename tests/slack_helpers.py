"""What the Slack adapter tests share: footers, what Slack shows, and waiting for it."""

from __future__ import annotations

import re
from collections.abc import Callable

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.renderer import Status, footer_for, split_text
from bots.slack.format import BODY_CHARS, FOOTER_SEPARATOR, slack_text, unescape
from broker.protocol import Done
from engine.worker import Worker
from tests.fake_slack import FakeSlack, Message
from tests.helpers import collect
from tests.slack_fixture import CHANNEL

DONE = footer_for(Status.DONE, "", 0)
STOPPED = footer_for(Status.STOPPED, "", 0)


FINAL_MARKS = ("✅", "🛑 stopped", "⚠️", "⌛", "⏱️")  # how the Renderer's final footers begin
FOOTER_MARKS = ("⏳", "✍", "🛑", "✅", "⚠️", "⌛", "⏱️")
ASKED_LINE = re.compile(r"\A\*[^*\n]*\* asked: [^\n]*\n")  # how an /ask answer opens


def answer_messages(fake: FakeSlack, thread_ts: str | None) -> list[Message]:
    """The answer in a question's thread; for a slash command, in the channel then its thread."""
    if thread_ts is not None:
        return fake.thread(CHANNEL, thread_ts)
    first = fake.thread(CHANNEL, None)[:1]
    return first + (fake.thread(CHANNEL, first[0].ts) if first else [])


def parts(text: str) -> tuple[str, str]:
    """A message's (unescaped) body and its status line, if it has one."""
    text = ASKED_LINE.sub("", text)
    if text.startswith(FOOTER_MARKS):
        return "", text
    body, separator, footer = text.rpartition(FOOTER_SEPARATOR)
    if separator and footer.startswith(FOOTER_MARKS):
        return unescape(body), footer
    return unescape(text), ""


def as_slack_shows(text: str, max_chars: int = BODY_CHARS) -> str:
    """The answer ``text`` as its messages show it, joined (each piece formatted alone)."""
    return unescape("".join(slack_text(piece) for piece in split_text(text, max_chars)))


def shown(messages: list[Message]) -> tuple[str, str]:
    """The whole text the answer's messages show now, and the status line of the last one."""
    bodies = [parts(message.text)[0] for message in messages]
    return "".join(bodies), parts(messages[-1].text)[1]


async def wait_until_shown(
    fake: FakeSlack,
    thread_ts: str | None,
    until: Callable[[str, str], bool] = lambda _, footer: footer.startswith(FINAL_MARKS),
    timeout_s: float = 60.0,
) -> list[Message]:
    """Wait until the answer's messages show a text and footer that satisfy ``until``."""

    def check() -> list[Message] | None:
        messages = answer_messages(fake, thread_ts)
        return messages if messages and until(*shown(messages)) else None

    result = await fake.wait_for(check, timeout_s)
    assert result is not None
    return result


def answer_given(worker: Worker) -> str:
    """The whole text of the one answer ``worker`` gave: its terminal event as it was sent
    (asking again would cost a second long answer of the model)."""
    ends = [r.end for r in worker._answered.values() if r is not None and r.end is not None]
    assert len(ends) == 1 and isinstance(ends[0], Done), ends
    return ends[0].text


async def direct_answer(client: ConciergeClient, question: str) -> str:
    """The model's answer asked without Slack (deterministic: temperature 0, fixed seed)."""
    events = await collect(await client.ask(Ask(question, "direct")))
    assert isinstance(events[-1], Done), events[-1]
    return events[-1].text
