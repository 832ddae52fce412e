"""The buttons under an answer on Discord: Stop while it runs, 👍 / 👎 once it is done.

Each is a persistent ``DynamicItem``: its custom id carries what a click needs (the session,
and for Stop who asked), so a click works in any process of the bot, one started after the
answer was posted included; nothing is kept per message. A click is acknowledged at once
with an invisible deferred update (Discord wants an answer within 3 s; a stop or a vote
waits for the broker), and anything the clicker must read comes as an ephemeral follow-up
in their own locale: only they see it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Protocol, Self, runtime_checkable

import discord

from bots.answers import Answers, StopOutcome
from bots.client import ConciergeClient, Vote
from bots.renderer import FINAL_STATUSES, Status
from config.texts import Locale, t

log = logging.getLogger(__name__)

CLICK_TIMEOUT_S = 10.0  # a stop or vote the broker has not confirmed by then failed
SESSION = r"[A-Za-z0-9_-]{8,64}"  # broker.protocol.SessionId
STOP_PREFIX = "concierge:stop:"
VOTE_PREFIX = "concierge:vote:"
STOP_EMOJI = "🛑"
VOTE_EMOJIS: dict[Vote, str] = {"up": "👍", "down": "👎"}


@runtime_checkable
class ButtonHost(Protocol):
    """What a click needs of the bot it came to (``interaction.client``)."""

    answers: Answers[int]
    concierge: ConciergeClient

    def is_admin(
        self,
        user_id: int,
        member: discord.Member | None,
        permissions: discord.Permissions | None = None,
    ) -> bool: ...

    def locale_for(self, interaction: discord.Interaction[Any]) -> Locale: ...


class StopButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
    template=rf"{STOP_PREFIX}(?P<session>{SESSION}):(?P<asker>\d{{1,20}})",
):
    """Stops the answer of ``session_id``: its asker may, and an admin."""

    def __init__(
        self, session_id: str, asker: str, label: str = "Stop", *, disabled: bool = False
    ) -> None:
        button: discord.ui.Button[discord.ui.View] = discord.ui.Button(
            style=discord.ButtonStyle.danger,
            label=label,
            emoji=STOP_EMOJI,
            custom_id=f"{STOP_PREFIX}{session_id}:{asker}",
            disabled=disabled,
        )
        super().__init__(button)
        self.session_id, self.asker = session_id, asker

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> Self:
        return cls(match["session"], match["asker"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        host = interaction.client
        if isinstance(host, ButtonHost):
            await stop_clicked(host, interaction, self.session_id, self.asker)


class VoteButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
    template=rf"{VOTE_PREFIX}(?P<session>{SESSION}):(?P<vote>up|down)",
):
    """One person's 👍 or 👎 on the answer of ``session_id`` (the engine keeps one each)."""

    def __init__(self, session_id: str, vote: Vote, label: str = "") -> None:
        button: discord.ui.Button[discord.ui.View] = discord.ui.Button(
            style=discord.ButtonStyle.secondary,
            label=label or None,
            emoji=VOTE_EMOJIS[vote],
            custom_id=f"{VOTE_PREFIX}{session_id}:{vote}",
        )
        super().__init__(button)
        self.session_id, self.vote = session_id, vote

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> Self:
        vote: Vote = "up" if match["vote"] == "up" else "down"
        return cls(match["session"], vote)

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        host = interaction.client
        if isinstance(host, ButtonHost):
            await vote_clicked(host, interaction, self.session_id, self.vote)


PERSISTENT_BUTTONS = (StopButton, VoteButton)  # for ``Client.add_dynamic_items``


