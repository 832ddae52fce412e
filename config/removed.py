"""Settings no longer read, and what each became (a constant in the code that uses it, or a
value derived from other settings: issue #25 kept the ones an operator would change).

One still given, in the environment or ``.env``, is named in a warning at start and ignored,
never an error, so an older ``.env`` keeps working.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import create_model
from pydantic_settings import BaseSettings

from config.settings import Settings

log = logging.getLogger(__name__)

FIXED = "its value is now built in"
REMOVED_SETTINGS = {  # by field name, what each became
    "heartbeat_s": FIXED,
    "connect_timeout_s": FIXED,
    "request_queue_max_length": FIXED,
    "cancelled_sessions_max": FIXED,
    "cancelled_sessions_ttl_s": FIXED,
    "token_batch_s": FIXED,
    "top_p": FIXED,
    "min_p": FIXED,
    "seed": "always random; at temperature 0 it plays no part",
    "state_cache_mb": FIXED,
    "scrape_concurrency_per_host": FIXED,
    "scrape_user_agent": FIXED,
    "retrieval_passages": FIXED,
    "edit_interval_s": FIXED,
    "slack_edit_interval_s": FIXED,
    "history_max_chars": FIXED,
    "slack_api_url": FIXED,
    "log_level_libraries": "libraries log at CONCIERGE_LOG_LEVEL, never below INFO",
    "reply_timeout_s": "derived from CONCIERGE_REQUEST_TTL_S and CONCIERGE_ANSWER_TIME_LIMIT_S",
    "rescrape_reply_timeout_s": (
        "derived from CONCIERGE_REQUEST_TTL_S and CONCIERGE_RESCRAPE_TIME_LIMIT_S"
    ),
}


class _SameSources(BaseSettings):
    """Reads the environment and ``.env`` by the same rules as ``Settings``."""

    model_config = Settings.model_config


_OPTIONAL_TEXT: Any = (str | None, None)
_RemovedSettings = create_model(  # one optional text field per removed setting
    "_RemovedSettings", __base__=_SameSources, **dict.fromkeys(REMOVED_SETTINGS, _OPTIONAL_TEXT)
)


def removed_settings_given() -> dict[str, str]:
    """Each removed setting still set (in the environment or ``.env``), by its variable, with
    what it became."""
    given = _RemovedSettings().model_dump(exclude_none=True)
    return {f"CONCIERGE_{name.upper()}": REMOVED_SETTINGS[name] for name in given}


def warn_of_removed_settings() -> None:
    """Name, once at start, each variable that is set but no longer read."""
    for variable, became in removed_settings_given().items():
        log.warning("%s is set but no longer read (%s)", variable, became)
