"""The file a rescrape builds beside the knowledge base, and the clean-up of those a killed
process left behind.

While a file is being built it is locked (``flock``); the lock dies with its process. So the
clean-up removes only files nobody is building, never one that another engine sharing the
volume is still writing.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

BUILD_SUFFIX = ".new"
log = logging.getLogger(__name__)


@contextlib.contextmanager
def build_file(kb_path: Path) -> Iterator[Path]:
    """An empty, locked file next to ``kb_path`` (same file system, so a rename is atomic);
    removed on the way out unless it was renamed into place."""
    kb_path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=kb_path.parent, prefix=f".{kb_path.name}.", suffix=BUILD_SUFFIX)
    path = Path(name)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # never waits: nobody else knows this name yet
        yield path
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def remove_stale_builds(kb_path: Path) -> list[Path]:
    """Delete the build files a killed rescrape left beside ``kb_path``; return them.

    Cheap (one directory listing): run it at engine start and before each rescrape.
    """
    pattern = f".{glob.escape(kb_path.name)}.*{BUILD_SUFFIX}"
    removed = [path for path in kb_path.parent.glob(pattern) if _remove_if_unlocked(path)]
    for path in removed:
        log.info("removed %s, left by a rescrape that did not finish", path)
    return removed


def _remove_if_unlocked(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # gone already, or a symlink: not ours
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # being built right now
        os.close(fd)
        return False
    try:
        path.unlink(missing_ok=True)  # while holding the lock: no builder can own it now
        return True
    finally:
        os.close(fd)
