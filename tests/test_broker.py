"""The broker edge against the real RabbitMQ: consumers get decoded messages in envelopes, and
whatever does not decode is parked in ``P.dead`` with its reason, on every queue we consume; a
tap copies the traffic of the keys it binds, and comes back with them after a dropped
connection."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from pydantic import SecretStr
from yarl import URL

from broker.amqp import Broker
from broker.messages import ATTEMPT_HEADER, Envelope
from broker.peek import peek_queues
from broker.protocol import (
    CONTENT_TYPE,
    ERROR_HEADER,
    REQUEST_ROUTING_KEY,
    Cancel,
    Done,
    Feedback,
    ReplyEvent,
    Request,
    TokenEvent,
    decode_event,
    decode_request,
    encode,
    make_request,
)
from broker.taps import Copy
from config.settings import Settings
from tests.conftest import delete_test_topology

WAIT_S = 10.0


class Inbox:
    """What a consumer was handed, in order, to be awaited one at a time."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[object] = asyncio.Queue()

    async def take(self) -> object:
        return await asyncio.wait_for(self.items.get(), WAIT_S)


@pytest.fixture
async def channel(broker: Broker) -> AsyncIterator[AbstractChannel]:
    """A plain channel of its own, to publish what no Concierge process would."""
    opened = await broker.connection.channel()
    yield opened
    await opened.close()


async def dead_letters(channel: AbstractChannel, broker: Broker) -> Inbox:
    """Every message parked in ``P.dead`` from now on."""
    inbox = Inbox()
    queue = await channel.get_queue(broker.names.dead_queue)

    async def park(message: AbstractIncomingMessage) -> None:
        await inbox.items.put(message)

    await queue.consume(park, no_ack=True)
    return inbox


async def publish_raw(
    channel: AbstractChannel, exchange: str, routing_key: str, body: bytes, content_type: str
) -> None:
    target = await channel.get_exchange(exchange)
    await target.publish(aio_pika.Message(body, content_type=content_type), routing_key)


def reason_of(message: object) -> str:
    assert isinstance(message, AbstractIncomingMessage)
    return str((message.headers or {})[ERROR_HEADER])


async def test_garbage_on_a_reply_queue_is_dead_lettered_and_the_next_event_delivered(
    broker: Broker, channel: AbstractChannel
) -> None:
    bot_id = f"bot-{uuid.uuid4().hex[:8]}"
    handed: Inbox = Inbox()

    async def on_reply(envelope: Envelope[ReplyEvent]) -> None:
        await handed.items.put(envelope.message)
        await envelope.ack()

    dead = await dead_letters(channel, broker)
    await broker.consume_replies(bot_id, on_reply, keep_s=60)
    request = make_request(reply_to=bot_id, user_id="u", question="q", ttl_s=30)
    exchange = broker.names.reply_exchange
    await publish_raw(channel, exchange, bot_id, b"\xff not json", "application/json")
    await publish_raw(channel, exchange, bot_id, encode(request), "application/json")  # no event
    done = Done(
        session_id=request.session_id,
        seq=0,
        text="ok",
        tokens=1,
        ttft_s=None,
        tokens_per_s=None,
        elapsed_s=0.1,
    )
    await broker.send_event(done, bot_id)

    assert await handed.take() == done  # the only thing the consumer ever saw
    parked = [await dead.take(), await dead.take()]
    await broker.stop_replies()
    await broker.delete_reply_queue(bot_id)
    assert reason_of(parked[0]).startswith("invalid reply event")
    assert "type" in reason_of(parked[1])
    assert all(
        isinstance(message, AbstractIncomingMessage)
        and (message.headers or {})["x-concierge-source"] == bot_id
        for message in parked
    )
    assert handed.items.empty()


