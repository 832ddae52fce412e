"""One error tree: every exception class of ours derives from ``ConciergeError``, which says on
the class how ``concierge`` exits, and ``cli/main.py`` reads both from the class."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

import cli.main
from cli.errors import ConsoleFailed
from config.errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_UNAVAILABLE, EXIT_USAGE, ConciergeError

ROOT = Path(__file__).resolve().parent.parent
OUR_PACKAGES = ("bots", "broker", "cli", "config", "engine")
# The classes that do not exit 1, by name (a class may move between modules).
EXIT_CODES = {
    "ConfigError": EXIT_CONFIG,
    "MetricsPortUnavailable": EXIT_CONFIG,
    "QueueTypeMismatch": EXIT_CONFIG,  # a queue of the other CONCIERGE_QUEUE_TYPE
    "BrokerUnavailable": EXIT_UNAVAILABLE,
    "BackendUnavailable": EXIT_UNAVAILABLE,
    "ConsoleFailed": EXIT_UNAVAILABLE,  # unless the console's process gave its own
    "CaseFileError": EXIT_USAGE,
    "UnknownSpace": EXIT_USAGE,  # a --space the spaces file does not name
}


def our_exception_classes() -> list[type[BaseException]]:
    """Every exception class defined (not merely imported) in a module of ours."""
    found: list[type[BaseException]] = []
    for package in OUR_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            module = importlib.import_module(name)
            found += [
                value
                for value in vars(module).values()
                if inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
            ]
    return found


def test_every_exception_class_of_ours_derives_from_the_root() -> None:
    classes = our_exception_classes()
    assert len(classes) > 20  # the walk found them
    strays = [
        f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, ConciergeError)
    ]
    assert strays == []


def test_exit_codes_are_on_the_classes() -> None:
    for error_class in our_exception_classes():
        expected = EXIT_CODES.get(error_class.__name__, EXIT_FAILURE)
        assert error_class.exit_code == expected, error_class.__qualname__


class _Refused(ConciergeError):
    exit_code = 42

    @property
    def user_message(self) -> str:
        return "the safe line"


@pytest.mark.parametrize(
    ("error", "line", "code"),
    [
        (_Refused("a detail for the log"), "the safe line", 42),
        (ConciergeError("plain"), "plain", EXIT_FAILURE),
        (ConsoleFailed("the port is taken", EXIT_CONFIG), "the port is taken", EXIT_CONFIG),
    ],
)
def test_main_ends_on_the_class_line_and_code(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: ConciergeError,
    line: str,
    code: int,
) -> None:
    def fail(_: object) -> int:
        raise error

    monkeypatch.setattr(cli.main, "_run", fail)
    assert cli.main.main(["status"]) == code
    assert capsys.readouterr().err == f"concierge: {line}\n"
