"""What a test run declares on the broker: deleted test by test, and looked for at the end.

Each test's names start with a prefix of its own (conftest's ``settings``), and its ``settings``
deletes them afterwards. Most names follow from the prefix; an engine's cancel queue and a named
bot's reply queue carry a process's name too, so the run notes each one made. At the end,
``rabbitmqctl`` lists what is left under the run's prefixes (AMQP has no call that lists): only
those, since other runs share the broker under prefixes of their own.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager

import aio_pika
import pytest
from aio_pika.abc import AbstractRobustChannel

from broker.amqp import Broker
from broker.protocol import Names
from broker.topology import delete_all
from config.settings import Settings

# The prefixes conftest and the bench rig make (a uuid each); a fixed one ("concierge",
# "bench-probe") may be another run's, so it is never looked at.
RUN_OWN_PREFIX = re.compile(r"^(test|bench)-[0-9a-f]{12}")
RABBITMQCTL_TIMEOUT_S = 60.0


@asynccontextmanager
async def bare_channel(url: str) -> AsyncIterator[AbstractRobustChannel]:
    """A channel that has declared nothing (a ``Broker`` would declare the topology first)."""
    async with await aio_pika.connect_robust(url) as connection:
        yield await connection.channel()


async def delete_names(url: str, queues: Iterable[str], exchanges: Iterable[str]) -> None:
    """A name already gone is no error (RabbitMQ answers delete-ok)."""
    async with bare_channel(url) as channel:
        for queue in queues:
            await channel.queue_delete(queue)
        for exchange in exchanges:
            await channel.exchange_delete(exchange)


def rabbitmqctl_names(listing: str) -> list[str]:
    command = ["rabbitmqctl", "-q", "--no-table-headers", listing, "name"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RABBITMQCTL_TIMEOUT_S, check=True
    )
    return done.stdout.split()


class RunTopology:
    """This run's prefixes and per-process queue names."""

    def __init__(self) -> None:
        self.prefixes: set[str] = set()
        self.process_queues: set[str] = set()
        self.broker_url = ""

    def note(self, settings: Settings) -> None:
        if RUN_OWN_PREFIX.match(settings.prefix):
            self.prefixes.add(settings.prefix)
            self.broker_url = settings.broker_url.get_secret_value()

    async def delete(self, settings: Settings) -> None:
        """Every queue and exchange of ``settings.prefix``."""
        names = Names(settings.prefix)
        own = {name for name in self.process_queues if name.startswith(f"{names.prefix}.")}
        async with bare_channel(settings.broker_url.get_secret_value()) as channel:
            await delete_all(channel, names)
            for queue in {names.cancel_queue(settings.engine_name), *own}:
                await channel.queue_delete(queue)

    def leftovers(self) -> tuple[list[str], list[str]]:
        """Queues and exchanges still on the broker under this run's prefixes."""
        if not self.prefixes:
            return [], []
        ours = tuple(self.prefixes)
        queues = [name for name in rabbitmqctl_names("list_queues") if name.startswith(ours)]
        exchanges = [name for name in rabbitmqctl_names("list_exchanges") if name.startswith(ours)]
        return queues, exchanges

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Notes the prefix of each broker connection made in this process (the bench rig's
        too), and each per-process queue name made."""
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Broker, "connect", self._noting_connect(Broker.connect))
            patch.setattr(Names, "cancel_queue", self._noting_name(Names.cancel_queue))
            patch.setattr(Names, "reply_queue", self._noting_name(Names.reply_queue))
            yield

    def _noting_connect(
        self, connect: Callable[[Broker], Awaitable[Broker]]
    ) -> Callable[[Broker], Awaitable[Broker]]:
        async def noting(broker: Broker) -> Broker:
            self.note(broker.settings)
            return await connect(broker)

        return noting

    def _noting_name(self, name_of: Callable[[Names, str], str]) -> Callable[[Names, str], str]:
        def noting(names: Names, process_name: str) -> str:
            name = name_of(names, process_name)
            self.process_queues.add(name)
            return name

        return noting


TOPOLOGY = RunTopology()  # this run's: hooks and patched methods have no fixture to reach it by


def fail_on_leftovers(session: pytest.Session) -> None:
    """Fails the run, loudly, when it left queues or exchanges of its own on the broker; they
    are deleted once listed (the fixture that left them is the thing to fix)."""
    terminal = session.config.get_terminal_writer()
    try:
        queues, exchanges = TOPOLOGY.leftovers()
    except (OSError, subprocess.SubprocessError) as error:
        terminal.line(f"what the run left on the broker was not checked: {error}", yellow=True)
        return
    if not queues and not exchanges:
        return
    terminal.line()
    terminal.sep("=", "left on the broker by this run (now deleted): fix the fixture", red=True)
    for kind, names in (("queue", queues), ("exchange", exchanges)):
        for name in names:
            terminal.line(f"{kind:8} {name}", red=True)
    asyncio.run(delete_names(TOPOLOGY.broker_url, queues, exchanges))
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
