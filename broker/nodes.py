"""Connections to a broker with several addresses (the nodes of a cluster): the first that
answers, and the next one when it goes.

aio-pika's robust connection reconnects to the one URL it was given, and its first connect
gives up at the first refusal. ``NodesConnection`` moves to the next address at every
reconnect attempt (after a drop, or after an attempt that failed), in the order given and round
again; ``connect_robust_any`` makes the first connect try each address in turn. The channels,
queues, bindings and consumers declared on the connection are then restored on whichever node
it reaches, as after any reconnect (a queue that must be there on every node is a quorum
queue: ``topology``). Addresses are shown masked (``config/urls.py``) in every log line.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import aio_pika
from aio_pika.abc import AbstractConnection
from aio_pika.robust_connection import RobustConnection
from yarl import URL

from broker.errors import cannot_reach
from config.urls import masked_url

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0  # to reach the broker, and to wait for a channel being restored
CLASSIC_ON_A_CLUSTER = (
    "several broker addresses, but classic queues live on the node that declared them: set "
    "CONCIERGE_QUEUE_TYPE=quorum for queues that outlive a node"
)

# What each reconnect attempt of aio-pika's RobustConnection calls (since aio-pika 10.2): the
# one place an attempt can be pointed at another address. An aio-pika without it reconnects
# to the address it reached first, and a process given several says so at start;
# tests/test_cluster.py fails on it.
_ATTEMPT = "_RobustConnection__connect_transport"
ROTATES = hasattr(RobustConnection, _ATTEMPT)


class NodesConnection(RobustConnection):
    """A robust connection whose every reconnect attempt goes to the next address."""

    def __init__(self, urls: Sequence[URL], **kwargs: Any) -> None:
        super().__init__(urls[0], **kwargs)
        self.urls = tuple(urls)
        self._at = 0
        self._attempts = 0

    async def _RobustConnection__connect_transport(self) -> None:  # aio-pika names it so
        if self._attempts and len(self.urls) > 1:
            self._at = (self._at + 1) % len(self.urls)
            self.url = self.urls[self._at]
            log.info("connecting to RabbitMQ at %s", masked_url(str(self.url)))
        self._attempts += 1
        await getattr(super(), _ATTEMPT)()


async def connect_robust_any(
    urls: Sequence[str], timeout_s: float, **query: str | int
) -> NodesConnection:
    """A ``NodesConnection`` to the first address that answers, tried in the order given, each
    with ``query`` added (heartbeat, reconnect interval); ``BrokerUnavailable`` naming them all
    when none does."""
    full = [URL(url).update_query(query) for url in urls]
    if len(full) > 1 and not ROTATES:  # pragma: no cover - an aio-pika not tested with
        log.warning("this aio-pika reconnects to the node it reached first only (needs 10.2)")
    error: Exception = ConnectionError("no broker address given")
    for start in range(len(full)):
        ordered = [*full[start:], *full[:start]]  # on a drop, the next one after this
        connection = NodesConnection(ordered)
        try:
            await connection.connect(timeout=timeout_s)
        except Exception as failed:
            await connection.close()
            if start + 1 < len(full):  # the last one's error is raised, and said by the caller
                shown = masked_url(str(ordered[0]))
                log.info(
                    "cannot reach RabbitMQ at %s (%s): trying the next address",
                    shown,
                    type(failed).__name__,
                )
            error = failed
            continue
        return connection
    raise cannot_reach(urls, error) from error  # its cause: what cli/errors.py reads


async def connect_any(urls: Sequence[str], timeout_s: float) -> AbstractConnection:
    """A plain (not robust) connection to the first address that answers: for a look that
    declares nothing (``peek``)."""
    error: Exception = ConnectionError("no broker address given")
    for url in urls:
        try:
            return await aio_pika.connect(url, timeout=timeout_s)
        except Exception as failed:
            error = failed
    raise cannot_reach(urls, error) from error  # its cause: what cli/errors.py reads
