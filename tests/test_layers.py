"""The layers import only downward: ``bots/`` and ``engine/`` talk through ``broker/`` alone.

Read from the source with ``ast`` (importing would hide lazy imports inside functions).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUR_PACKAGES = {"bots", "broker", "cli", "config", "engine"}
# What each layer may import of ours; ``cli`` (the tools) may import every layer.
ALLOWED = {
    "config": {"config"},
    "broker": {"broker", "config"},
    "engine": {"engine", "broker", "config"},
    "bots": {"bots", "broker", "config"},
    "cli": OUR_PACKAGES,
}


def imported_packages(path: Path) -> set[str]:
    """The top-level names ``path`` imports, at any depth (lazy imports in functions too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def import_graph() -> dict[str, set[str]]:
    """Which of our packages each of our packages imports."""
    graph: dict[str, set[str]] = {package: set() for package in OUR_PACKAGES}
    for package in OUR_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            graph[package] |= imported_packages(path) & OUR_PACKAGES
    return graph


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(package: str) -> None:
    offending = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in sorted(imported_packages(path) & OUR_PACKAGES - ALLOWED[package])
    ]
    assert offending == []


def test_the_check_sees_a_lazy_import(tmp_path: Path) -> None:
    """The reader must catch an import hidden in a function, or the test above proves nothing."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from engine.worker import Worker\n    import bots.client\n")
    assert imported_packages(module) >= {"engine", "bots"}


def test_bots_and_engine_never_import_each_other() -> None:
    graph = import_graph()
    assert "engine" not in graph["bots"]
    assert "bots" not in graph["engine"]


def test_only_broker_amqp_talks_to_the_broker_library() -> None:
    """aio-pika stays behind ``broker/amqp.py``; ``cli/errors.py`` only names one of aiormq's
    exceptions, to tell a refused login from an unreachable broker."""
    clients = {"aio_pika", "aiormq"}
    talking = {
        str(path.relative_to(ROOT))
        for package in OUR_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if imported_packages(path) & clients
    }
    assert talking == {"broker/amqp.py", "cli/errors.py"}
