"""Telling a task's own cancellation from a CancelledError that only passed through it.

A CancelledError is raised in a task both when the task is cancelled and when it awaits a future
that something else cancelled (aio-pika's futures, cancelled as their connection closes). Only the
first is a request to stop; ``Task.cancelling()`` (Python 3.11) counts those requests.
"""

from __future__ import annotations

import asyncio

__all__ = ["cancel_requested"]


def cancel_requested() -> bool:
    """True when the current task has a pending cancel request: a CancelledError caught now is its own
    (outside a task, always True: nothing there may swallow one)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0
