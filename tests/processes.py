"""Concierge processes started as a user would start them, for tests that kill them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from broker.protocol import Names
from config.settings import Settings
from tests.topology_fixture import TOPOLOGY

ROOT = Path(__file__).resolve().parent.parent
# ``concierge <role>`` with module constants replaced first (a fake platform's address, say):
# what monkeypatch does in the test's own process. argv: the constants as JSON, then the role.
WITH_CONSTANTS = """
import importlib, json, sys
for target, value in json.loads(sys.argv[1]).items():
    module, name = target.rsplit(".", 1)
    setattr(importlib.import_module(module), name, value)
from cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def process_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a ``concierge`` process sharing ``settings``' broker names."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("CONCIERGE_")}
    env.update(
        CONCIERGE_PREFIX=settings.prefix,
        CONCIERGE_KB_PATH=str(settings.kb_path),
        CONCIERGE_BROKER_URL=settings.broker_url.get_secret_value(),
        CONCIERGE_MAX_TOKENS=str(settings.max_tokens),
        CONCIERGE_TEMPERATURE=str(settings.temperature),
        CONCIERGE_METRICS_PORT=str(settings.metrics_port),
    )
    env.update(extra)
    return env


def note_own_queues(settings: Settings, extra: dict[str, str]) -> None:
    """The queues named after the process, for the test's ``settings`` to delete: a killed
    process cannot delete its own, and this one's names are in its environment only."""
    names = Names(settings.prefix)
    engine_name = extra.get("CONCIERGE_ENGINE_NAME", settings.engine_name)
    TOPOLOGY.process_queues.add(names.cancel_queue(engine_name))
    if bot_name := extra.get("CONCIERGE_BOT_NAME"):
        TOPOLOGY.process_queues.add(names.reply_queue(bot_name))


# Every process a test started: one a failed test left running is killed after it
# (``kill_leftovers``), or it would go on consuming its queues through the rest of the run.
RUNNING: list[asyncio.subprocess.Process] = []


def kill_leftovers() -> None:
    """SIGKILL the processes started by the test that just ended and still running."""
    while RUNNING:
        process = RUNNING.pop()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()


class ConciergeProcess:
    """``concierge <role>`` in a subprocess; its log lines are kept in ``lines``.

    It is ready once it logs ``ready_mark`` (the engine: "engine <name> ready").
    """

    def __init__(self, process: asyncio.subprocess.Process, ready_mark: str) -> None:
        self.process = process
        self.ready_mark = ready_mark
        self.lines: list[str] = []
        self.ready = asyncio.Event()
        self._reader = asyncio.create_task(self._read_log())

    @classmethod
    async def start(
        cls,
        settings: Settings,
        role: str = "engine",
        ready_mark: str = " ready",
        *,
        constants: dict[str, object] | None = None,
        **extra: str,
    ) -> ConciergeProcess:
        """``extra`` are environment variables; ``constants`` (``"module.NAME": value``) are
        set in the process before ``concierge`` runs."""
        note_own_queues(settings, extra)
        command = ["-c", WITH_CONSTANTS, json.dumps(constants)] if constants else ["-m", "cli.main"]
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *command,
            role,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=process_env(settings, **extra),
            cwd=ROOT,
        )
        started = cls(process, ready_mark)
        RUNNING.append(process)
        ready = asyncio.create_task(started.ready.wait())
        await asyncio.wait({ready, started._reader}, timeout=60, return_when="FIRST_COMPLETED")
        assert started.ready.is_set(), "\n".join(started.lines)
        return started

    async def _read_log(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.lines.append(line.decode(errors="replace").rstrip())
            if self.ready_mark in self.lines[-1]:
                self.ready.set()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    async def terminate(self, timeout_s: float = 30) -> int:
        """SIGTERM, then the exit code (within ``timeout_s``)."""
        self.process.send_signal(signal.SIGTERM)
        return await self.wait(timeout_s)

    async def wait(self, timeout_s: float = 30) -> int:
        code = await asyncio.wait_for(self.process.wait(), timeout_s)
        await self._reader
        return code
