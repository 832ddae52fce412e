"""What the answer lifecycle tests share: a recording stage, admin checks and a tap."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Mapping

import pytest

from bots.answers import Answer, Answers
from bots.client import ConciergeClient
from bots.renderer import MessageContent
from bots.session import Session
from broker.amqp import Broker
from broker.protocol import Started, new_session_id
from tests.helpers import WireTap

QUESTION_ID = 1  # the platform's id of the asking message
PLACE = {"channel": "c1", "question": str(QUESTION_ID)}
ASKER = "asker"

_message_ids = itertools.count(1000)


class RecordingStage:
    """A platform in memory: each posted message gets the next number."""

    def __init__(self, question: int | None = QUESTION_ID) -> None:
        self.question = question
        self.on_post: Callable[[int], None] = lambda _: None
        self.shown: dict[int, MessageContent] = {}
        self.posted: list[int] = []
        self.ended_with: list[int | None] = []
        self.on_edit: Callable[[int], None] = lambda _: None
        self._changed = asyncio.Event()

    def key(self, message: int) -> int:
        return message

    def place(self, placeholder: int) -> dict[str, str]:
        return {"message": str(placeholder)}

    async def post(self, content: MessageContent, after: int | None) -> int:
        message = next(_message_ids)
        self.on_post(message)
        self.posted.append(message)
        self.shown[message] = content
        self._changed.set()
        return message

    async def edit(self, handle: int, content: MessageContent) -> None:
        self.on_edit(handle)
        self.shown[handle] = content
        self._changed.set()

    async def ended(self, first: int | None) -> None:
        self.ended_with.append(first)
        self._changed.set()

    async def until(self, condition: Callable[[], object], timeout_s: float = 60.0) -> None:
        """Wait until ``condition`` holds, checking after each change."""
        async with asyncio.timeout(timeout_s):
            while not condition():
                self._changed.clear()
                await self._changed.wait()


class AdminCheck:
    """An adapter's admin check that counts how often it was asked."""

    def __init__(self, admin: bool) -> None:
        self.admin = admin
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.admin


def no_resume(context: Mapping[str, str]) -> None:
    return None


def answers_for(
    client: ConciergeClient,
    *,
    resume: Callable[[Mapping[str, str]], tuple[RecordingStage, int] | None] = no_resume,
    max_chars: int = 2000,
) -> Answers[int]:
    return Answers[int](client, resume=resume, max_chars=max_chars, edit_interval_s=0.0)


async def unsaid(text: str) -> None:
    raise AssertionError(f"the asker was told {text!r}")


async def started(answers: Answers[int], stage: RecordingStage) -> Answer:
    """The answer once its placeholder is up, with the engine's start given to it."""
    await stage.until(lambda: stage.posted)
    answer = answers.find(QUESTION_ID)
    assert answer is not None
    answer.session.items.put_nowait(
        Started(session_id=answer.session.session_id, seq=0, waited_s=0)
    )
    await stage.until(lambda: "answering" in stage.shown[stage.posted[0]].footer)
    return answer


async def cancels_until_marker(client: ConciergeClient, tap: WireTap) -> list[tuple[str, str]]:
    """Every cancel sent so far, as (session, user): a marker cancel goes last on the same
    channel, so once it arrives, nothing sent before it is still on its way."""
    marker = Session(new_session_id(), "marker", 1.0)
    await client.cancel(marker, "marker")
    await tap.until(lambda: any(cancel.user_id == "marker" for cancel in tap.cancels))
    return [(c.session_id, c.user_id) for c in tap.cancels if c.user_id != "marker"]


@pytest.fixture
async def tap(broker: Broker, client: ConciergeClient) -> AsyncIterator[WireTap]:
    watching = await WireTap.open(broker, client.bot_id)
    yield watching
    await watching.channel.close()