async def test_garbage_on_the_request_queue_is_dead_lettered_and_a_cancel_is_decoded(
    broker: Broker, channel: AbstractChannel, settings: Settings
) -> None:
    handed: Inbox = Inbox()

    async def on_request(envelope: Envelope[Request | Cancel]) -> None:
        await handed.items.put(envelope.message)
        await envelope.ack()

    dead = await dead_letters(channel, broker)
    await broker.consume_requests(on_request)
    good = make_request(reply_to="bot", user_id="u", question="q", ttl_s=30)
    exchange = broker.names.request_exchange
    await publish_raw(channel, exchange, REQUEST_ROUTING_KEY, b"{", "application/json")
    await publish_raw(channel, exchange, REQUEST_ROUTING_KEY, encode(good), "text/plain")
    cancel = Cancel(session_id=good.session_id, sent_at=1.0)
    await broker.publish(cancel, exchange, REQUEST_ROUTING_KEY, settings.request_ttl_s)
    await broker.send_request(good)

    assert await handed.take() == cancel  # the FIFO trap's cancel, decoded as one
    assert await handed.take() == good
    reasons = [reason_of(await dead.take()), reason_of(await dead.take())]
    await broker.pause_requests()
    assert reasons[0].startswith("invalid request")
    assert reasons[1].startswith("content type")
    assert handed.items.empty()


async def test_a_requeued_message_comes_back_marked_redelivered(broker: Broker) -> None:
    seen: Inbox = Inbox()

    async def on_request(envelope: Envelope[Request | Cancel]) -> None:
        await seen.items.put(envelope.redelivered)
        if envelope.redelivered:
            await envelope.ack()
        else:
            await envelope.requeue()

    await broker.consume_requests(on_request)
    await broker.send_request(make_request(reply_to="b", user_id="u", question="q", ttl_s=30))

    assert [await seen.take(), await seen.take()] == [False, True]
    await broker.pause_requests()
    assert await broker.request_queue_depth() == 0


async def test_the_startup_purge_buries_garbage_and_hands_out_the_rest(
    broker: Broker, channel: AbstractChannel
) -> None:
    good = make_request(reply_to="bot", user_id="u", question="q", ttl_s=30)
    exchange = broker.names.request_exchange
    dead = await dead_letters(channel, broker)
    await publish_raw(channel, exchange, REQUEST_ROUTING_KEY, b"[]", "application/json")
    await broker.send_request(good)

    envelope = await broker.take_waiting_request()
    assert envelope is not None and envelope.message == good
    await envelope.ack()
    assert await broker.take_waiting_request() is None
    assert reason_of(await dead.take()).startswith("invalid request")


async def test_each_test_has_topology_of_its_own_and_it_is_deleted(
    broker: Broker, settings: Settings
) -> None:
    other = settings.model_copy(update={"prefix": f"test-{uuid.uuid4().hex[:12]}"})
    async with Broker(other) as neighbour:
        await broker.send_request(make_request(reply_to="b", user_id="u", question="q", ttl_s=30))
        assert (await broker.request_queue_depth(), await neighbour.request_queue_depth()) == (1, 0)
        await delete_test_topology(neighbour, other)
    names = [f"{other.prefix}.request", f"{other.prefix}.dead", f"{other.prefix}.expired"]
    assert {peek.state for peek in await peek_queues(other, names)} == {"missing"}


async def test_a_vote_waits_for_an_engine_and_garbage_beside_it_is_dead_lettered(
    broker: Broker, channel: AbstractChannel
) -> None:
    handed: Inbox = Inbox()

    async def on_feedback(envelope: Envelope[Feedback]) -> None:
        await handed.items.put(envelope.message)
        await envelope.ack()

    dead = await dead_letters(channel, broker)
    vote = Feedback(
        session_id="abcdef123456", user_id="U1", vote="down", platform="slack", sent_at=1.0
    )
    await broker.send_feedback(vote)  # no engine yet: the queue every process declares keeps it
    exchange = broker.names.feedback_exchange
    wrong = encode(vote).replace(b'"down"', b'"sideways"')
    await publish_raw(channel, exchange, "", wrong, "application/json")
    withdrawn = vote.model_copy(update={"vote": "none"})
    await broker.send_feedback(withdrawn)
    await broker.consume_feedback(on_feedback)

    assert [await handed.take(), await handed.take()] == [vote, withdrawn]
    parked = await dead.take()
    await broker.stop_feedback()
    assert reason_of(parked).startswith("invalid feedback: vote: Input should be")
    assert handed.items.empty()


# --- taps ---------------------------------------------------------------------------------


def copier(inbox: Inbox) -> Callable[[Copy], Awaitable[None]]:
    async def on_copy(copy: Copy) -> None:
        await inbox.items.put(copy)

    return on_copy


