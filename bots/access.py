"""Where the bot answers and who is an admin (may stop anyone's answer, may ``/rescrape``): the
settings' allow-lists and admin lists, read the same way on every platform. An adapter gives
its platform's facts: the channel and what it belongs to, the user's roles, and whether the
platform itself makes them an admin (Discord's Manage Server, Slack's workspace admins).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from config.settings import Settings


@dataclass(frozen=True)
class Access:
    """The lists, by id; an empty allow-list allows everywhere."""

    admin_user_ids: frozenset[str] = frozenset()
    admin_role_ids: frozenset[str] = frozenset()
    allowed_guild_ids: frozenset[str] = frozenset()
    allowed_channel_ids: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Settings) -> Access:
        return cls(
            frozenset(settings.admin_user_ids),
            frozenset(settings.admin_role_ids),
            frozenset(settings.allowed_guild_ids),
            frozenset(settings.allowed_channel_ids),
        )

    def allows_channel(self, *channel_ids: str) -> bool:
        """Whether the bot answers in a channel known by ``channel_ids`` (a thread's own id
        and its parent's: a thread counts as its channel too)."""
        allowed = self.allowed_channel_ids
        return not allowed or any(channel_id in allowed for channel_id in channel_ids)

    def allows_guild(self, guild_id: str | None) -> bool:
        """Whether the bot answers in the server ``guild_id``; a DM (None) is in none."""
        return not self.allowed_guild_ids or guild_id in self.allowed_guild_ids

    def is_admin(
        self, user_id: str, role_ids: Iterable[str] = (), *, platform_admin: bool = False
    ) -> bool:
        """A listed admin user, a user with a listed admin role, or an admin as the platform
        says (``platform_admin``)."""
        return (
            platform_admin
            or user_id in self.admin_user_ids
            or any(role_id in self.admin_role_ids for role_id in role_ids)
        )
