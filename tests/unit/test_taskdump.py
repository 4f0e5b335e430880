"""The SIGUSR1 task dump (actwheel/commands/taskdump.py): each task's name and where it waits."""

from __future__ import annotations

import asyncio
import io
import os
import signal

import pytest

from actwheel.commands.taskdump import install_task_dump, task_dump


async def _parked(event: asyncio.Event) -> None:
    await _deeper(event)


async def _deeper(event: asyncio.Event) -> None:
    await event.wait()


async def test_the_dump_names_each_task_and_the_frame_it_waits_in() -> None:
    release = asyncio.Event()
    parked = asyncio.create_task(_parked(release), name="parked-actor")
    await asyncio.sleep(0)  # the task starts and suspends in _parked
    try:
        text = task_dump(asyncio.get_running_loop())
    finally:
        release.set()
        await parked
    assert "task 'parked-actor'" in text
    assert "in _parked" in text
    assert "in _deeper" in text  # the whole chain of awaits, not only the task's outermost frame
    assert "    awaits " in text
    assert text.rstrip().endswith("--- end of task dump ---")


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals only")
async def test_sigusr1_writes_the_dump_and_the_process_goes_on() -> None:
    loop = asyncio.get_running_loop()
    stream = io.StringIO()
    install_task_dump(loop, stream)
    try:
        release = asyncio.Event()
        parked = asyncio.create_task(_parked(release), name="parked-actor")
        await asyncio.sleep(0)
        os.kill(os.getpid(), signal.SIGUSR1)
        for _ in range(100):  # bounded: the handler runs within a few loop iterations of the signal
            await asyncio.sleep(0)
            if "end of task dump" in stream.getvalue():
                break
        release.set()
        await parked
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
    assert "task 'parked-actor'" in stream.getvalue()
    assert parked.done()
    assert not parked.cancelled()
