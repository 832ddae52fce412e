"""Quorum queues on a three-node cluster, and connections with several broker addresses.

The cluster is started once for the run (``tests/cluster_fixture.py``, ``scripts/cluster.sh``);
a test that stops a node starts it again. Each test has broker names of its own. The tests
marked ``cluster`` can be left out with ``-m "not cluster"`` (about 50 s on two cores).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pydantic import SecretStr

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.errors import BrokerUnavailable, QueueTypeMismatch
from broker.messages import Envelope
from broker.protocol import Cancel, Done, Request, Started, make_request
from config.errors import EXIT_CONFIG
from config.settings import Settings, load_settings
from tests.cli_fixture import cli_env, closed_port, concierge  # noqa: F401  # fixture
from tests.cluster_fixture import Cluster

WAIT_S = 30.0  # a leader election after a node stops takes a few seconds on busy cores


def cluster_settings(local: Cluster, *nodes: int) -> Settings:
    """Quorum queues under names of the test's own, on the cluster's nodes in this order."""
    return load_settings(
        prefix=f"cluster-{uuid.uuid4().hex[:12]}",
        broker_url=local.urls(*nodes),
        queue_type="quorum",
        request_ttl_s=60,
        metrics_port=0,
    )


def on_nodes(settings: Settings, local: Cluster, *nodes: int) -> Settings:
    """The same names, reached through these nodes."""
    return settings.model_copy(update={"broker_url": SecretStr(local.urls(*nodes))})


def collecting(inbox: asyncio.Queue[Any]) -> Callable[[Envelope[Any]], Awaitable[None]]:
    async def take(envelope: Envelope[Any]) -> None:
        await envelope.ack()
        await inbox.put(envelope.message)

    return take


def request(question: str = "Which node answers?") -> Request:
    return make_request(reply_to="cluster-bot", user_id="u1", question=question, ttl_s=60)


@asynccontextmanager
async def cleaned(settings: Settings) -> AsyncIterator[None]:
    """The test's queues and exchanges deleted from the cluster afterwards."""
    try:
        yield
    finally:
        async with Broker(settings) as broker:
            cleanup = await broker.connection.channel()
            await cleanup.queue_delete(broker.names.cancel_queue(settings.engine_name))
            await broker.delete_all()


async def queue_types(local: Cluster, prefix: str) -> dict[str, str]:
    listing = await local.script(
        "ctl", "1", "-q", "--no-table-headers", "list_queues", "name", "type"
    )
    rows = (line.split() for line in listing.splitlines())
    return {row[0]: row[1] for row in rows if len(row) == 2 and row[0].startswith(prefix)}


async def test_a_request_queued_on_one_node_is_served_from_another(cluster: Cluster) -> None:
    settings = cluster_settings(cluster, 1)
    on_node_2 = on_nodes(settings, cluster, 2)
    async with cleaned(settings), Broker(settings) as bot, Broker(on_node_2) as engine:
        taken: asyncio.Queue[Request] = asyncio.Queue()
        await engine.consume_requests(collecting(taken))
        sent = request()
        await bot.send_request(sent)
        assert (await asyncio.wait_for(taken.get(), WAIT_S)).session_id == sent.session_id
        ignore = collecting(asyncio.Queue())
        await bot.consume_replies("named", ignore, keep_s=60)
        await engine.consume_replies("one-off", ignore, keep_s=60, one_off=True)
        kinds = await queue_types(cluster, settings.prefix)
        names = bot.names
        for durable in ("request", "expired", "dead", "feedback", "reply.named"):
            assert kinds[f"{names.prefix}.{durable}"] == "quorum", durable
        assert kinds[names.reply_queue("one-off")] == "classic"  # not durable: goes with its node
        for bot_id in ("named", "one-off"):
            await bot.delete_reply_queue(bot_id)


async def test_the_request_queue_serves_on_when_the_node_it_was_made_on_stops(
    cluster: Cluster,
) -> None:
    settings = cluster_settings(cluster, 2)  # declared on node 2: its leader starts there
    async with cleaned(on_nodes(settings, cluster, 1)):
        sent = [request(f"Question {number}?") for number in range(3)]
        async with Broker(settings) as bot:
            for each in sent:
                await bot.send_request(each)
        async with cluster.node_stopped(2):
            async with Broker(on_nodes(settings, cluster, 3)) as engine:
                taken: asyncio.Queue[Request] = asyncio.Queue()
                await engine.consume_requests(collecting(taken))
                for each in sent:  # all three, in order
                    got = await asyncio.wait_for(taken.get(), WAIT_S)
                    assert got.session_id == each.session_id


