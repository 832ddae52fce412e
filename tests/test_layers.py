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


# The broker's AMQP modules: the connection (to one of several nodes), its consumers, what is
# declared, messages in and out, reply events kept through an outage, taps, peeks.
BROKER_AMQP_MODULES = {
    "broker/amqp.py",
    "broker/consuming.py",
    "broker/stream.py",
    "broker/nodes.py",
    "broker/topology.py",
    "broker/messages.py",
    "broker/taps.py",
    "broker/peek.py",
}


def test_only_the_broker_amqp_modules_talk_to_the_broker_library() -> None:
    """aio-pika stays behind the broker's AMQP modules; ``cli/errors.py`` only names one of
    aiormq's exceptions, to tell a refused login from an unreachable broker."""
    clients = {"aio_pika", "aiormq"}
    talking = {
        str(path.relative_to(ROOT))
        for package in OUR_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if imported_packages(path) & clients
    }
    assert talking == BROKER_AMQP_MODULES | {"cli/errors.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, known: set[str]) -> set[str]:
    """The modules of ours that ``path`` imports, at any depth: ``from a.b import c`` counts
    as ``a.b.c`` when that is a module, else as ``a.b``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in known else node.module)
    return found & known


def module_graph() -> dict[str, set[str]]:
    paths = [path for package in OUR_PACKAGES for path in (ROOT / package).rglob("*.py")]
    known = {module_name(path) for path in paths}
    return {module_name(path): module_imports(path, known) - {module_name(path)} for path in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle (its modules in order), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                return [*path[path.index(imported) :], imported]
            if imported not in state and (cycle := visit(imported)):
                return cycle
        path.pop()
        state[module] = 2
        return []

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return []


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle between our modules, deferred imports included: a cycle hidden in a
    function is still two modules that cannot be understood one without the other."""
    assert find_cycle(module_graph()) == []


def test_the_cycle_check_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
