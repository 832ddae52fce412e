"""``concierge up`` runs the web console as a process of its own, at a lower priority: it
serves while ``up`` runs, stops with it (even when ``up`` is killed), and a port in use stops
``up`` at its start with one line."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from broker.amqp import Broker
from cli.console.process import NICENESS
from config.settings import Settings
from tests.cli_fixture import cli_env, concierge

START_TIMEOUT_S = 90


@pytest.fixture
def free_port() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    yield port


def console_children(parent: int) -> list[int]:
    """The pids of ``concierge web --child`` processes whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        parent_of = int(stat.rsplit(")", 1)[1].split()[1])
        if parent_of == parent and b"--child" in command and b"web" in command:
            found.append(int(entry.name))
    return found


async def wait_for_line(stream: asyncio.StreamReader, text: bytes) -> bytes:
    while text not in (line := await asyncio.wait_for(stream.readline(), START_TIMEOUT_S)):
        assert line, f"the output ended before {text!r}"
    return line


async def test_up_serves_the_console_from_a_lower_priority_process_that_stops_with_it(
    settings: Settings, broker: Broker, tmp_path: Path, free_port: int
) -> None:
    env = cli_env(settings, CONCIERGE_MAX_TOKENS="16", CONCIERGE_WEB_PORT=str(free_port))
    process = await concierge("up", env=env, cwd=tmp_path)
    assert process.stderr is not None and process.stdin is not None
    line = await wait_for_line(process.stderr, b"web console: ")
    assert f"http://127.0.0.1:{free_port}/".encode() in line
    [child] = console_children(process.pid)
    assert os.getpriority(os.PRIO_PROCESS, child) == (
        os.getpriority(os.PRIO_PROCESS, process.pid) + NICENESS
    )
    async with aiohttp.ClientSession() as http, http.get(line.split()[-1].decode()) as page:
        assert page.status == 200
    _, stderr = await asyncio.wait_for(process.communicate(b"Say hi.\n"), START_TIMEOUT_S)
    assert process.returncode == 0, stderr.decode()
    with pytest.raises(ProcessLookupError):  # `up` waited for it before it ended
        os.kill(child, 0)
    log = (tmp_path / "concierge.log").read_text()
    assert "web console: open" in log  # the console's own lines land in the chat's log


async def test_the_console_stops_when_up_is_killed(
    settings: Settings, broker: Broker, tmp_path: Path, free_port: int
) -> None:
    env = cli_env(settings, CONCIERGE_WEB_PORT=str(free_port))
    process = await concierge("up", env=env, cwd=tmp_path)
    assert process.stderr is not None
    url = (await wait_for_line(process.stderr, b"web console: ")).split()[-1].decode()
    async with aiohttp.ClientSession() as http, http.get(f"{url}api/events") as events:
        assert await events.content.readline()  # it streams
        process.send_signal(signal.SIGKILL)  # no clean-up of `up`'s own
        await process.wait()
        async with asyncio.timeout(30):  # the stream ends: the console stopped by itself
            async for _ in events.content:
                pass
    with socket.socket() as again:  # and nothing listens on its port (as a server binds it)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", free_port))


async def test_a_console_port_in_use_stops_up_at_start_with_one_line(
    settings: Settings, broker: Broker, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = cli_env(settings, CONCIERGE_WEB_PORT=str(port))
        process = await concierge("up", env=env, cwd=tmp_path)
        _, stderr = await asyncio.wait_for(process.communicate(), START_TIMEOUT_S)
    assert process.returncode == 78
    text = stderr.decode()
    assert text.count("the port is in use; set CONCIERGE_WEB_PORT") == 1, text
    assert "Traceback" not in text
    assert not console_children(process.pid)
