"""``kill -USR1 <pid>``: the engine writes every asyncio task's stack to stderr.

For an operator (or a fault test) looking at an engine that is up yet does no work: which actor
waits where. Reading the stacks changes nothing; the process goes on as before.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sys
from typing import TextIO

__all__ = ["install_task_dump", "task_dump"]

#: Where a coroutine, generator or async generator keeps its frame, and what it awaits.
_FRAME = ("cr_frame", "gi_frame", "ag_frame")
_AWAITS = ("cr_await", "gi_yieldfrom", "ag_await")
_MAX_DEPTH = 40


def task_dump(loop: asyncio.AbstractEventLoop) -> str:
    """Every task of ``loop``, named, with the frames it is suspended in (oldest first)."""
    out = io.StringIO()
    tasks = sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name())
    out.write(f"--- actwheel task dump: pid {os.getpid()}, {len(tasks)} tasks ---\n")
    for task in tasks:
        out.write(f"task {task.get_name()!r}\n")
        awaited: object = task.get_coro()
        for _ in range(_MAX_DEPTH):  # down the chain of awaits: Task.print_stack shows only the outermost frame
            frame = next((getattr(awaited, a) for a in _FRAME if getattr(awaited, a, None) is not None), None)
            if frame is None:
                out.write(f"    awaits {awaited!r}\n")
                break
            out.write(f'    File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}\n')
            awaited = next((getattr(awaited, a) for a in _AWAITS if getattr(awaited, a, None) is not None), None)
            if awaited is None:
                break
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
