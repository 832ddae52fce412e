"""Where the bot answers, in which space, and who is an admin (may stop anyone's answer, may
``/rescrape``): the settings' allow-lists and admin lists and the spaces' places and admins,
read the same way on every platform. An adapter gives its platform's facts: the channel and
what it belongs to, the user's roles, and whether the platform itself makes them an admin
(Discord's Manage Server, Slack's workspace admins).

A space's ``admins`` (docs/spaces.md) may rebuild that space only: their ids are user ids, and
on Discord role ids too (Discord's ids never collide, so one list holds both). The deployment's
admins may rebuild every space.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from config.settings import Settings
from config.spaces import DEFAULT_SPACE, Platform, Spaces


@dataclass(frozen=True)
class Access:
    """The lists, by id; an empty allow-list allows everywhere. ``spaces`` None: only
    ``default`` (a deployment without a spaces file)."""

    admin_user_ids: frozenset[str] = frozenset()
    admin_role_ids: frozenset[str] = frozenset()
    allowed_guild_ids: frozenset[str] = frozenset()
    allowed_channel_ids: frozenset[str] = frozenset()
    spaces: Spaces | None = field(default=None, compare=False)

    @classmethod
    def from_settings(cls, settings: Settings, spaces: Spaces | None = None) -> Access:
        return cls(
            frozenset(settings.admin_user_ids),
            frozenset(settings.admin_role_ids),
            frozenset(settings.allowed_guild_ids),
            frozenset(settings.allowed_channel_ids),
            spaces,
        )

    def allows_channel(self, *channel_ids: str) -> bool:
        """Whether the bot answers in a channel known by ``channel_ids`` (a thread's own id
        and its parent's: a thread counts as its channel too)."""
        allowed = self.allowed_channel_ids
        return not allowed or any(channel_id in allowed for channel_id in channel_ids)

    def allows_guild(self, guild_id: str | None) -> bool:
        """Whether the bot answers in the server ``guild_id``; a DM (None) is in none."""
        return not self.allowed_guild_ids or guild_id in self.allowed_guild_ids

    def space_at(self, platform: Platform, group: str | None, *channel_ids: str) -> str:
        """The space serving a place: the first of ``channel_ids`` a space names (a thread's
        own id, then its parent's), else the space naming its ``group`` (a Discord server, a
        Slack workspace), else ``default``."""
        if self.spaces is None:
            return DEFAULT_SPACE
        for channel_id in channel_ids:
            named = self.spaces.space_for_place(platform, None, channel_id)
            if named != DEFAULT_SPACE:
                return named
        return self.spaces.space_for_place(platform, group, None)

    def bot_name(self, space: str) -> str | None:
        """The persona's display name in ``space``, if it has one."""
        found = self.spaces.get(space) if self.spaces is not None else None
        return found.bot_name if found is not None else None

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

    def may_rescrape(
        self,
        space: str,
        user_id: str,
        role_ids: Iterable[str] = (),
        *,
        platform_admin: bool = False,
    ) -> bool:
        """An admin of the deployment (``is_admin``), or one of ``space``'s own admins, by
        user id or role id: a space's admin rebuilds that space, no other."""
        roles = tuple(role_ids)
        if self.is_admin(user_id, roles, platform_admin=platform_admin):
            return True
        found = self.spaces.get(space) if self.spaces is not None else None
        admins = found.admins if found is not None else frozenset()
        return user_id in admins or any(role_id in admins for role_id in roles)
