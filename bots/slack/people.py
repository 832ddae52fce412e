"""Who a Slack user is, as ``users.info`` says (``users:read``): their locale, their name, and
whether they are an admin.

The locale picks the language of every text the bot writes for them (``include_locale``: Slack
leaves it out otherwise); without one, ``CONCIERGE_LOCALE``. A user's record is kept for
``USER_KEEP_S`` (a changed language shows within the hour) and at most ``USERS_KEPT`` of them,
so asking costs one call per person per hour (a lookup that failed is kept for
``FAILED_KEEP_S``). The names a thread's history shows come from the same records. Whether
someone is a workspace admin is asked afresh each time: a stop or a rescrape must not rest on
an hour-old answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from cachetools import TLRUCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.stream import OUT_OF_REACH
from config.texts import Locale, locale_of

log = logging.getLogger(__name__)

USERS_KEPT = 1000
USER_KEEP_S = 3600.0
FAILED_KEEP_S = 60.0  # a lookup that failed is not tried again for each event
LOOKUP_TIMEOUT_S = 2.0  # a slash command must be answered within 3 s, locale or not


class SlackPeople:
    """``users.info`` through ``web``, remembered; ``default`` is ``CONCIERGE_LOCALE``."""

    def __init__(self, web: AsyncWebClient, *, default: Locale) -> None:
        self.web = web
        self.default = default
        # By user id, the record ({} if the lookup failed).
        self._users: TLRUCache[str, Mapping[str, Any]] = TLRUCache(
            USERS_KEPT, _kept_until, timer=time.monotonic
        )

    async def user(self, user_id: str) -> Mapping[str, Any]:
        """What Slack says of ``user_id`` ({} if it says nothing in time)."""
        kept = self._users.get(user_id)
        if kept is not None:
            return kept
        user = await self._look_up(user_id)
        self._users[user_id] = user
        return user

    async def _look_up(self, user_id: str) -> Mapping[str, Any]:
        try:
            async with asyncio.timeout(LOOKUP_TIMEOUT_S):
                response = await self.web.users_info(user=user_id, include_locale=True)
        except SlackApiError as error:
            log.info("slack: users.info for %s failed: %s", user_id, error.response.get("error"))
            return {}
        except TimeoutError:
            log.info("slack: users.info for %s took over %g s", user_id, LOOKUP_TIMEOUT_S)
            return {}
        except Exception as error:  # Slack out of reach: the default locale serves
            log.info("slack: users.info for %s failed: %r", user_id, error)
            return {}
        return response.get("user") or {}

    async def locale(self, user_id: str) -> Locale:
        """The language to write to ``user_id`` in."""
        return locale_of((await self.user(user_id)).get("locale"), self.default)

    async def display_name(self, user_id: str, fallback: str = "") -> str:
        """How Slack shows ``user_id`` (display name, else real name, else user name), else
        ``fallback`` (a slash command's ``user_name``), else the id."""
        user = await self.user(user_id)
        profile = user.get("profile") or {}
        shown = profile.get("display_name") or profile.get("real_name") or user.get("name")
        return str(shown or fallback or user_id)

    async def is_admin(self, user_id: str) -> bool:
        """A workspace admin or owner, as ``users.info`` says now (the admins the settings
        list are ``bots.access``'s)."""
        try:
            response = await self.web.users_info(user=user_id)
        except SlackApiError as error:
            log.warning("slack: users.info for %s failed: %s", user_id, error.response["error"])
            return False
        except OUT_OF_REACH as error:  # no answer: no admin rights on a guess
            log.warning("slack: no answer to users.info for %s (%r): not an admin", user_id, error)
            return False
        user = response.get("user") or {}
        return bool(user.get("is_admin") or user.get("is_owner"))


def _kept_until(user_id: str, user: Mapping[str, Any], now: float) -> float:
    """Until when a record is kept: a failed lookup (``{}``) only briefly."""
    return now + (USER_KEEP_S if user else FAILED_KEEP_S)
