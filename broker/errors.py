"""What the broker raises that its callers handle, apart from aio-pika's own exceptions.

No aio-pika here: a caller names these without touching the broker library.
"""

from __future__ import annotations

from config.errors import EXIT_UNAVAILABLE, ConciergeError
from config.urls import masked_url


class QueueFull(ConciergeError):
    """The request queue is at its length limit; the broker refused the request."""


class ReplyQueueTaken(ConciergeError):
    """Another process already consumes this bot's reply queue (it runs under the same name)."""


class BrokerUnavailable(ConciergeError, ConnectionError):
    """RabbitMQ cannot be reached; the message names the host, never the password."""

    exit_code = EXIT_UNAVAILABLE


def cannot_reach(url: str, error: Exception) -> BrokerUnavailable:
    """The one wording of a failed connect, which ``cli/errors.py`` reads back: the URL masked
    (``config/urls.py``), the cause's class only (its text may quote the URL)."""
    return BrokerUnavailable(f"cannot reach RabbitMQ at {masked_url(url)}: {type(error).__name__}")
