"""Group commit: many callers, one transaction.

Callers ``await committer.submit(item)``; a single flusher takes everything
submitted so far (up to ``max_batch``), writes it with one call of ``flush``
and resolves every caller's future with that batch's outcome. There is no
timer: while one batch commits, the next one fills, so batches grow with load
and a lone item is written at once. The flusher exists only while there is
work: it ends when the queue is empty and the next submit starts another, so
an idle committer holds no task (nothing to stop, nothing bound to a loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommitter"]

T = TypeVar("T")
R = TypeVar("R")


class GroupCommitter(Generic[T, R]):
    """``flush(items) -> results`` (same order, same length) is called with batches of submitted items."""

    def __init__(self, flush: Callable[[Sequence[T]], Awaitable[Sequence[R]]], *, max_batch: int = 500) -> None:
        self._flush = flush
        self._max_batch = max_batch
        self._queue: asyncio.Queue[tuple[T, asyncio.Future[R]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def submit(self, item: T) -> R:
        """Return once ``item`` is committed, with its result; raises what the flush raised.

        After :meth:`close`, items are committed one by one, directly.
        """
        if self._closed:
            return (await self._flush([item]))[0]
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((item, future))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="group-commit")
        return await future

    async def close(self) -> None:
        """Stop intake, let the batch in flight and everything queued commit. Idempotent."""
        self._closed = True
        if self._task is not None and not self._task.done():
            await self._task
        self._task = None

    async def _run(self) -> None:
        while not self._queue.empty():
            batch = [self._queue.get_nowait()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            await self._commit(batch)

    async def _commit(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self._flush([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"flush returned {len(results)} results for {len(batch)} items")
        except BaseException as exc:
            failure = exc if isinstance(exc, Exception) else asyncio.CancelledError()
            for _, future in batch:
                if not future.done():
                    future.set_exception(failure)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
