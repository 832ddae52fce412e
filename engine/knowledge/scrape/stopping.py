"""The user's stop: polled between pages and while requests are in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from engine.knowledge.scrape.errors import RescrapeStopped

STOP_POLL_S = 0.1  # how soon a stop lands while every worker waits on the network

T = TypeVar("T")


class StopCheck:
    """Wraps ``should_stop`` so any step can end the rescrape with ``RescrapeStopped``."""

    def __init__(self, should_stop: Callable[[], bool]) -> None:
        self._should_stop = should_stop

    def check(self) -> None:
        if self._should_stop():
            raise RescrapeStopped("rescrape stopped; the previous knowledge base is kept")


async def run_until_stopped(coros: list[Coroutine[Any, Any, T]], stop: StopCheck) -> list[T]:
    """Run all; the first error or a stop (polled every STOP_POLL_S) cancels the rest."""
    tasks = [asyncio.ensure_future(coro) for coro in coros]
    try:
        pending = set(tasks)
        while pending:
            stop.check()
            done, pending = await asyncio.wait(
                pending, timeout=STOP_POLL_S, return_when=asyncio.FIRST_EXCEPTION
            )
            for task in done:
                task.result()  # re-raises a worker's error, RescrapeStopped included
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for task in tasks:  # mark every error as seen: only the first one is raised
            if not task.cancelled():
                task.exception()
