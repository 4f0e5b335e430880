"""A hierarchical timing wheel: O(1) schedule and cancel, advance cost proportional to what is due.

Why buckets
-----------
A heap orders every timer against every other one: ``log n`` comparisons per
push and per pop, and a cancelled timer stays in the heap until it reaches the
top (lazy deletion) or costs ``O(n)`` to remove. A timing wheel (Varghese &
Lauck, 1987) only sorts timers into *fixed-width buckets*: a timer due at tick
``t`` lives in bucket ``t >> shift`` of some level, so scheduling is an index
computation and one dict insertion, cancelling is one dict deletion, and
advancing the clock empties whole buckets at a time. A bucket is a ``dict``
keyed by timer key: O(1) removal, and insertion order is scheduling order, which
is the tie-break the API promises.

Levels (the overflow wheels)
----------------------------
Level 0 has ``wheel_size`` buckets of ``tick_ms`` each; level ``k`` has
``wheel_size`` buckets of ``tick_ms * wheel_size**k`` each, so level ``k``
spans what one bucket of level ``k + 1`` covers. Levels are created lazily, the
first time a timer needs one (Kafka's overflow wheels). ``wheel_size`` is a
power of two, ``2**b``, so every boundary is a bit position. With the defaults
(1 ms ticks, 4096 buckets) level 0 spans 4 s, level 1 4.6 h, level 2 2.2 years.

A timer due at tick ``t`` while the clock reads tick ``c`` goes to the lowest
level ``k`` such that ``t`` and ``c`` lie in the same *aligned* block of
``2**(b*(k+1))`` ticks, i.e. ``k = (bit_length(t ^ c) - 1) // b`` (0 when that
is <= b). Kafka slides each level's window with the clock; aligning the
windows instead (as the Linux timer wheel does) buys three invariants the rest
of the code leans on:

* every timer on level ``k`` is due *before* every timer on level ``k + 1``
  (level ``k`` holds the rest of the clock's current level-``k + 1`` block, the
  higher level only later blocks), so the earliest timer is in the earliest
  bucket of the lowest non-empty level;
* a level-``k`` bucket is redistributed ("cascaded") to lower levels exactly
  when the clock enters it, and at that moment no lower-level bucket covers its
  range yet, so cascaded timers land before any timer scheduled later with the
  same due time: ties keep scheduling order without a sequence number;
* between two advances a pending timer sits exactly where the rule puts it for
  the current clock, so its bucket is a function of its due time: the key index
  maps key -> due ms, and cancel recomputes the bucket instead of storing a
  pointer or a per-timer record.

A level keeps its buckets in a dict keyed by absolute bucket number (at most
``wheel_size`` live at once: the paper's circular array without the empty
slots) plus a heap of the numbers of its buckets: Kafka's ``DelayQueue`` of
buckets, so the clock *jumps* to the next non-empty bucket instead of ticking
through empty ones. A bucket emptied by cancellations stays registered until
the clock passes it; it is then dropped for free.

When the clock enters a higher-level bucket, the timers in it that are already
due fire straight away (sorted by due, stably) and only the rest move down.
Timers due before the wheel's clock (``due_ms < now_ms``) wait in a separate
*overdue* bucket, fired first (sorted by due, stably) at the next ``advance``.

Cost
----
* ``schedule``: O(1) — a few integer operations and two dict writes; O(log w)
  more when it opens a new bucket (one heap push per bucket, not per timer).
* ``cancel``: O(1) — the same integer operations and two dict deletions.
* ``advance(now)``: O(fired + buckets crossed + cascaded), plus a sort of the
  part of a cascaded bucket that is already due. Each timer is cascaded at most
  once per level above the one it fires from; within a 4.6 h horizon that is
  at most once with the defaults.
* ``next_due_ms``: O(1) when cached. The cache (due time, key) is kept exact on
  ``schedule`` and checked against the key index on read; when its key is gone,
  it is recomputed by scanning one bucket: the earliest non-empty bucket of the
  lowest non-empty level (one due time on level 0 with 1 ms ticks).
* Memory per pending timer: one entry in the key index and one in its bucket;
  no per-timer object and nothing per empty slot.
"""

from __future__ import annotations

from collections.abc import Hashable, KeysView
from heapq import heappop, heappush
from typing import Generic, TypeVar

from actwheel.errors import InvalidInput

