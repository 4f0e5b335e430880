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
from collections.abc import Iterator
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
        out.writelines(f"    {line}\n" for line in _await_chain(task.get_coro()))
    out.write("--- end of task dump ---\n")
    return out.getvalue()



def _await_chain(awaited: object) -> Iterator[str]:
    """Down the chain of awaits, a line per frame (Task.print_stack shows only the outermost one of a
    suspended coroutine), then what the innermost waits on."""
    for _ in range(_MAX_DEPTH):
        frame = next((getattr(awaited, a) for a in _FRAME if getattr(awaited, a, None) is not None), None)
        if frame is None:
            yield f"awaits {awaited!r}"
            return
        yield f'File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}'
        awaited = next((getattr(awaited, a) for a in _AWAITS if getattr(awaited, a, None) is not None), None)
        if awaited is None:
            return


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
