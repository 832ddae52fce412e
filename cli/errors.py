"""The one line ``concierge`` prints for a failure a user can meet: what failed, and what to do.

The exceptions come from inside aio-pika, discord.py and slack-sdk; their own messages name a
class (``AMQPConnectionError``), not a cause. The cause sits further down the exception chain.
"""

from __future__ import annotations

import socket

import aiohttp
from aiormq.exceptions import ProbableAuthenticationError

from broker.errors import BrokerUnavailable
from config.errors import EXIT_UNAVAILABLE, ConciergeError


class ConsoleFailed(ConciergeError):
    """The web console's process (run by ``concierge up``) stopped before it served: its own
    one line and exit code (the child's, so a refused port still exits 78)."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, message: str, exit_code: int = EXIT_UNAVAILABLE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


START_RABBITMQ = "start it with 'rabbitmq-server -detached' (or 'docker compose up -d rabbitmq')"
BROKER_PREFIX = "cannot reach RabbitMQ at "


def broker_unavailable(error: BrokerUnavailable) -> str:
    """``cannot reach RabbitMQ at <url> (<cause>); <what to do>``, the password masked (the
    message names the URL as ``BrokerUnavailable`` gives it, never the settings)."""
    message = str(error)
    if message.startswith(BROKER_PREFIX):  # "... at <url>: <class>": the class is replaced
        message = message.rsplit(": ", 1)[0]
    cause = _innermost_os_error(error)
    if isinstance(cause, ProbableAuthenticationError):
        return f"{message} (login refused); check the user and password in CONCIERGE_BROKER_URL"
    if isinstance(cause, socket.gaierror):
        return f"{message} (unknown host); check the host in CONCIERGE_BROKER_URL"
    if cause is None:  # it answered, but not as expected (a missing virtual host, say)
        return f"{message} ({_class_of(error)}); check CONCIERGE_BROKER_URL"
    return f"{message} ({type(cause).__name__}); is it running? {START_RABBITMQ}"


def platform_unreachable(error: aiohttp.ClientConnectorError, platform: str | None) -> str:
    """``cannot reach Discord at discord.com:443 (unknown host); ...``: DNS failures, refused
    connections and TLS failures, raised from inside discord.py or slack-sdk."""
    where = f"{error.host}:{error.port}"
    if platform:
        where = f"{platform} at {where}"
    cause = error.os_error
    reason = "unknown host" if isinstance(cause, socket.gaierror) else type(cause).__name__
    return f"cannot reach {where} ({reason}); check this machine's network connection"


def _innermost_os_error(error: BaseException) -> OSError | None:
    """The deepest ``OSError`` below ``error`` in its chain (``BrokerUnavailable`` is raised
    ``from None``: its cause stays in ``__context__``)."""
    found: OSError | None = None
    seen: set[int] = set()
    current = error.__cause__ or error.__context__
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError):
            found = current
        current = current.__cause__ or current.__context__
    return found


def _class_of(error: BaseException) -> str:
    cause = error.__cause__ or error.__context__
    return type(cause or error).__name__
