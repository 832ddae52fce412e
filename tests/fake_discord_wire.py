"""What the fake Discord sends and records: its ids, payloads, calls and JSON responses."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

API = "/api/v10"
BOT_ID = 1_100_000_000_000_000_001
APP_ID = 1_100_000_000_000_000_002
OWNER_ID = 1_100_000_000_000_000_003
BOT_USER = {"id": str(BOT_ID), "username": "Concierge", "discriminator": "0", "avatar": None}
BOT_USER |= {"bot": True, "global_name": None}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
JsonValue = Any


@dataclass(frozen=True)
class Call:
    """One HTTP call as the fake saw it: when it arrived, what it asked and how it was answered."""

    method: str
    path: str  # without the /api/v10 prefix
    body: JsonValue
    at: float  # time.monotonic() on arrival
    status: int
    response: JsonValue


@dataclass
class RateLimit:
    """Answer the next ``times`` calls matching ``method`` and ``path`` with a 429."""

    method: str
    path: re.Pattern[str]
    retry_after_s: float
    times: int = 1


@dataclass
class Drop:
    """Close the connection of the next ``times`` calls matching ``method`` and ``path``,
    unanswered (a network failure, which discord.py does not turn into a ``DiscordException``)."""

    method: str
    path: re.Pattern[str]
    times: int = 1


DROPPED = 0  # the status recorded for a dropped call


def _json(
    data: JsonValue, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """JSON with exactly ``application/json``: discord.py parses nothing else (no charset)."""
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _rate_limited(retry_after_s: float) -> web.Response:
    """A 429 as Discord sends it; ``Via`` tells discord.py it is not a Cloudflare ban."""
    headers = {
        "Via": "1.1 google",
        "Retry-After": str(max(1, round(retry_after_s))),
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset-After": str(retry_after_s),
        "X-RateLimit-Scope": "user",
    }
    body = {"message": "You are being rate limited.", "retry_after": retry_after_s, "global": False}
    return _json(body, status=429, headers=headers)


# --- gateway payloads -------------------------------------------------------------------------


def user_payload(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {"id": str(user_id), "username": name, "discriminator": "0", "avatar": None, "bot": bot}


def member_payload(user: dict[str, Any], roles: Sequence[int] = ()) -> dict[str, Any]:
    return {
        "user": user,
        "roles": [str(role) for role in roles],
        "joined_at": "2024-01-01T00:00:00+00:00",
        "deaf": False,
        "mute": False,
        "flags": 0,
    }


def role_payload(role_id: int, name: str, permissions: int) -> dict[str, Any]:
    return {
        "id": str(role_id),
        "name": name,
        "permissions": str(permissions),
        "position": 1,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
    }


def ready_payload() -> dict[str, Any]:
    return {
        "v": 10,
        "user": BOT_USER,
        "guilds": [],
        "session_id": "fake",
        "application": {"id": str(APP_ID), "flags": 0},
    }


def guild_payload(
    guild_id: int,
    channel_ids: Sequence[int],
    roles: Sequence[dict[str, Any]] = (),
    threads: Sequence[dict[str, Any]] = (),
    preferred_locale: str = "en-US",
    features: Sequence[str] = (),
) -> dict[str, Any]:
    """A guild as GUILD_CREATE brings it. Only a Community server (``features`` has
    "COMMUNITY") can choose its ``preferred_locale``: any other reports en-US."""
    everyone = role_payload(guild_id, "@everyone", 0)
    channels = [
        {
            "id": str(channel),
            "type": 0,
            "name": f"general-{n}",
            "position": n,
            "guild_id": str(guild_id),
        }
        for n, channel in enumerate(channel_ids)
    ]
    return {
        "id": str(guild_id),
        "name": f"guild {guild_id}",
        "owner_id": str(OWNER_ID),
        "roles": [everyone, *roles],
        "channels": channels,
        "members": [member_payload(BOT_USER)],
        "emojis": [],
        "stickers": [],
        "features": list(features),
        "member_count": 3,
        "unavailable": False,
        "threads": list(threads),
        "preferred_locale": preferred_locale,
    }


def thread_payload(thread_id: int, guild_id: int, parent_id: int) -> dict[str, Any]:
    """A public thread in ``parent_id`` (opened on the message ``thread_id``, if there is one)."""
    metadata = {
        "archived": False,
        "auto_archive_duration": 1440,
        "archive_timestamp": "2024-01-01T00:00:00+00:00",
        "locked": False,
    }
    return {
        "id": str(thread_id),
        "guild_id": str(guild_id),
        "parent_id": str(parent_id),
        "owner_id": str(OWNER_ID),
        "name": f"thread {thread_id}",
        "type": 11,
        "message_count": 0,
        "member_count": 0,
        "thread_metadata": metadata,
    }


def message_payload(
    message_id: int,
    channel_id: int,
    author: dict[str, Any],
    content: str,
    *,
    guild_id: int | None = None,
    mentions: Sequence[dict[str, Any]] = (),
    reference: dict[str, Any] | None = None,
    roles: Sequence[int] = (),
    referenced_message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "type": 19 if reference else 0,
        "content": content,
        "author": author,
        "mentions": list(mentions),
        "mention_roles": [],
        "mention_everyone": "@everyone" in content,
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "tts": False,
        "flags": 0,
        "timestamp": "2024-01-01T00:00:00+00:00",
        "edited_timestamp": None,
    }
    if reference:
        payload["message_reference"] = reference
    if referenced_message is not None:  # the gateway sends a reply's message along
        payload["referenced_message"] = referenced_message
    if guild_id is not None:
        payload["guild_id"] = str(guild_id)
        payload["member"] = member_payload(author, roles)
        del payload["member"]["user"]
    return payload


def reaction_payload(
    user: dict[str, Any],
    channel_id: int,
    message_id: int,
    *,
    guild_id: int | None = None,
    roles: Sequence[int] = (),
    emoji: str = "🛑",
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "user_id": user["id"],
        "channel_id": str(channel_id),
        "message_id": str(message_id),
        "emoji": {"id": None, "name": emoji},
        "type": 0,
        "burst": False,
    }
    if guild_id is not None:
        payload["guild_id"] = str(guild_id)
        payload["member"] = member_payload(user, roles)
    return payload


def interaction_payload(
    interaction_id: int,
    command: str,
    user: dict[str, Any],
    *,
    guild_id: int,
    channel_id: int,
    permissions: int,
    roles: Sequence[int] = (),
    locale: str = "en-US",
    guild_locale: str = "en-US",
) -> dict[str, Any]:
    """A slash command ``command`` used by ``user`` (with ``permissions`` in the channel)."""
    data = {"id": str(interaction_id + 1), "name": command, "type": 1, "options": []}
    return _interaction(
        interaction_id, 2, user, data, guild_id, channel_id, permissions, roles, locale
    ) | {"guild_locale": guild_locale}


def click_payload(
    interaction_id: int,
    user: dict[str, Any],
    message: dict[str, Any],
    custom_id: str,
    *,
    guild_id: int | None,
    permissions: int = 0,
    roles: Sequence[int] = (),
    locale: str = "en-US",
) -> dict[str, Any]:
    """A click by ``user`` on the button ``custom_id`` of ``message`` (as the fake keeps it:
    discord.py finds the button among the message's components)."""
    data = {"custom_id": custom_id, "component_type": 2}
    channel_id = int(message["channel_id"])
    payload = _interaction(
        interaction_id, 3, user, data, guild_id, channel_id, permissions, roles, locale
    )
    return payload | {"message": message}


def _interaction(
    interaction_id: int,
    kind: int,
    user: dict[str, Any],
    data: dict[str, Any],
    guild_id: int | None,
    channel_id: int,
    permissions: int,
    roles: Sequence[int],
    locale: str,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": str(interaction_id),
        "application_id": str(APP_ID),
        "type": kind,
        "token": f"token-{interaction_id}",
        "version": 1,
        "attachment_size_limit": 8_388_608,
        "channel_id": str(channel_id),
        "channel": {"id": str(channel_id), "type": 0 if guild_id else 1},
        "app_permissions": "0",
        "locale": locale,
        "data": data,
    }
    if guild_id is None:  # a DM: a user, no member
        payload["channel"]["recipients"] = [user]
        return payload | {"user": user, "context": 1}
    payload["channel"]["guild_id"] = str(guild_id)
    member = member_payload(user, roles) | {"permissions": str(permissions)}
    return payload | {"guild_id": str(guild_id), "member": member, "guild_locale": "en-US"}