async def test_a_connection_given_a_dead_and_a_live_address_takes_the_live_one(
    cluster: Cluster,
    closed_port: int,  # noqa: F811
) -> None:
    settings = cluster_settings(cluster, 1)
    dead = f"amqp://guest:guest@127.0.0.1:{closed_port}/"
    both = settings.model_copy(update={"broker_url": SecretStr(f"{dead},{cluster.url(1)}")})
    async with cleaned(settings), Broker(both) as broker:
        assert broker.connection.url.port == cluster.port(1)  # type: ignore[attr-defined]


async def test_every_connection_moves_to_a_live_node_when_its_node_stops(
    cluster: Cluster,
) -> None:
    """An engine and a bot on node 2: requests, cancels and replies go on when it stops."""
    settings = cluster_settings(cluster, 2, 3, 1)
    async with cleaned(on_nodes(settings, cluster, 1)):
        engine = await Broker(settings).connect()
        bot = await ConciergeClient(on_nodes(settings, cluster, 2, 1, 3), "test").start()
        try:
            requests: asyncio.Queue[Request] = asyncio.Queue()
            cancels: asyncio.Queue[Cancel] = asyncio.Queue()
            await engine.consume_requests(collecting(requests))
            await engine.consume_cancels(settings.engine_name, collecting(cancels))
            moved = [reconnected(engine), reconnected(bot.broker)]
            async with cluster.node_stopped(2):
                await asyncio.wait_for(asyncio.gather(*(event.wait() for event in moved)), WAIT_S)
                for connected in (engine, bot.broker):
                    assert connected.connection.url.port != cluster.port(2)  # type: ignore[attr-defined]
                await answer_and_cancel(engine, bot, requests, cancels)
        finally:
            await bot.close()
            await engine.close()


def reconnected(broker: Broker) -> asyncio.Event:
    """Set once the connection is back, its channels, queues and consumers restored."""
    back = asyncio.Event()
    broker.connection.reconnect_callbacks.add(lambda *_: back.set())
    return back


async def answer_and_cancel(
    engine: Broker,
    bot: ConciergeClient,
    requests: asyncio.Queue[Request],
    cancels: asyncio.Queue[Cancel],
) -> None:
    session = await bot.ask(Ask(question="Still there?", asker="u1"))
    taken = await asyncio.wait_for(requests.get(), WAIT_S)
    assert taken.session_id == session.session_id
    context, sid = taken.context, taken.session_id
    await engine.send_event(
        Started(session_id=sid, seq=0, context=context, waited_s=0.0), taken.reply_to
    )
    done = Done(
        session_id=sid,
        seq=1,
        context=context,
        text="Yes.",
        tokens=1,
        ttft_s=0.1,
        tokens_per_s=10.0,
        elapsed_s=0.1,
    )
    await engine.send_event(done, taken.reply_to)
    assert isinstance(await session.next_item(WAIT_S), Started)
    assert isinstance(await session.next_item(WAIT_S), Done)
    await bot.cancel_id(sid, "u1")
    assert (await asyncio.wait_for(cancels.get(), WAIT_S)).session_id == sid


# --- without a cluster ----------------------------------------------------------------------


async def test_no_address_answering_is_one_error_naming_each_without_passwords(
    closed_port: int,  # noqa: F811
) -> None:
    urls = f"amqp://ops:pw-1@127.0.0.1:{closed_port}/,amqp://ops:pw-2@127.0.0.1:{closed_port}/"
    settings = load_settings(broker_url=urls)
    with pytest.raises(BrokerUnavailable) as caught:
        await Broker(settings).connect()
    shown = f"amqp://***@127.0.0.1:{closed_port}/"
    assert str(caught.value) == f"cannot reach RabbitMQ at {shown}, {shown}: AMQPConnectionError"


async def test_a_queue_of_the_other_type_is_one_line_naming_the_setting(
    settings: Settings, broker: Broker
) -> None:
    quorum = settings.model_copy(update={"queue_type": "quorum"})
    with pytest.raises(QueueTypeMismatch) as caught:
        await Broker(quorum).connect()
    assert caught.value.exit_code == EXIT_CONFIG
    assert str(caught.value) == (
        f"the queue {settings.prefix}.request exists on the broker with another type than "
        "CONCIERGE_QUEUE_TYPE=quorum: a queue's type cannot change in place (see "
        'docs/reliability.md, "Moving from classic to quorum queues")'
    )
    process = await concierge("ask", "hello?", env=cli_env(quorum, CONCIERGE_QUEUE_TYPE="quorum"))
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == EXIT_CONFIG
    assert stderr.decode().splitlines() == [f"concierge: {caught.value}"]


async def test_quorum_queues_where_classic_is_set_are_refused_the_same_way(
    settings: Settings,
) -> None:
    async with Broker(settings.model_copy(update={"queue_type": "quorum"})):
        with pytest.raises(QueueTypeMismatch, match=r"CONCIERGE_QUEUE_TYPE=classic: a queue's"):
            await Broker(settings).connect()
