"""A CancelledError that is not the current task's own (a future the closing AMQP connection cancels)
is a failure of the step, never a request to stop: found by the half-open broker scenario of issue
14, where the ticker's ``finally`` (cancel its change feed) turned its crash into what looked like
a stop, and the supervisor let it go."""

from __future__ import annotations

import asyncio

import pytest

from actwheel.bus.amqp import _bounded, _call
from actwheel.errors import BusUnavailable


def _cancelled_by_someone_else() -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(future.cancel)
    return future


async def test_a_cleanup_step_whose_future_the_connection_cancels_is_a_failed_cleanup_not_a_stop() -> None:
    await _bounded(_cancelled_by_someone_else(), "cancel consumer")  # returns: nothing escapes


async def test_a_call_whose_future_the_connection_cancels_is_bus_unavailable() -> None:
    with pytest.raises(BusUnavailable, match="bind queue: the connection closed under it"):
        await _call(_cancelled_by_someone_else(), "bind queue")


async def test_a_cancellation_of_the_task_itself_still_propagates_through_both() -> None:
    for step in (lambda: _bounded(asyncio.Event().wait(), "close"), lambda: _call(asyncio.Event().wait(), "bind")):
        task = asyncio.create_task(step())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
