"""What the broker raises that its callers handle, apart from aio-pika's own exceptions.

No aio-pika here: a caller names these without touching the broker library.
"""

from __future__ import annotations

from collections.abc import Sequence

from config.errors import EXIT_CONFIG, EXIT_UNAVAILABLE, ConciergeError
from config.urls import masked_url

QUEUE_TYPE_DOC = 'docs/reliability.md, "Moving from classic to quorum queues"'


class QueueFull(ConciergeError):
    """The request queue is at its length limit; the broker refused the request."""


class ReplyQueueTaken(ConciergeError):
    """Another process already consumes this bot's reply queue (it runs under the same name)."""


class BrokerUnavailable(ConciergeError, ConnectionError):
    """RabbitMQ cannot be reached; the message names the host, never the password."""

    exit_code = EXIT_UNAVAILABLE


class BrokerAway(ConciergeError, ConnectionError):
    """A reply event not confirmed: the connection or its channel is gone (being restored).
    Internal: the engine holds the event and sends it when the connection is back.

    ``maybe_sent``: it was written before the connection went, so the asker may have it."""

    def __init__(self, reason: str, *, maybe_sent: bool) -> None:
        super().__init__(reason)
        self.maybe_sent = maybe_sent


class QueueTypeMismatch(ConciergeError):
    """A queue exists on the broker with another type than ``CONCIERGE_QUEUE_TYPE`` says, or
    without an argument this version adds (``topology.argument_added``: the quorum request
    queue's delivery limit): a queue's type and arguments cannot change in place, so the
    setting (or the broker's queue, once drained) is what to change."""

    exit_code = EXIT_CONFIG


def cannot_reach(urls: Sequence[str], error: Exception) -> BrokerUnavailable:
    """The one wording of a failed connect, which ``cli/errors.py`` reads back: every address
    tried, masked (``config/urls.py``), the last cause's class only (its text may quote one)."""
    shown = ", ".join(masked_url(url) for url in urls)
    return BrokerUnavailable(f"cannot reach RabbitMQ at {shown}: {type(error).__name__}")


def wrong_queue_type(queue: str, queue_type: str) -> QueueTypeMismatch:
    return QueueTypeMismatch(
        f"the queue {queue} exists on the broker with another type than "
        f"CONCIERGE_QUEUE_TYPE={queue_type}: a queue's type cannot change in place "
        f"(see {QUEUE_TYPE_DOC})"
    )
