"""What the tests of Slack's own AI-app features share: streams, stop and vote controls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from tests.fake_slack import FakeSlack, Message
from tests.slack_fixture import CHANNEL
from tests.slack_helpers import parts


@pytest.fixture
async def web(fake: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    """A Web API client of the fake's, for a sink or a thread status on its own."""
    client = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    yield client
    if client.session is not None:
        await client.session.close()


async def streamed_to_its_end(fake: FakeSlack, thread_ts: str) -> Message:
    """The first message streamed in ``thread_ts``, once its stream is over and it has ended."""

    def ended() -> Message | None:
        streamed = [m for m in fake.thread(CHANNEL, thread_ts) if m.streamed]
        done = streamed and not streamed[0].streaming and parts(streamed[0].text)[1]
        return streamed[0] if done and parts(streamed[0].text)[1][0] in "✅🛑⚠⌛⏱" else None

    found = await fake.wait_for(ended, 60)
    assert found is not None
    return found


def vote_values(blocks: list[dict[str, Any]]) -> list[str]:
    """The values of the feedback buttons in ``blocks``, positive first."""
    return [
        element[button]["value"]
        for block in blocks
        if block["type"] == "context_actions"
        for element in block["elements"]
        if element["type"] == "feedback_buttons"
        for button in ("positive_button", "negative_button")
    ]
