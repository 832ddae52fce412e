"""``concierge status`` against the real broker: queue depths, consumers, engine health, and
the knowledge base, read in-process (``status_command``) and printed on one screen."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aio_pika
import pytest
from rich.console import Console

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.errors import BrokerUnavailable
from broker.protocol import Feedback
from cli.status import (
    Health,
    QueueInfo,
    engine_line,
    engine_state,
    health_table,
    knowledge_line,
    requests_table,
    status_command,
)
from config.settings import Settings
from engine.knowledge.models import KbStats
from engine.knowledge.scrape.rescrape import rescrape
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
    running = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(running, 2)
    queued = [await client.ask(Ask(f"Say hello {i}.", f"u{i + 2}")) for i in range(2)]
    await park_in_dead_queue(broker)

    code = await status_command(settings, bot_names=[client.bot_id])
    output = capsys.readouterr().out

    assert code == 0
    assert f"prefix {settings.prefix}" in output
    assert row(output, "request")[2:] == ["2", "1"]  # 2 waiting, 1 engine taking requests
    assert row(output, "expired")[2:] == ["0", "1"]
    assert row(output, "dead")[2:] == ["1", "0"]
    assert row(output, "feedback")[2:] == ["0", "1"]  # the engine takes the votes
    assert row(output, "cancel (engine)")[2:] == ["0", "1"]
    assert row(output, f"reply ({client.bot_id})")[2:] == ["0", "1"]  # empty, its bot consuming
    assert "engine alive; 1 worker taking requests" in output
    assert "health metrics are off" in output  # the test settings turn the server off
    assert (  # the engine reports no knowledge base, and the test's file does not exist
        f"knowledge base (local file, the engine's may differ) {settings.kb_path.resolve()}: "
        "no such file"
    ) in output

    for session in [*queued, running]:  # the queued ones first: they never start
        await client.cancel(session, session.user_id)
    for session in [*queued, running]:
        await collect(session)


async def test_status_reads_the_engine_health_and_the_knowledge_base(
    settings: Settings,
    site_settings: Settings,
    health_server: MetricsServer,
    broker: Broker,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine_kb = site_settings.model_copy(update={"kb_path": settings.kb_path})  # the engine's
    result = await rescrape(engine_kb, lambda _: None, lambda: False)
    assert result.articles > 0
    settings = site_settings.model_copy(update={"metrics_port": health_server.port})

    code = await status_command(settings)
    output = capsys.readouterr().out

    assert code == 0
    assert row(output, "broker connected") == ["broker connected", "yes"]
    assert row(output, "model loaded") == ["model loaded", "yes"]
    assert "{'" not in output  # counts in a table, not a Python dict
    assert row(output, "started")[:2] == ["started", "done"]  # the header of the counts
    assert "engine 'engine'" in output and "engine engine" not in output
    assert f"(the engine's) {engine_kb.kb_path.resolve()}: {result.articles} articles" in output
    assert "last rescrape never" not in output
    assert row(output, "rescraping") == ["rescraping", "no"]


async def test_status_without_an_engine_says_so_and_exits_1(
    settings: Settings, broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    vote = Feedback(session_id="abcdef123456", user_id="U1", vote="up", platform="slack", sent_at=1)
    await broker.send_feedback(vote)  # confirmed: it waits in the queue for an engine

    code = await status_command(settings, engine_names=["w2"])
    output = capsys.readouterr().out

    assert code == 1
    assert row(output, "request")[2:] == ["0", "0"]
    assert row(output, "feedback")[2:] == ["1", "0"]  # a vote waits; no engine takes it
    assert row(output, "cancel (engine)")[2] == "missing"
    assert row(output, "cancel (w2)")[2] == "missing"
    assert "engine not seen; 0 workers taking requests" in output


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
    from cli.main import adapter_settings
    from cli.status import read_queues

    named = settings.model_copy(update={"bot_name": "concierge"})
    async with ConciergeClient(adapter_settings(named, "discord"), "discord"):
        queues = await read_queues(named)
    await broker.delete_reply_queue("concierge-discord")

    shown = {queue.role: (queue.state, queue.consumers) for queue in queues}
    assert shown["reply (concierge-discord)"][1] == 1  # up's Discord bot, consuming
    assert shown["reply (concierge)"][0] == "missing"  # the plain name is asked for, so shown
    assert "reply (concierge-slack)" not in shown  # no Slack bot: not listed at all


# --- what an engine reports in /healthz, shown (pure rendering) ------------------------------

REPORTING_ENGINE: Health = {
    "ok": True,
    "engine": "engine",
    "broker_connected": True,
    "model_loaded": True,
    "uptime_s": 3725.0,
    "started": 5,
    "requests": {"done": 3, "cancelled": 1, "failed": 0, "expired": 0},
    "answering": {"session_id": "3f0c8d6b", "running_s": 12.34},
    "knowledge_base": {
        "path": "/data/concierge-kb.sqlite3",
        "articles": 1,
        "passages": 4,
        "last_rescrape": "2026-11-30T13:02:35Z",
    },
}


def rendered(*renderables: object) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    for renderable in renderables:
        console.print(renderable)
    return console.export_text()


def test_an_answer_running_is_shown_with_its_session_and_time() -> None:
    output = rendered(health_table(REPORTING_ENGINE, "http://127.0.0.1:9108/healthz"))
    assert row(output, "answering") == ["answering", "yes: session 3f0c8d6b for 12.3 s"]
    assert row(output, "up for") == ["up for", "1 h 02 min"]
    idle = rendered(health_table(REPORTING_ENGINE | {"answering": None}, None))
    assert row(idle, "answering") == ["answering", "no (idle)"]
    older = {k: v for k, v in REPORTING_ENGINE.items() if k != "answering"}
    assert "answering" not in rendered(health_table(older, None))  # not reported: not guessed


def test_the_counts_are_a_table() -> None:
    output = rendered(requests_table(REPORTING_ENGINE))
    assert row(output, "started") == ["started", "done", "cancelled", "failed", "expired"]
    assert row(output, "5") == ["5", "3", "1", "0", "0"]


async def test_the_engines_knowledge_base_is_shown_when_it_reports_one(
    settings: Settings,
) -> None:
    line = await knowledge_line(settings, REPORTING_ENGINE)
    assert line == (
        "[bold]knowledge base[/] (the engine's) /data/concierge-kb.sqlite3: "
        "1 article, 4 passages, last rescrape 2026-11-30T13:02:35Z"
    )
    local = await knowledge_line(
        settings, {k: v for k, v in REPORTING_ENGINE.items() if k != "knowledge_base"}
    )
    assert "(local file, the engine's may differ)" in local
    assert str(settings.kb_path.resolve()) in local


def test_one_article_is_not_one_articles() -> None:
    assert KbStats(1, 1, None, 0).text.startswith("1 article, 1 passage, ")
    assert KbStats(2, 0, None, 0).text.startswith("2 articles, 0 passages, ")


def test_the_operations_guide_names_the_metrics_port_for_scaling() -> None:
    guide = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    scaling = guide.split("## Scaling out", 1)[1].split("\n## ", 1)[0]
    assert "`CONCIERGE_METRICS_PORT` must differ per worker on one host" in scaling
    assert "requests pause" not in guide  # a rescrape runs beside the answers


def test_an_engine_that_runs_but_cannot_answer_is_shown_running_with_the_reason() -> None:
    """``/healthz`` answered with ``ok`` false: the engine runs (it answered), so status never
    says "not seen"; it says what the engine waits for, the model server's URL without its
    credentials."""
    queues = [QueueInfo("request", "p.request", "ok", 0, 1)]
    server_down = REPORTING_ENGINE | {
        "ok": False,
        "backend": {
            "kind": "openai",
            "url": "http://ops:s3cret@gpu:8000/v1?api_key=sk-9",
            "server_answering": False,
        },
    }
    loading = REPORTING_ENGINE | {"ok": False, "model_loaded": False}

    down, starting = engine_state(queues, server_down), engine_state(queues, loading)
    line = rendered(engine_line(queues, down))

    assert (down.running, down.answers) == (True, False)
    assert line.startswith("engine running, not answering: ")
    assert "the model server at http://***@gpu:8000/v1 does not answer" in line
    assert "s3cret" not in line and "sk-9" not in line
    assert starting.why_not == ("the model is still loading",)
    assert engine_state(queues, REPORTING_ENGINE).answers
    assert not engine_state(queues, None).running  # no health, no cancel consumer
