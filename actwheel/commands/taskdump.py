"""``kill -USR1 <pid>``: the engine writes every asyncio task's stack to stderr.

For an operator (or a fault test) looking at an engine that is up yet does no work: which actor
waits where. Reading the stacks changes nothing; the process goes on as before.
"""

from __future__ import annotations

import asyncio
import io
import signal
import sys
from typing import TextIO

__all__ = ["install_task_dump", "task_dump"]


def task_dump(loop: asyncio.AbstractEventLoop) -> str:
    """Every task of ``loop``, named, with the frames it is suspended in (oldest first)."""
    out = io.StringIO()
    tasks = sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name())
    out.write(f"--- actwheel task dump: {len(tasks)} tasks ---\n")
    for task in tasks:
        out.write(f"task {task.get_name()!r} {task.get_coro()!r}\n")
        task.print_stack(limit=12, file=out)
    out.write("--- end of task dump ---\n")
    return out.getvalue()


def install_task_dump(loop: asyncio.AbstractEventLoop, stream: TextIO | None = None) -> None:
    """Dump on SIGUSR1 (POSIX only; elsewhere nothing is installed)."""
    usr1 = getattr(signal, "SIGUSR1", None)
    if usr1 is None:
        return

    def dump() -> None:
        target = stream or sys.stderr
        target.write(task_dump(loop))
        target.flush()

    loop.add_signal_handler(usr1, dump)
