"""Feedback on a finished answer: Slack's 👍 / 👎 (``feedback_buttons`` in a ``context_actions``
block) under it, and what a click does.

Each button's value names the vote and the answer's session (``up:<session id>``), so a click
needs nothing remembered: it works on an answer from before a restart too. The click publishes
a ``Feedback`` (one vote per person and answer, changeable: the engine keeps the last) and the
voter alone is told it counted, or that it could not be saved.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bots.client import ConciergeClient
from bots.slack.people import SlackPeople
from config.texts import Locale, t

log = logging.getLogger(__name__)

VOTE_ACTION = "concierge_vote"  # the action id of the feedback buttons
VOTES: tuple[Literal["up", "down"], ...] = ("up", "down")


def vote_blocks(session_id: str, locale: Locale) -> list[dict[str, Any]]:
    """The feedback buttons for the answer of ``session_id``."""

    def button(vote: str, emoji: str) -> dict[str, Any]:
        return {
            "text": {"type": "plain_text", "text": emoji},
            "value": f"{vote}:{session_id}",
            "accessibility_label": t(f"vote.{vote}", locale),
        }

    element = {
        "type": "feedback_buttons",
        "action_id": VOTE_ACTION,
        "positive_button": button("up", "👍"),
        "negative_button": button("down", "👎"),
    }
    return [{"type": "context_actions", "elements": [element]}]


def read_vote(value: str) -> tuple[Literal["up", "down"], str] | None:
    """The vote and session id a button's value names; None if it names none."""
    vote, _, session_id = value.partition(":")
    for known in VOTES:
        if vote == known and session_id:
            return known, session_id
    return None


class SlackVotes:
    """Takes the clicks on the feedback buttons of ``app``'s answers to ``client``."""

    def __init__(self, app: AsyncApp, client: ConciergeClient, people: SlackPeople) -> None:
        self.web = app.client
        self.client = client
        self.people = people
        app.action(VOTE_ACTION)(self.on_vote)

    async def on_vote(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        await ack()
        user_id = (body.get("user") or {}).get("id", "")
        vote = read_vote(str(action.get("value", "")))
        if vote is None or not user_id:
            log.info("slack: a feedback click without a vote (%r)", action.get("value"))
            return
        locale = await self.people.locale(user_id)
        try:
            await self.client.vote(vote[1], user_id, vote[0])
        except Exception:
            log.exception("slack: the vote of %s on %s was not saved", user_id, vote[1])
            text = t("vote.failed", locale)
        else:
            text = t(f"vote.thanks_{vote[0]}", locale)
        await self._tell(body, respond, user_id, text)

    async def _tell(
        self, body: dict[str, Any], respond: AsyncRespond | None, user_id: str, text: str
    ) -> None:
        """A word for the voter alone: through the click's response URL, else ephemeral."""
        try:
            if respond is not None and body.get("response_url"):
                await respond(text=text, response_type="ephemeral", replace_original=False)
                return
            channel = (body.get("channel") or {}).get("id", "")
            await self.web.chat_postEphemeral(channel=channel, user=user_id, text=text)
        except Exception as error:  # the response URL expired, or Slack is out of reach
            log.info("slack: could not tell %s about their vote: %s", user_id, error)
