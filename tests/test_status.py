"""``concierge status`` against the real broker: queue depths, consumers, engine health, and
the knowledge base, read in-process (``status_command``) and printed on one screen."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import aio_pika
import pytest

from bots.client import ConciergeClient
from bots.status import status_command
from broker.amqp import Broker, BrokerUnavailable
from config.settings import Settings
from engine.knowledge import rescrape
from engine.metrics import MetricsServer
from tests.conftest import LONG_QUESTION, RunningEngine
from tests.helpers import collect, wait_for_tokens


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich lays the table out for 80 columns when not on a terminal; long test names fold."""
    monkeypatch.setenv("COLUMNS", "200")


def row(output: str, role: str) -> list[str]:
    """The cells of the table row whose first cell is ``role``."""
    for line in output.splitlines():
        cells = [cell.strip() for cell in re.split(r"[│|┃]", line)[1:-1]]
        if cells and cells[0] == role:
            return cells
    raise AssertionError(f"no row {role!r} in:\n{output}")


async def park_in_dead_queue(broker: Broker) -> None:
    """What the engine does with a malformed message, done directly (and confirmed)."""
    channel = await broker.connection.channel(publisher_confirms=True)
    message = aio_pika.Message(b"not json", headers={"x-concierge-error": "test"})
    await channel.default_exchange.publish(message, routing_key=broker.names.dead_queue)
    await channel.close()


@pytest.fixture
async def health_server(long_engine: RunningEngine) -> AsyncIterator[MetricsServer]:
    async with MetricsServer(long_engine.worker.metrics, "127.0.0.1", 0) as server:
        yield server


async def test_status_shows_queues_consumers_and_a_busy_engine(
    settings: Settings,
    long_engine: RunningEngine,
    client: ConciergeClient,
    broker: Broker,
    capsys: pytest.CaptureFixture[str],
) -> None:
    running = await client.ask(LONG_QUESTION, user_id="u1")
    await wait_for_tokens(running, 2)
    queued = [await client.ask(f"Say hello {i}.", user_id=f"u{i + 2}") for i in range(2)]
    await park_in_dead_queue(broker)

    code = await status_command(settings, bot_names=[client.bot_id])
    output = capsys.readouterr().out

    assert code == 0
    assert f"prefix {settings.prefix}" in output
    assert row(output, "request")[2:] == ["2", "1"]  # 2 waiting, 1 engine taking requests
    assert row(output, "expired")[2:] == ["0", "1"]
    assert row(output, "dead")[2:] == ["1", "0"]
    assert row(output, "cancel (engine)")[2:] == ["0", "1"]
    assert row(output, f"reply ({client.bot_id})")[2:] == ["0", "1"]  # empty, its bot consuming
    assert "engine alive; 1 worker(s) taking requests" in output
    assert "health metrics are off" in output  # the test settings turn the server off
    assert f"{settings.kb_path}: 0 articles, 0 passages, last rescrape never" in output

    for session in [*queued, running]:  # the queued ones first: they never start
        await client.cancel(session, session.user_id)
    for session in [*queued, running]:
        await collect(session)


async def test_status_reads_the_engine_health_and_the_knowledge_base(
    site_settings: Settings,
    health_server: MetricsServer,
    broker: Broker,
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = await rescrape(site_settings, lambda _: None, lambda: False)
    assert result.articles > 0
    settings = site_settings.model_copy(update={"metrics_port": health_server.port})

    code = await status_command(settings)
    output = capsys.readouterr().out

    assert code == 0
    assert "broker connected yes, model loaded yes" in output
    assert f"{result.articles} articles" in output
    assert "last rescrape never" not in output


async def test_status_without_an_engine_says_so_and_exits_1(
    settings: Settings, broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await status_command(settings, engine_names=["w2"])
    output = capsys.readouterr().out

    assert code == 1
    assert row(output, "request")[2:] == ["0", "0"]
    assert row(output, "cancel (engine)")[2] == "missing"
    assert row(output, "cancel (w2)")[2] == "missing"
    assert "engine not seen; 0 worker(s) taking requests" in output


async def test_status_with_no_broker_raises_broker_unavailable_without_the_password(
    settings: Settings,
) -> None:
    unreachable = settings.model_copy(
        update={"broker_url": settings.broker_url.__class__("amqp://ops:s3cret@127.0.0.1:1/")}
    )
    with pytest.raises(BrokerUnavailable) as raised:
        await status_command(unreachable)
    assert "127.0.0.1:1" in str(raised.value)
    assert "s3cret" not in str(raised.value)


async def test_status_finds_the_bots_of_concierge_up_by_their_platform_names(
    settings: Settings, broker: Broker
) -> None:
    from bots.cli import adapter_settings
    from bots.status import read_queues

    named = settings.model_copy(update={"bot_name": "concierge"})
    async with ConciergeClient(adapter_settings(named, "discord"), "discord"):
        queues = await read_queues(named)
    await broker.delete_reply_queue("concierge-discord")

    shown = {queue.role: (queue.state, queue.consumers) for queue in queues}
    assert shown["reply (concierge-discord)"][1] == 1  # up's Discord bot, consuming
    assert shown["reply (concierge)"][0] == "missing"  # the plain name is asked for, so shown
    assert "reply (concierge-slack)" not in shown  # no Slack bot: not listed at all
