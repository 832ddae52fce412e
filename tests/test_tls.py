"""``amqps://``: engine and bot speak to the broker over TLS.

The local RabbitMQ has no TLS listener, so a TLS terminator runs in front of it here, with a
certificate made for the test; the client checks it against that certificate (``cafile``), as
an operator's would against their CA.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pydantic import SecretStr

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.errors import BrokerUnavailable
from broker.protocol import Done
from config.settings import Settings
from engine.backends.base import Backend
from tests.conftest import start_engine
from tests.helpers import collect


@dataclass
class TlsFront:
    """A TLS listener that relays each connection, decrypted, to the broker."""

    url: str  # the amqps:// URL of this front
    cafile: Path
    tls_versions: list[str] = field(default_factory=list)  # one per connection accepted


def make_certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    request = [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
    ]
    names = ["-addext", "subjectAltName=DNS:localhost"]
    output = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(["openssl", *request, *names, *output], check=True, capture_output=True)
    return cert, key


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


@pytest.fixture
async def tls_front(settings: Settings, tmp_path: Path) -> AsyncIterator[TlsFront]:
    cert, key = make_certificate(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    broker = urlsplit(settings.broker_url.get_secret_value())
    relays: set[asyncio.Task[object]] = set()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        front.tls_versions.append(writer.get_extra_info("ssl_object").version())
        up_reader, up_writer = await asyncio.open_connection(broker.hostname, broker.port or 5672)
        both = asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        relays.add(both)
        await asyncio.wait({both})

    server = await asyncio.start_server(relay, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    credentials = f"{broker.username}:{broker.password}@" if broker.username else ""
    url = f"amqps://{credentials}localhost:{port}{broker.path or '/'}?cafile={cert}"
    front = TlsFront(url, cert)
    yield front
    server.close()
    for task in relays:
        task.cancel()
    await asyncio.gather(*relays, return_exceptions=True)


async def test_engine_and_bot_answer_over_amqps(
    settings: Settings, backend: Backend, broker: Broker, tls_front: TlsFront
) -> None:
    over_tls = settings.model_copy(update={"broker_url": SecretStr(tls_front.url)})
    engine = await start_engine(over_tls, backend)
    try:
        async with ConciergeClient(over_tls, "test") as client:
            events = await collect(await client.ask(Ask("Say hello.", "u1")))
    finally:
        await engine.stop()

    assert isinstance(events[-1], Done) and events[-1].text
    assert len(tls_front.tls_versions) >= 2  # the engine's connection and the bot's
    assert all(version in ("TLSv1.2", "TLSv1.3") for version in tls_front.tls_versions)


async def test_a_certificate_the_client_does_not_trust_is_refused(
    settings: Settings, tls_front: TlsFront, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    other_ca, _ = make_certificate(tmp_path / "other")
    url = tls_front.url.replace(str(tls_front.cafile), str(other_ca))
    untrusting = settings.model_copy(update={"broker_url": SecretStr(url)})

    with pytest.raises(BrokerUnavailable) as refused:
        await Broker(untrusting).connect()
    assert tls_front.tls_versions == []  # the client broke off the handshake: not trusted
    assert "amqps://" in str(refused.value) and "localhost" in str(refused.value)
