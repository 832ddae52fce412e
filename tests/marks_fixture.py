"""The markers ``broker`` (needs RabbitMQ), ``model`` (loads the LLM) and ``cluster`` (starts a
local three-node RabbitMQ cluster, and needs RabbitMQ too), given to each test by the fixtures
it uses, so ``pytest -m "not broker and not model"`` runs the pure tests alone and
``-m "not cluster"`` leaves out the cluster's.

A mark is held to while the test runs: a test that reaches RabbitMQ or loads the model without
its mark fails, naming the mark. Without that, a test that starts an engine in its body would
sit in the pure set, slow, and failing only where no broker runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from broker.amqp import Broker
from engine.backends.llama import LlamaBackend

BROKER = "broker"
MODEL = "model"
CLUSTER = "cluster"
CLUSTER_FIXTURE = ("tests.cluster_fixture", "cluster")

# (module, name) of the fixtures that need each: every broker fixture builds on conftest's
# ``settings`` (the test's own broker names); each model fixture loads a model of its own.
NEEDS: dict[str, set[tuple[str, str]]] = {
    BROKER: {("tests.conftest", "settings"), CLUSTER_FIXTURE},
    CLUSTER: {CLUSTER_FIXTURE},
    MODEL: {
        ("tests.conftest", "backend"),
        ("tests.test_conversation_engine_states", "cached"),
        ("tests.test_engine_start", "second_backend"),
        ("tests.test_scaling", "second_backend"),
        ("tests.openai_server_fixture", "server"),
        ("tests.test_openai_backend_config", "key_server"),
        ("tests.openai_server_fixture", "own_server"),
    },
}


class UnmarkedUse(AssertionError):
    """A test used RabbitMQ or the model without the mark that says so."""


def used_fixtures(item: pytest.Item) -> set[tuple[str, str]]:
    """(module, name) of each fixture the test runs. An override that asks for the fixture it
    overrides (slack_fixture's ``settings``) runs that one too; one that does not
    (knowledge_helpers' ``settings``: no broker names) replaces it."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's: the only record of the overrides
    used: set[tuple[str, str]] = set()
    for name, definitions in info.name2fixturedefs.items() if info else ():
        for definition in reversed(definitions):
            used.add((definition.func.__module__, name))
            if name not in definition.argnames:
                break
    return used


def mark_by_fixtures(items: list[pytest.Item]) -> None:
    for item in items:
        used = used_fixtures(item)
        for marker, fixtures in NEEDS.items():
            if used & fixtures:
                item.add_marker(marker)


class MarkGuard:
    """Broker connections and model loads in this process, checked against the running test."""

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.misuses: list[str] = []

    @contextmanager
    def running(self, item: pytest.Item) -> Iterator[None]:
        self.item, self.misuses = item, []
        try:
            yield
        finally:
            self.item = None

    def check(self, marker: str, what: str) -> None:
        """Raises at once, and is noted for the test's teardown in case the code swallowed it."""
        if self.item is None or self.item.get_closest_marker(marker):
            return
        misuse = f"{self.item.nodeid} {what} but is not marked {marker!r}: @pytest.mark.{marker}"
        self.misuses.append(misuse)
        raise UnmarkedUse(misuse)

    def fail_if_misused(self) -> None:
        if self.misuses:
            pytest.fail("\n".join(self.misuses), pytrace=False)

    @contextmanager
    def watching(self) -> Iterator[None]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Broker, "connect", self._checked_connect(Broker.connect))
            patch.setattr(LlamaBackend, "__init__", self._checked_load(LlamaBackend.__init__))
            yield

    def _checked_connect(
        self, connect: Callable[[Broker], Awaitable[Broker]]
    ) -> Callable[[Broker], Awaitable[Broker]]:
        async def checked(broker: Broker) -> Broker:
            connected = await connect(broker)  # refused: no use (a test may want that)
            try:
                self.check(BROKER, "connects to RabbitMQ")
            except UnmarkedUse:
                await broker.close()
                raise
            return connected

        return checked

    def _checked_load(self, load: Callable[..., None]) -> Callable[..., None]:
        def checked(backend: LlamaBackend, *args: Any, **kwargs: Any) -> None:
            self.check(MODEL, "loads the model")
            load(backend, *args, **kwargs)

        return checked


GUARD = MarkGuard()  # this run's: hooks and patched methods have no fixture to reach it by
