"""A reply event the broker refuses (a nack) is held and published again, never dropped.

A quorum reply queue whose leader's node has gone refuses publishes until another node leads
it (``concierge bench chaos`` lost answers that way). Here a reply queue that is full and
refuses more (``x-overflow: reject-publish``, as classic queues do on one node) gives the
same nack on the real broker."""

from __future__ import annotations

import asyncio

import aio_pika

from broker.amqp import Broker
from broker.protocol import Done, decode_event, make_request
from engine.replies import Replies

BOT = "nack-test-bot"


async def test_refused_reply_events_wait_and_go_out_in_order_once_there_is_room(
    broker: Broker,
) -> None:
    channel = await broker.connection.channel()
    queue = await channel.declare_queue(
        f"{broker.names.prefix}.{BOT}",
        auto_delete=True,
        arguments={"x-max-length": 1, "x-overflow": "reject-publish"},
    )
    await queue.bind(broker.names.reply_exchange, routing_key=BOT)
    await channel.default_exchange.publish(aio_pika.Message(b"filler"), routing_key=queue.name)
    request = make_request(reply_to=BOT, user_id="u", question="q", ttl_s=60)
    replies = Replies(broker, request)

    await replies.tokens("Hello", count=1)  # refused: the queue is full
    done = Done(
        **replies.header(), text="Hello", tokens=1, ttft_s=None, tokens_per_s=None, elapsed_s=0.1
    )
    ending = asyncio.create_task(replies.send(done))
    assert replies.held >= 1 and not ending.done()

    received = []

    async def take_all() -> None:
        async with queue.iterator() as messages:
            async for message in messages:  # each taken makes room for the next try
                await message.ack()
                if message.body != b"filler":
                    received.append(decode_event(message.body))
                if received and received[-1].type == "done":
                    return

    await asyncio.wait_for(take_all(), 30)  # a dropped event: no "done", ever
    await ending

    assert [(event.type, event.seq) for event in received] == [("token", 0), ("done", 1)]
    assert replies.end_delivered
    await channel.close()
