"""What ``concierge bench chaos`` runs on: a local RabbitMQ cluster of its own (never the
script's default names or ports, which a person may be using), and the engine as a process of
its own, so that its SIGKILL is real, with only the settings the run gives it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from pydantic import SecretStr

from broker.amqp import Broker
from cli.benchmarks.rig import BenchError
from cli.benchmarks.running import QUIET_LOGGERS
from config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = ROOT / "scripts" / "cluster.sh"
DIST_OFFSET = 20_000  # the script's: a node's Erlang distribution port is its AMQP port + this
SCRIPT_TIMEOUT_S = 300.0  # three nodes boot in about 20 s on two busy cores
NODE_GONE_TIMEOUT_S = 10.0
ENGINE_READY_TIMEOUT_S = 120.0
READY_MARK = " ready"  # the engine logs "engine <name> ready" once it consumes
ENGINE_NAME = "chaos-engine"
NODES = [1, 2, 3]
REQUEST_TTL_S = 900.0  # nothing expires in the queue: a question waits out every fault


class ClusterNodes:
    """Three local nodes of ``scripts/cluster.sh`` under names, ports and a folder of their own."""

    def __init__(self, env: dict[str, str], base_port: int) -> None:
        self.env = env
        self.base_port = base_port

    @classmethod
    def own(cls, folder: Path) -> ClusterNodes:
        """Settings for a cluster nobody else uses: free ports, never the script's defaults."""
        base = free_base_port()
        env = {
            **os.environ,
            "CONCIERGE_CLUSTER_DIR": str(folder),
            "CONCIERGE_CLUSTER_PORT": str(base),
            "CONCIERGE_CLUSTER_NAME": f"concierge-chaos{os.getpid()}",
        }
        return cls(env, base)

    def url(self, node: int) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.base_port + node - 1}/"

    def urls(self, order: list[int]) -> str:
        """``CONCIERGE_BROKER_URL``: every node, tried in this order."""
        return ",".join(self.url(node) for node in order)

    async def script(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            str(CLUSTER_SCRIPT),
            *args,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(process.communicate(), SCRIPT_TIMEOUT_S)
        if process.returncode != 0:
            raise BenchError(f"scripts/cluster.sh {' '.join(args)} failed: {out.decode()}")
        return out.decode()

    def kill(self, node: int) -> int:
        """SIGKILL to the node's process group (the script starts each node as a group of its
        own and notes its leader), at once; the group, for ``gone``."""
        pid_file = Path(self.env["CONCIERGE_CLUSTER_DIR"]) / f"node-{node}" / "script.pid"
        group = int(pid_file.read_text().strip())
        os.killpg(group, signal.SIGKILL)
        return group

    async def gone(self, node: int, group: int) -> bool:
        """Whether the killed node's whole group was gone within ``NODE_GONE_TIMEOUT_S``; the
        script then forgets it, as after a stop."""
        deadline = time.monotonic() + NODE_GONE_TIMEOUT_S
        gone = False
        while not gone and time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                gone = True
            else:
                await asyncio.sleep(0.05)  # reaped by init: no child of ours to wait for
        await self.script("stop", str(node))
        return gone


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port() -> int:
    """Three AMQP ports in a row, and their distribution ports, that nothing listens on."""
    for _ in range(200):
        base = random.randrange(20_000, 40_000)
        if all(_free(base + n) and _free(base + n + DIST_OFFSET) for n in range(3)):
            return base
    raise BenchError("no free ports for a local cluster")


class EngineProcess:
    """``concierge engine`` in a subprocess; its log goes to a file (and ``lines``)."""

    def __init__(self, process: asyncio.subprocess.Process, log: IO[str]) -> None:
        self.process = process
        self.log = log
        self.lines: list[str] = []
        self.ready = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, env: dict[str, str], log_path: Path) -> EngineProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cli.main",
            "engine",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=log_path.parent,  # no .env of the user's: every setting is in ``env``
        )
        engine = cls(process, log_path.open("a", encoding="utf-8", buffering=1))  # line by line
        ready = asyncio.create_task(engine.ready.wait())
        await asyncio.wait(
            {ready, engine._reader}, timeout=ENGINE_READY_TIMEOUT_S, return_when="FIRST_COMPLETED"
        )
        if not engine.ready.is_set():
            ready.cancel()
            await engine.kill()
            tail = "\n".join(engine.lines[-5:])
            raise BenchError(f"the engine did not start (its log: {log_path}):\n{tail}")
        return engine

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            text = line.decode(errors="replace").rstrip()
            self.lines.append(text)
            self.log.write(text + "\n")
            if READY_MARK in text:
                self.ready.set()
        self.log.flush()

    def kill_now(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)

    async def kill(self) -> int:
        """SIGKILL; its exit status (-9 when the signal killed it)."""
        self.kill_now()
        return await self._wait()

    async def stop(self) -> int:
        """SIGTERM: the answer in flight gets the engine's grace, then it exits."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await self._wait()

    async def _wait(self) -> int:
        code = await self.process.wait()
        await self._reader
        self.log.close()
        return code


ENGINE_LOG_MARKS = {
    "events held in an outage": "reply events held until it is back",
    "answers begun again after an engine death": "its engine stopped mid-answer",
    "ends sent again after a reconnect": "its end sent again",
    "reply events refused by the broker": "reply not sent",
    "ends refused again": "end not sent again",
    "redeliveries dropped, end confirmed": "its end already delivered: acked",
    "answers cut short by a reconnect, answered again": "cut its answer short",
}


def engine_log_counts(folder: Path, phase: str) -> dict[str, int]:
    """What the engines' logs say happened: the reasons behind the counts."""
    text = "".join(path.read_text() for path in sorted(folder.glob(f"engine-{phase}-*.log")))
    return {name: text.count(mark) for name, mark in ENGINE_LOG_MARKS.items()}