async def next_event(copies: Inbox) -> ReplyEvent:
    copy = await copies.take()
    assert isinstance(copy, Copy)
    return decode_event(copy.body, copy.content_type)


def token(text: str) -> TokenEvent:
    return TokenEvent(session_id="abcdef123456", seq=1, text=text, tokens=1)


async def test_a_tap_copies_what_it_binds_and_takes_nothing_from_the_queue_meant_for(
    broker: Broker, settings: Settings
) -> None:
    copies = Inbox()
    names, tap_prefix = broker.names, f"{settings.prefix}.tap"
    requests = await broker.tap(
        names.request_exchange,
        f"{tap_prefix}.request",
        copier(copies),
        routing_keys=[REQUEST_ROUTING_KEY],
    )
    replies = await broker.tap(names.reply_exchange, f"{tap_prefix}.reply", copier(copies))
    request = make_request(reply_to="bot-a", user_id="u", question="q", ttl_s=30)
    await broker.send_request(request)

    copy = await copies.take()
    assert isinstance(copy, Copy)
    assert (copy.type, copy.content_type) == (request.type, CONTENT_TYPE)
    assert decode_request(copy.body, copy.content_type) == request
    assert await broker.request_queue_depth() == 1  # the engine's own is still there
    again = make_request(reply_to="bot-a", user_id="u", question="q again", ttl_s=30)
    await broker.publish(again, names.request_exchange, REQUEST_ROUTING_KEY, 30, attempt=2)
    copied_again = await copies.take()  # with its headers (a dead letter's say why it died)
    assert isinstance(copied_again, Copy) and copied_again.headers[ATTEMPT_HEADER] == 2

    await replies.bind("bot-a")
    await broker.send_event(token("to b"), "bot-b")  # not bound: not copied
    await broker.send_event(token("to a"), "bot-a")
    assert await next_event(copies) == token("to a")  # one queue: b's would have come first
    await replies.unbind("bot-a")
    await replies.bind("bot-b")
    await broker.send_event(token("to a, unbound"), "bot-a")
    await broker.send_event(token("to b, bound"), "bot-b")
    assert await next_event(copies) == token("to b, bound")

    await requests.close()
    await replies.close()
    peeks = await peek_queues(settings, [requests.queue_name, replies.queue_name])
    assert {peek.state for peek in peeks} == {"missing"}  # went with their consumers
    assert copies.items.empty()


async def rabbitmqctl(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        "rabbitmqctl", "-q", *args, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, args
    return out.decode()


async def drop_connection(name: str) -> None:
    """What a broker restart is to one connection (and to no other test's): RabbitMQ closes
    the connection named ``name`` (``?name=`` in its URL), its exclusive queues with it."""
    listed = await rabbitmqctl("list_connections", "pid", "client_properties")
    pids = [
        line.split("\t", 1)[0]
        for line in listed.splitlines()
        if f'{{"connection_name","{name}"}}' in line
    ]
    assert len(pids) == 1, listed
    await rabbitmqctl("close_connection", pids[0], "a test drops it")


async def test_a_tap_comes_back_with_the_keys_bound_when_the_connection_dropped(
    broker: Broker, settings: Settings
) -> None:
    name = f"{settings.prefix}-tapping"
    url = URL(settings.broker_url.get_secret_value()).update_query(name=name)
    async with Broker(settings.model_copy(update={"broker_url": SecretStr(str(url))})) as tapping:
        copies = Inbox()
        replies = await tapping.tap(
            broker.names.reply_exchange,
            f"{settings.prefix}.tap.reply",
            copier(copies),
            routing_keys=["bot-a"],
        )
        await replies.bind("bot-b")
        await replies.unbind("bot-a")
        back = asyncio.Event()
        tapping.connection.reconnect_callbacks.add(lambda *_: back.set())

        await drop_connection(name)
        await asyncio.wait_for(back.wait(), WAIT_S)  # set once every channel is restored

        await broker.send_event(token("to a"), "bot-a")  # unbound before the drop
        await broker.send_event(token("to b"), "bot-b")
        assert await next_event(copies) == token("to b")
        await replies.bind("bot-a")  # and it can still be changed
        await broker.send_event(token("to a, bound again"), "bot-a")
        assert await next_event(copies) == token("to a, bound again")
        await replies.close()
