"""Is the database answering? A small watch whose answer ``/readyz`` includes.

Actors that meet a stalled database only find out when their own budget runs out (an acquire
timeout of 10 s, a statement timeout of 30 s), log it and try again later; meanwhile the
instance used to report itself ready. The watch runs one tiny transaction (``tx.now()``) every
``interval_s`` and calls the store unavailable as soon as a probe fails or has not answered
within ``timeout_s``. It never cancels a probe (a cancelled statement on a stalled connection is
one more thing to clean up): it waits for that same probe, so a stall costs one connection,
not one per interval, and the store is available again when a probe succeeds.

Real time, not the engine's clock: this watches IO, and a test's VirtualClock must not stop it.
"""

from __future__ import annotations

import asyncio
import contextlib

from actwheel.errors import StorageError
from actwheel.logs import get_logger
from actwheel.storage.base import Store

__all__ = ["StoreWatch"]

_log = get_logger("actwheel.storage.health")


class StoreWatch:
    """``available`` is False from a failed or overdue probe until the next successful one."""

    def __init__(self, store: Store, *, interval_s: float = 1.0, timeout_s: float = 3.0) -> None:
        self._store = store
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self.available = True
        #: Why the store is unavailable (the probe's error, or how long it has not answered).
        self.cause: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="store-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _watch(self) -> None:
        while True:
            probe = asyncio.create_task(self._probe(), name="store-watch-probe")
            try:
                done, _ = await asyncio.wait([probe], timeout=self._timeout_s)
                if not done:
                    self._unavailable(f"the database has not answered for {self._timeout_s:g} s")
                    await asyncio.wait([probe])
                error = probe.exception()
            except asyncio.CancelledError:
                probe.cancel()
                raise
            if error is None:
                self._available()
            elif isinstance(error, StorageError | OSError | TimeoutError):
                self._unavailable(f"{type(error).__name__}: {error}")
            else:
                raise error
            await asyncio.sleep(self._interval_s)

    async def _probe(self) -> None:
        async with self._store.transaction() as tx:
            await tx.now()

    def _unavailable(self, cause: str) -> None:
        if self.available:
            _log.warning("database_unavailable", cause=cause, detail="/readyz answers 503 until it answers again")
        self.available, self.cause = False, cause

    def _available(self) -> None:
        if not self.available:
            _log.warning("database_available", was=self.cause)
        self.available, self.cause = True, None
