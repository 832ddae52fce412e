"""What the ``concierge`` command tests share: its environment and running it."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CONCIERGE_")}
    env.update(CONCIERGE_PREFIX=settings.prefix, CONCIERGE_KB_PATH=str(settings.kb_path))
    env["CONCIERGE_FEEDBACK_PATH"] = str(settings.feedback_path)
    env["CONCIERGE_METRICS_PORT"] = "0"  # engines started here must not clash over a port
    env["COLUMNS"] = "250"  # rich wraps tables to the terminal width
    env.update(extra)
    return env


async def concierge(
    *args: str, env: dict[str, str], cwd: Path = ROOT
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cli.main",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env | {"PYTHONPATH": str(ROOT)},  # importable from any working directory
        cwd=cwd,
    )


# --- the first hour: settings as people write them, help, unreachable platforms ------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port that refuses connections: bound, so nothing else takes it, never listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
