"""What the tests of Discord's own controls share: buttons, clicks and their answers."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from bots.discord.adapter import ConciergeBot
from tests.discord_fixture import GUILD_ID
from tests.fake_discord import FakeDiscord
from tests.fake_discord_wire import APP_ID, Call, click_payload

EPHEMERAL = 64
DEFERRED_UPDATE = 6  # the interaction callback that shows nothing new

_ids = itertools.count(1_500_000_000_000_000_000)


# --- clicking -----------------------------------------------------------------------------------


def button(fake: FakeDiscord, message_id: int, prefix: str) -> dict[str, Any]:
    """The message's button whose custom id starts with ``prefix``."""
    found = [b for b in fake.buttons(message_id) if b["custom_id"].startswith(prefix)]
    assert len(found) == 1, fake.buttons(message_id)
    return found[0]


def click(
    bot: ConciergeBot,
    user: dict[str, Any],
    message: dict[str, Any],
    custom_id: str,
    *,
    guild: int | None = GUILD_ID,
    roles: Sequence[int] = (),
    locale: str = "en-US",
) -> int:
    """``user`` clicks the button ``custom_id`` on ``message``; returns the interaction's id."""
    interaction_id = next(_ids)
    payload = click_payload(
        interaction_id, user, message, custom_id, guild_id=guild, roles=roles, locale=locale
    )
    bot._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
    return interaction_id


async def told(fake: FakeDiscord, interaction_id: int) -> Call:
    """The ephemeral follow-up an interaction got (only its clicker sees it)."""
    path = f"/webhooks/{APP_ID}/token-{interaction_id}"
    call = await fake.wait_for(lambda c: c.method == "POST" and c.path == path)
    assert call.body["flags"] & EPHEMERAL
    return call


def _button(custom_id: str) -> dict[str, Any]:
    return {"type": 2, "style": 2, "custom_id": custom_id, "emoji": {"id": None, "name": "👍"}}
