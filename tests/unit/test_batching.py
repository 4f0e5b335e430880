"""GroupCommitter: batches grow with load, results map to callers, a failing flush fails its batch only."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from actwheel.batching import GroupCommitter


async def _until(condition: Callable[[], bool], rounds: int = 200) -> None:
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


class Sink:
    """A flush that records its batches; ``gate`` holds every flush until set; items 'bad*' make it raise."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.inside = 0

    async def flush(self, items: Sequence[str]) -> list[str]:
        self.batches.append(list(items))
        self.inside += 1
        try:
            await self.gate.wait()
        finally:
            self.inside -= 1
        if any(i.startswith("bad") for i in items):
            raise RuntimeError(f"batch {items} refused")
        return [i.upper() for i in items]


async def test_a_lone_item_is_written_at_once() -> None:
    sink = Sink()
    committer: GroupCommitter[str, str] = GroupCommitter(sink.flush)
    assert await committer.submit("a") == "A"
    assert sink.batches == [["a"]]
    await committer.close()


async def test_batches_form_while_a_commit_is_in_flight_and_results_map_in_order() -> None:
    sink = Sink()
    sink.gate.clear()
    committer: GroupCommitter[str, str] = GroupCommitter(sink.flush, max_batch=3)
    first = asyncio.create_task(committer.submit("x"))
    await _until(lambda: sink.inside == 1)
    rest = [asyncio.create_task(committer.submit(f"i{n}")) for n in range(5)]
    await _until(lambda: committer._queue.qsize() == 5)
    sink.gate.set()
    assert await first == "X"
    assert await asyncio.gather(*rest) == ["I0", "I1", "I2", "I3", "I4"]
    assert sink.batches == [["x"], ["i0", "i1", "i2"], ["i3", "i4"]]
    await committer.close()


async def test_a_failing_flush_fails_only_its_own_batch() -> None:
    sink = Sink()
    sink.gate.clear()
    committer: GroupCommitter[str, str] = GroupCommitter(sink.flush, max_batch=2)
    first = asyncio.create_task(committer.submit("ok0"))
    await _until(lambda: sink.inside == 1)
    doomed = [asyncio.create_task(committer.submit(s)) for s in ("bad1", "ok2")]
    fine = [asyncio.create_task(committer.submit(s)) for s in ("ok3", "ok4")]
    await _until(lambda: committer._queue.qsize() == 4)
    sink.gate.set()
    assert await first == "OK0"
    for task in doomed:
        with pytest.raises(RuntimeError, match="refused"):
            await task
    assert await asyncio.gather(*fine) == ["OK3", "OK4"]
    assert await committer.submit("ok5") == "OK5"  # the flusher survived
    await committer.close()


async def test_close_commits_leftovers_and_submit_after_close_commits_directly() -> None:
    sink = Sink()
    sink.gate.clear()
    committer: GroupCommitter[str, str] = GroupCommitter(sink.flush)
    in_flight = asyncio.create_task(committer.submit("a"))
    await _until(lambda: sink.inside == 1)
    queued = [asyncio.create_task(committer.submit(s)) for s in ("b", "c")]
    await _until(lambda: committer._queue.qsize() == 2)
    sink.gate.set()
    await committer.close()
    assert await asyncio.gather(*queued) == ["B", "C"]
    assert ["b", "c"] in sink.batches
    in_flight.cancel()
    assert await committer.submit("d") == "D"
    assert sink.batches[-1] == ["d"]
    await committer.close()  # idempotent
    assert await committer.submit("e") == "E"


async def test_close_lets_the_in_flight_batch_finish() -> None:
    sink = Sink()
    sink.gate.clear()
    committer: GroupCommitter[str, str] = GroupCommitter(sink.flush)
    in_flight = asyncio.create_task(committer.submit("a"))
    await _until(lambda: sink.inside == 1)
    closing = asyncio.create_task(committer.close())
    await _until(lambda: committer._closed)  # close() has begun and is waiting for the batch in flight
    assert not closing.done()
    sink.gate.set()
    await closing
    assert await in_flight == "A"


async def test_a_flush_with_the_wrong_number_of_results_fails_every_caller() -> None:
    async def short(items: Sequence[str]) -> list[str]:
        return [items[0]]

    committer: GroupCommitter[str, str] = GroupCommitter(short)
    gate = asyncio.Event()

    async def blocked_first(items: Sequence[str]) -> list[str]:
        await gate.wait()
        return await short(items)

    committer._flush = blocked_first  # hold the first batch so the next one holds two items
    first = asyncio.create_task(committer.submit("a"))
    await _until(lambda: committer._task is not None)
    pair = [asyncio.create_task(committer.submit(s)) for s in ("b", "c")]
    await _until(lambda: committer._queue.qsize() == 2)
    gate.set()
    assert await first == "a"
    _, pending = await asyncio.wait(pair, timeout=1)  # a hang detector, not synchronisation
    for task in pending:
        task.cancel()
    flusher = committer._task
    if flusher is not None and flusher.done() and not flusher.cancelled():
        flusher.exception()  # retrieved here, not reported at garbage collection
    assert not pending, "callers left waiting forever"
    outcomes = [t.exception() or t.result() for t in pair]
    assert all(isinstance(o, RuntimeError) for o in outcomes)  # the whole batch fails, nobody hangs
    committer._flush = short
    assert await committer.submit("d") == "d"  # the flusher survived
    await committer.close()
