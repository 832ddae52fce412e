"""A local three-node RabbitMQ cluster for the tests that need one, started with
``scripts/cluster.sh`` once per run and stopped at its end.

It has names, ports and a data folder of its own (not the script's defaults, which a person may
be using), so it never meets another cluster or the RabbitMQ at 5672. Where RabbitMQ is not
installed the tests that use it are skipped, saying so. A test that stops a node starts it
again before it ends (``Cluster.node_stopped``, ``Cluster.node_going``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli.benchmarks.chaos_rig import free_base_port

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "cluster.sh"
START_TIMEOUT_S = 300.0  # three nodes boot in about 20 s on two busy cores
NODE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Cluster:
    env: dict[str, str]
    base_port: int

    def port(self, node: int) -> int:
        return self.base_port + node - 1

    def url(self, node: int) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port(node)}/"

    def urls(self, *nodes: int) -> str:
        """``CONCIERGE_BROKER_URL`` for these nodes, tried in this order."""
        return ",".join(self.url(node) for node in nodes)

    async def script(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            str(SCRIPT),
            *args,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(process.communicate(), NODE_TIMEOUT_S)
        assert process.returncode == 0, out.decode()
        return out.decode()

    @asynccontextmanager
    async def node_stopped(self, node: int) -> AsyncIterator[None]:
        """Node ``node`` stopped for the block, and running again after it, whatever happens."""
        await self.script("stop", str(node))
        try:
            yield
        finally:
            await self.script("start", str(node))

    @asynccontextmanager
    async def node_going(self, node: int, *, kill: bool = False) -> AsyncIterator[None]:
        """Node ``node`` stopped (``rabbitmqctl stop``, about 3 s) in the background while the
        block runs, or ``kill``ed (SIGKILL to its whole process group, at once); running
        again after the block, whatever happens."""
        going = asyncio.ensure_future(self._kill(node) if kill else self.script("stop", str(node)))
        try:
            yield
            await going
        finally:
            with suppress(Exception):
                await going
            await self.script("start", str(node))

    async def _kill(self, node: int) -> str:
        """SIGKILL to the node's process group (the script starts each node as a group of its
        own and notes its leader); the script then forgets it, as after a stop."""
        pid_file = Path(self.env["CONCIERGE_CLUSTER_DIR"]) / f"node-{node}" / "script.pid"
        os.killpg(int(pid_file.read_text().strip()), signal.SIGKILL)
        return await self.script("stop", str(node))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("rabbitmq-server") is None:
        pytest.skip("RabbitMQ is not installed here: scripts/cluster.sh needs rabbitmq-server")
    base_port = free_base_port()
    env = {
        **os.environ,
        "CONCIERGE_CLUSTER_DIR": str(tmp_path_factory.mktemp("cluster")),
        "CONCIERGE_CLUSTER_PORT": str(base_port),
        "CONCIERGE_CLUSTER_NAME": f"concierge-test{os.getpid()}",
    }
    try:
        started = subprocess.run(
            [SCRIPT, "start"], env=env, timeout=START_TIMEOUT_S, capture_output=True, text=True
        )
        if started.returncode != 0:
            pytest.fail(f"scripts/cluster.sh start failed:\n{started.stdout}{started.stderr}")
        yield Cluster(env, base_port)
    finally:
        subprocess.run([SCRIPT, "stop"], env=env, timeout=START_TIMEOUT_S, capture_output=True)