@contextmanager
def logs_in(path: Path) -> Iterator[None]:
    """The bots' and the broker client's log lines go to ``path``, not to the terminal: a
    killed node or a restarted bot is a run of reconnect errors there, all expected."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    saved = [(logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    try:
        yield
    finally:
        for logger, (level, propagate) in zip(loggers, saved, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate
        handler.close()


class ChaosRig:
    """The cluster, the engine process of the run, and where its logs go."""

    def __init__(self, settings: Settings, nodes: ClusterNodes, folder: Path) -> None:
        self.settings = settings
        self.nodes = nodes
        self.folder = folder
        self.engine: EngineProcess | None = None
        self.engine_node = NODES[0]  # its addresses go in this order
        self.engine_starts = 0
        self.prefix = ""
        self.down: set[int] = set()  # nodes killed and not back yet
        self._restarting: asyncio.Future[None] | None = None

    def engine_env(self) -> dict[str, str]:
        """Every setting the engine process needs, none of the user's others (a rescrape
        schedule, a web port): the model as configured, the run's queues, short answers."""
        settings = self.settings
        env = {key: value for key, value in os.environ.items() if not key.startswith("CONCIERGE_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env.update(
            CONCIERGE_PREFIX=self.prefix,
            CONCIERGE_BROKER_URL=self.nodes.urls(NODES),
            CONCIERGE_QUEUE_TYPE="quorum",
            CONCIERGE_ENGINE_NAME=ENGINE_NAME,
            CONCIERGE_KB_PATH=str(self.folder / "empty-kb.sqlite3"),  # the question alone
            CONCIERGE_FEEDBACK_PATH=str(self.folder / "feedback.sqlite3"),
            CONCIERGE_MAX_TOKENS=str(settings.max_tokens),
            CONCIERGE_TEMPERATURE="0",  # the same answer to the same question, run after run
            CONCIERGE_MODEL_ANSWERS_YES_NO="true",  # every question reaches the model
            CONCIERGE_ANSWER_PARAGRAPHS="0",
            CONCIERGE_REQUEST_TTL_S=f"{REQUEST_TTL_S:g}",
            CONCIERGE_METRICS_PORT="0",
            CONCIERGE_BACKEND=settings.backend,
            CONCIERGE_CONTEXT_SIZE=str(settings.context_size),
            CONCIERGE_OPENAI_BASE_URL=settings.openai_base_url,
        )
        if settings.backend == "llama":
            env["CONCIERGE_MODEL_PATH"] = str(settings.resolved_model_path())
        optional = {
            "CONCIERGE_THREADS": settings.threads,
            "CONCIERGE_OPENAI_MODEL": settings.openai_model,
            "CONCIERGE_OPENAI_API_KEY": settings.openai_api_key,
        }
        for key, value in optional.items():
            if value is not None:
                env[key] = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        return env

    async def start_engine(self, phase: str) -> None:
        self.engine_starts += 1
        log = self.folder / f"engine-{phase}-{self.engine_starts}.log"
        self.engine = await EngineProcess.start(self.engine_env(), log)
        self.engine_node = next(node for node in NODES if node not in self.down)  # the first up

    def node_down(self, node: int, back: dict[str, Any], since: float) -> None:
        """``node`` was killed and is gone: the engine's connection moves to its next address,
        and the node is started again in the background (``back["back_at_s"]``: when)."""
        self.down.add(node)
        if self.engine_node == node:
            self.engine_node = NODES[node % len(NODES)]
        self._restarting = asyncio.ensure_future(self._start_node(node, back, since))

    async def _start_node(self, node: int, back: dict[str, Any], since: float) -> None:
        await self.nodes.script("start", str(node))
        self.down.discard(node)
        back["back_at_s"] = time.monotonic() - since

    async def node_back(self) -> None:
        """Until the node killed last is running again."""
        if self._restarting is not None:
            await self._restarting

    def bot_settings(self, asker: int) -> Settings:
        """Asker ``asker``'s bot, on its own first node: every node has some askers."""
        order = NODES[asker % 3 :] + NODES[: asker % 3]
        return self.settings.model_copy(
            update={
                "prefix": self.prefix,
                "broker_url": SecretStr(self.nodes.urls(order)),
                "queue_type": "quorum",
                "request_ttl_s": REQUEST_TTL_S,
                "bot_name": "",
            }
        )

    async def delete_queues(self, bot_ids: list[str]) -> None:
        """The run's queues: a named bot's reply queue and the engine's cancel queue stay."""
        async with Broker(self.bot_settings(0)) as broker:
            channel = await broker.connection.channel()
            for name in [
                broker.names.cancel_queue(ENGINE_NAME),
                *map(broker.names.reply_queue, bot_ids),
            ]:
                await channel.queue_delete(name)
            await channel.close()
            await broker.delete_all()
