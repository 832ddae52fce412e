"""The persona's name on Discord: the bot's nickname in each server a space names.

A bot cannot post one message under another name (a webhook can, but its message cannot reply
to the question and is not the bot's own, by which a follow-up finds the answer), so a
space's ``bot_name`` becomes the bot's nickname in the servers that space names
(``discord_guilds``), set when the bot is ready and when it joins a server. A space that names
only a channel inside another server leaves that server's nickname alone: a nickname is the
whole server's, and its other channels speak for another space. Without the Change Nickname
permission the bot says so in one line and keeps its name; nothing else depends on it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import discord

from bots.access import Access

log = logging.getLogger(__name__)


async def show_persona_names(guilds: Iterable[discord.Guild], access: Access) -> None:
    """Set the bot's nickname to its persona's name in each of ``guilds`` a space with a
    ``bot_name`` names; a server where it already has that name is not asked."""
    for guild in guilds:
        name = access.bot_name(access.space_at("discord", str(guild.id)))
        me = guild.me
        if name is None or me is None or me.nick == name:
            continue
        try:
            await me.edit(nick=name)
        except discord.Forbidden:
            log.warning(
                "discord: cannot set the nickname %r in server %s: the bot lacks the Change "
                "Nickname permission there; it keeps its own name",
                name,
                guild.id,
            )
        except discord.HTTPException as error:
            log.warning(
                "discord: cannot set the nickname %r in server %s: %s", name, guild.id, error
            )
        else:
            log.info("discord: nickname %r set in server %s", name, guild.id)
