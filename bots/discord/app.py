"""The Discord bot as a process: log in, answer until told to stop, then close."""

from __future__ import annotations

import asyncio

import discord

from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from config.settings import ConfigError, Settings
from config.spaces import load_spaces


async def run_discord(settings: Settings, stop: asyncio.Event) -> None:
    """Run the Discord bot until ``stop`` is set; a bad spaces file stops it before it logs in
    (``ConfigError``)."""
    if settings.discord_token is None:
        raise ConfigError("discord_token (CONCIERGE_DISCORD_TOKEN): not set")
    spaces = load_spaces(settings)
    concierge = ConciergeClient(settings, "discord", spaces=spaces)
    # Before replies flow: it takes over earlier answers.
    bot = ConciergeBot(settings, concierge, spaces=spaces)
    async with bot, concierge:  # the bot first: a take-over waits until it is ready
        running = asyncio.create_task(bot.start(settings.discord_token.get_secret_value()))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        await bot.close()
        try:
            await running
        except discord.LoginFailure as error:
            raise ConfigError(f"discord_token (CONCIERGE_DISCORD_TOKEN): {error}") from None
