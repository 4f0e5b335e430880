"""The one retry helper for transient database errors (STYLE.md practice 6).

A transaction that lost a deadlock, failed to serialise, or lost its connection before
COMMIT was rolled back by the database: nothing of it happened, and running it again is
the cure. The adapters raise :class:`TransientStorageError` (a :class:`StorageUnavailable`)
for exactly those cases; :func:`in_transaction` re-runs the whole unit of work for them,
with exponential backoff and jitter. Everything else is raised at once — in particular
timeouts (a statement or acquire timeout is the caller's own budget running out, and
retrying would only multiply it), a busy SQLite file (``busy_timeout`` already waited), a
connection lost *during* COMMIT (the outcome is unknown: the caller must find out), and
every error of the caller's own.

::

    from actwheel.storage.retry import in_transaction

    async def fire(tx: Transaction) -> set[str]:
        won = await tx.automations.advance_cursors(advances)
        ...
        return won

    won = await in_transaction(store, fire)

``fn`` may run more than once: it must not keep effects outside the transaction from an
attempt that failed (sending a message, mutating shared state), or must make them idempotent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from actwheel.backoff import EQUAL_JITTER, exponential_delay
from actwheel.clock import Clock, SystemClock
from actwheel.errors import InvalidInput, TransientStorageError
from actwheel.logs import get_logger
from actwheel.storage.base import Store, Transaction

__all__ = ["backoff_delay", "in_transaction"]

_T = TypeVar("_T")
_log = get_logger(__name__)

def backoff_delay(attempt: int, base_s: float, max_s: float) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based): exponential, capped,
    with "equal jitter" (half fixed, half random) so that the losers of one deadlock spread out."""
    return exponential_delay(attempt, base_s=base_s, max_s=max_s, jitter=EQUAL_JITTER)


def _check_attempts(attempts: int) -> int:
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 100:
        raise InvalidInput("attempts", attempts, "an integer from 1 to 100")
    return attempts


async def in_transaction(
    store: Store,
    fn: Callable[[Transaction], Awaitable[_T]],
    *,
    attempts: int = 3,
    base_delay_s: float = 0.02,
    max_delay_s: float = 1.0,
    clock: Clock | None = None,
) -> _T:
    """Run ``fn`` in a transaction of ``store`` and commit; re-run it (a new transaction each
    time) when it fails with :class:`TransientStorageError`, at most ``attempts`` times in all.

    :param clock: what the backoff sleeps on (default: the system clock)
    :returns: what ``fn`` returned in the attempt that committed
    :raises TransientStorageError: the last attempt failed transiently too
    :raises InvalidInput: ``attempts`` is not an integer from 1 to 100
    :raises Exception: anything else ``fn`` or the commit raised, at once
    """
    total = _check_attempts(attempts)
    sleeper = clock or SystemClock()
    for attempt in range(1, total + 1):
        try:
            async with store.transaction() as tx:
                return await fn(tx)
        except TransientStorageError as exc:
            if attempt == total:
                raise
            delay = backoff_delay(attempt, base_delay_s, max_delay_s)
            _log.info("transaction_retry", cause=exc.cause, attempt=attempt, delay_s=round(delay, 4))
            await sleeper.sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")