def controls(
    status: Status | None, session_id: str, asker: str, locale: Locale, *, votes: bool = True
) -> discord.ui.View | None:
    """The buttons under the message that shows ``status`` (None: a message without one).

    Stop while the answer is queued or runs (greyed out once it is being stopped), 👍 / 👎
    once it is done (``votes``: an answer, not a rescrape), nothing otherwise.
    """
    if status is None or not session_id:
        return None
    view = discord.ui.View(timeout=None)
    if status not in FINAL_STATUSES:
        label = t("stop.button", locale)
        view.add_item(StopButton(session_id, asker, label, disabled=status is Status.STOPPING))
    elif status is Status.DONE and votes:
        view.add_item(VoteButton(session_id, "up", t("vote.up", locale)))
        view.add_item(VoteButton(session_id, "down", t("vote.down", locale)))
    else:
        return None
    return view


# --- clicks -----------------------------------------------------------------------------------


async def stop_clicked(
    host: ButtonHost, interaction: discord.Interaction[Any], session_id: str, asker: str
) -> None:
    """The asker's or an admin's click stops the answer (the answer itself then shows it);
    anyone else is told they may not. A click on an answer this process does not show (ended,
    or left by a process that stopped) says what it did and takes the stale button away, since
    no answer here will edit that message."""
    await _acknowledge(interaction)
    locale = host.locale_for(interaction)
    user = interaction.user
    member = user if isinstance(user, discord.Member) else None
    permissions = interaction.permissions if member is not None else None

    def is_admin() -> bool:
        return host.is_admin(user.id, member, permissions)

    # Looked up first: an answer shown here that ends meanwhile takes its own buttons off.
    shown_here = host.answers.find_session(session_id) is not None
    try:
        stopping = host.answers.stop_session(session_id, str(user.id), is_admin, asker=asker)
        outcome = await asyncio.wait_for(stopping, CLICK_TIMEOUT_S)
    except Exception:
        log.exception("could not stop session %s for %s", session_id, user.id)
        await _tell(interaction, t("refusal.engine_down", locale))
        return
    if outcome is StopOutcome.NOT_ALLOWED:
        await _tell(interaction, t("stop.not_allowed", locale))
    elif not shown_here:  # no answer here will ever edit that message
        ended = outcome is StopOutcome.ENDED
        await _tell(interaction, t("stop.already_ended" if ended else "stop.stopping", locale))
        await _remove_stale(interaction)
    # stopped or ending here: the answer's own edits show it and take its Stop button off


async def vote_clicked(
    host: ButtonHost, interaction: discord.Interaction[Any], session_id: str, vote: Vote
) -> None:
    """Send the clicker's vote (the engine keeps the last one per person) and thank them."""
    await _acknowledge(interaction)
    locale = host.locale_for(interaction)
    user_id = str(interaction.user.id)
    try:
        await asyncio.wait_for(host.concierge.vote(session_id, user_id, vote), CLICK_TIMEOUT_S)
    except Exception:
        log.exception("could not send the vote of %s on session %s", user_id, session_id)
        await _tell(interaction, t("vote.failed", locale))
        return
    await _tell(interaction, t("vote.thanks_up" if vote == "up" else "vote.thanks_down", locale))


async def _acknowledge(interaction: discord.Interaction[Any]) -> None:
    """A deferred update: Discord stops waiting, and nothing new shows in the channel."""
    try:
        await interaction.response.defer()
    except discord.HTTPException as error:  # too late (over 3 s): the click still counts
        log.info("could not acknowledge a click: %s", error)


async def _tell(interaction: discord.Interaction[Any], text: str) -> None:
    """Tell only the clicker."""
    try:
        await interaction.followup.send(text, ephemeral=True)
    except discord.HTTPException as error:
        log.info("could not answer a click: %s", error)


async def _remove_stale(interaction: discord.Interaction[Any]) -> None:
    """Take the buttons off a message whose answer ended without taking them off itself
    (its process stopped before the final edit)."""
    message = interaction.message
    if message is None:
        return
    try:
        await message.edit(view=None)
    except discord.HTTPException as error:
        log.info("could not remove a stale stop button: %s", error)