__all__ = ["DEFAULT_WHEEL_SIZE", "TimingWheel"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_WHEEL_SIZE = 4096
_MAX_MS = 2**63 - 1
_NEVER = 2**64  # later than any tick


def _require_ms(field: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as an int of milliseconds within range, else :class:`InvalidInput` naming ``field``."""
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= _MAX_MS:
        expected = f"an int number of milliseconds in [{minimum}, {_MAX_MS}]"
        raise InvalidInput(field, value, expected)
    return value


class _Level(Generic[K, V]):
    """One wheel: buckets of ``2**shift`` ticks keyed by bucket number, and a heap of those numbers."""

    __slots__ = ("buckets", "heap", "shift")

    def __init__(self, shift: int) -> None:
        self.shift = shift
        self.buckets: dict[int, dict[K, V]] = {}
        self.heap: list[int] = []

    def open_bucket(self, number: int) -> dict[K, V]:
        bucket: dict[K, V] = {}
        self.buckets[number] = bucket
        heappush(self.heap, number)
        return bucket

    def first_number(self) -> int | None:
        """Number of the earliest non-empty bucket, dropping emptied ones on the way; None when empty."""
        heap, buckets = self.heap, self.buckets
        while heap:
            if buckets[heap[0]]:
                return heap[0]
            del buckets[heappop(heap)]
        return None

    def take(self, number: int) -> dict[K, V]:
        """Unregister the earliest bucket (``number`` must be the heap's top) and return it."""
        heappop(self.heap)
        return self.buckets.pop(number)


class TimingWheel(Generic[K, V]):
    """Timers keyed by ``K`` carrying an item ``V``, fired in due order as an injected clock advances.

    A pure data structure: it never reads a clock, the caller passes the time in
    to :meth:`advance`. Times are integer milliseconds (normally since the epoch).
    Resolution is always 1 ms: ``tick_ms`` and ``wheel_size`` only change the cost.

    :param now_ms: the wheel's clock at creation (>= 0)
    :param tick_ms: width of a level-0 bucket
    :param wheel_size: buckets per level, a power of two >= 2
    :raises InvalidInput: any parameter out of range
    """

    __slots__ = (
        "_bits", "_by_bits", "_due", "_levels", "_min", "_min_key", "_next_event", "_now", "_nt", "_overdue",
        "_tick",
    )

    def __init__(self, now_ms: int = 0, *, tick_ms: int = 1, wheel_size: int = DEFAULT_WHEEL_SIZE) -> None:
        _require_ms("now_ms", now_ms)
        if not isinstance(tick_ms, int) or isinstance(tick_ms, bool) or not 1 <= tick_ms <= 2**32:
            raise InvalidInput("tick_ms", tick_ms, "an int number of milliseconds in [1, 2**32]")
        if not isinstance(wheel_size, int) or wheel_size < 2 or wheel_size & (wheel_size - 1):
            raise InvalidInput("wheel_size", wheel_size, "a power of two >= 2")
        self._tick = tick_ms
        self._bits = wheel_size.bit_length() - 1
        self._now = now_ms
        self._nt = now_ms // tick_ms  # the clock in ticks
        self._due: dict[K, int] = {}  # every pending key -> its due ms; the bucket follows from it
        self._overdue: dict[K, V] = {}
        self._levels: list[_Level[K, V]] = []
        self._by_bits: list[_Level[K, V]] = []  # bit_length(due_tick ^ clock_tick) -> its level
        # Cached earliest due time and one key due then; valid while that key is still pending at that time.
        self._min: int | None = None
        self._min_key: K
        self._next_event = _NEVER  # a tick <= the start of every registered bucket
        self._grow(self._bits)  # level 0; overflow levels are opened when a timer first needs one

    # -- public API ---------------------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        """The wheel's clock: the latest time passed to :meth:`advance` (or the creation time)."""
        return self._now

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: object) -> bool:
        return key in self._due

    def __repr__(self) -> str:
        return f"TimingWheel(now_ms={self._now}, pending={len(self._due)}, levels={len(self._levels)})"

    def keys(self) -> KeysView[K]:
        """A live view of the pending keys (copy it before cancelling while iterating)."""
        return self._due.keys()

    def due_ms_of(self, key: K) -> int | None:
        """The due time of pending ``key``, or None when it is not pending."""
        return self._due.get(key)

    def schedule(self, key: K, due_ms: int, item: V) -> None:
        """Fire ``item`` at ``due_ms``; a pending ``key`` is replaced (and counts as scheduled now).

        A ``due_ms`` at or before the wheel's clock fires at the next :meth:`advance`.

        :raises InvalidInput: ``due_ms`` is not an int of milliseconds; the wheel is left unchanged
        """
        # The hot path, inlined on purpose: it must cost about what one heap push costs.
        bucket: dict[K, V] | None
        try:
            if due_ms < self._now:
                bucket = self._overdue_bucket(due_ms)
            else:
                t = due_ms // self._tick
                level = self._by_bits[(t ^ self._nt).bit_length()]
                n = t >> level.shift
                bucket = level.buckets.get(n)
                if bucket is None:
                    bucket = self._open(level, n)
        except (TypeError, IndexError):
            bucket = self._bucket_slow(due_ms)
        dues = self._due
        old = dues.get(key)
        if old is not None:
            del self._bucket_of(old)[key]
        bucket[key] = item
        dues[key] = due_ms
        earliest = self._min
        if earliest is not None and due_ms < earliest:
            self._min = due_ms
            self._min_key = key

    def cancel(self, key: K) -> bool:
        """Forget pending ``key``; False when it is not pending (never scheduled, fired or cancelled)."""
        due = self._due.pop(key, None)
        if due is None:
            return False
        # _bucket_of, inlined: cancel is hot too. An emptied bucket stays registered until passed.
        if due < self._now:
            del self._overdue[key]
        else:
            t = due // self._tick
            level = self._by_bits[(t ^ self._nt).bit_length()]
            del level.buckets[t >> level.shift][key]
        return True

    def advance(self, now_ms: int) -> list[V]:
        """Move the clock to ``now_ms`` and return every item due at or before it.

        Items come in due order, ties in scheduling order. The clock never goes
        back: an earlier ``now_ms`` is taken as the current clock (and still
        returns what was scheduled at or before it since the last advance).

        :raises InvalidInput: ``now_ms`` is not an int of milliseconds
        """
        if type(now_ms) is not int:
            _require_ms("now_ms", now_ms)
        target = now_ms if now_ms > self._now else self._now
        target_tick = target // self._tick
        fired: list[V] = []
        if target_tick >= self._next_event or self._overdue:  # else no bucket starts by target: just move
            self._fire_until(target, target_tick, fired)
        self._now = target
        self._nt = target_tick
        return fired

    def next_due_ms(self) -> int | None:
        """The earliest pending due time (exact, not a bucket boundary), or None when nothing is pending."""
        earliest = self._min
        if earliest is not None and self._due.get(self._min_key) == earliest:
            return earliest
        if not self._due:
            self._min = None
            return None
        self._min_key = key = self._earliest_key()
        self._min = earliest = self._due[key]
        return earliest

    # -- where timers live --------------------------------------------------------------------------

    def _bucket_of(self, due_ms: int) -> dict[K, V]:
        """The bucket holding a pending timer due at ``due_ms``.

        Between two calls to :meth:`advance` a pending timer always sits where the
        placement rule puts it for the current clock (cascades keep it so), so the
        bucket is a function of the due time: the key index needs no pointer.
        """
        if due_ms < self._now:
            return self._overdue
        t = due_ms // self._tick
        level = self._by_bits[(t ^ self._nt).bit_length()]
        return level.buckets[t >> level.shift]

    def _overdue_bucket(self, due_ms: int) -> dict[K, V]:
        _require_ms("due_ms", due_ms, minimum=-_MAX_MS)
        return self._overdue

    def _bucket_slow(self, due_ms: int) -> dict[K, V]:
        """Validate ``due_ms`` (the fast path failed), open the levels it needs and find its bucket."""
        _require_ms("due_ms", due_ms)
        t = due_ms // self._tick
        self._grow((t ^ self._nt).bit_length())
        level = self._by_bits[(t ^ self._nt).bit_length()]
        n = t >> level.shift
        return level.buckets.get(n) or self._open(level, n)

    def _open(self, level: _Level[K, V], number: int) -> dict[K, V]:
        start = number << level.shift
        if start < self._next_event:
            self._next_event = start
        return level.open_bucket(number)

    def _grow(self, bits: int) -> None:
        """Extend the bit-length -> level table to ``bits`` (creating levels as needed)."""
        b = self._bits
        while len(self._by_bits) <= bits:
            length = len(self._by_bits)
            index = 0 if length <= b else (length - 1) // b
            while len(self._levels) <= index:
                self._levels.append(_Level(b * len(self._levels)))
            self._by_bits.append(self._levels[index])

    # -- advancing ----------------------------------------------------------------------------------

    def _fire_until(self, target: int, target_tick: int, fired: list[V]) -> None:
        if self._overdue:
            self._fire_overdue(fired)
        while not self._drain_level0(target, target_tick, fired):
            if not self._cascade_next(target, target_tick, fired):
                break
        self._next_event = self._first_bucket_start()

    def _first_bucket_start(self) -> int:
        """Start tick of the earliest registered bucket (levels are ordered in time), or _NEVER."""
        for level in self._levels:
            if level.heap:
                return level.heap[0] << level.shift
        return _NEVER

    def _fire_overdue(self, fired: list[V]) -> None:
        self._fire_in_order(list(self._overdue), self._overdue, fired)
        self._overdue.clear()

    def _fire_in_order(self, keys: list[K], bucket: dict[K, V], fired: list[V]) -> None:
        """Fire ``keys`` (given in scheduling order) of ``bucket`` by due time; the stable sort keeps ties."""
        dues = self._due
        keys.sort(key=dues.__getitem__)
        append = fired.append
        for key in keys:
            del dues[key]
            append(bucket[key])

    def _drain_level0(self, target: int, target_tick: int, fired: list[V]) -> bool:
        """Fire level-0 buckets up to ``target``; True when level 0 still holds later buckets.

        Later level-0 buckets mean nothing on a higher level can be due yet.
        """
        level = self._levels[0]
        heap, buckets, dues = level.heap, level.buckets, self._due
        append = fired.append
        whole = self._tick == 1  # a 1 ms bucket holds one due time: no sorting, never partly due
        while heap and heap[0] < target_tick:
            bucket = buckets.pop(heappop(heap))
            if whole:
                for key, item in bucket.items():
                    del dues[key]
                    append(item)
            else:
                self._fire_in_order(list(bucket), bucket, fired)
        if heap and heap[0] == target_tick:
            self._fire_current(level, target, fired)
        return bool(heap)

    def _fire_current(self, level: _Level[K, V], target: int, fired: list[V]) -> None:
        """Fire the items of the clock's own level-0 bucket that are due by ``target``; keep the rest."""
        number = level.heap[0]
        bucket = level.buckets[number]
        dues = self._due
        keys = [key for key in bucket if dues[key] <= target]
        self._fire_in_order(keys, bucket, fired)
        for key in keys:
            del bucket[key]
        if not bucket:
            level.take(number)

    def _cascade_next(self, target: int, target_tick: int, fired: list[V]) -> bool:
        """Cascade the earliest higher-level bucket if it starts by ``target_tick``; False when none does.

        Only called when level 0 is empty, so the lowest non-empty level holds the earliest timers.
        """
        for level in self._levels[1:]:
            number = level.first_number()
            if number is None:
                continue
            if number << level.shift > target_tick:
                return False
            self._cascade(level, number, target, fired)
            return True
        return False

    def _cascade(self, level: _Level[K, V], number: int, target: int, fired: list[V]) -> None:
        """Jump the clock to the bucket's start; fire what is due by ``target``, push the rest down.

        Every lower level is empty at this point, so the bucket's due part is exactly
        what fires next, and the rest lands in lower buckets before anything later
        scheduled at the same time (ties keep scheduling order).
        """
        bucket = level.take(number)
        nt = self._nt = number << level.shift  # the clock jumps; _now catches up when advance ends
        if level is self._levels[1] and self._tick == 1:
            due = self._spill_to_level0(bucket, target)
        else:
            due = self._spill(bucket, target, nt)
        if due:
            self._fire_in_order(due, bucket, fired)

    def _spill(self, bucket: dict[K, V], target: int, nt: int) -> list[K]:
        """Move the timers due after ``target`` to lower levels (clock at tick ``nt``); return the others."""
        tick, by_bits, dues = self._tick, self._by_bits, self._due
        due: list[K] = []
        for key, item in bucket.items():
            due_ms = dues[key]
            if due_ms <= target:
                due.append(key)
                continue
            t = due_ms // tick
            lower = by_bits[(t ^ nt).bit_length()]
            n = t >> lower.shift
            into = lower.buckets.get(n)
            if into is None:
                into = lower.buckets[n] = {}
                heappush(lower.heap, n)
            into[key] = item
        return due

    def _spill_to_level0(self, bucket: dict[K, V], target: int) -> list[K]:
        """:meth:`_spill` from level 1 with 1 ms ticks: each timer lands in the level-0 bucket of its ms."""
        level0 = self._levels[0]
        buckets, heap, dues = level0.buckets, level0.heap, self._due
        due: list[K] = []
        for key, item in bucket.items():
            due_ms = dues[key]
            if due_ms <= target:
                due.append(key)
                continue
            into = buckets.get(due_ms)
            if into is None:
                into = buckets[due_ms] = {}
                heappush(heap, due_ms)
            into[key] = item
        return due

    # -- next due -----------------------------------------------------------------------------------

    def _earliest_key(self) -> K:
        """A key due first (scanning one bucket); the wheel must not be empty."""
        if self._overdue:
            return min(self._overdue, key=self._due.__getitem__)
        for level in self._levels:
            number = level.first_number()
            if number is not None:
                return min(level.buckets[number], key=self._due.__getitem__)
        raise AssertionError("pending timers but no non-empty bucket")
