"""An asyncio event loop in a thread of its own, for a client that blocking code must be able to
interrupt: a blocking caller waits on a future it can cancel, and cancelling a coroutine that
awaits a socket closes that socket at once (a blocked ``recv`` in a thread cannot be undone)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class PrivateLoop:
    """A daemon thread running one event loop until ``close``."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coroutine`` on the loop; cancelling the future cancels it there."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result (from any other thread)."""
        future = self.submit(coroutine)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no result within {timeout_s} s") from None

    async def run_here(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on this loop and await it from another event loop."""
        return await asyncio.wrap_future(self.submit(coroutine))

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
