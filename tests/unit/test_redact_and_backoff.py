"""One URL redactor and one backoff formula, each with every caller's numbers."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import pytest

from actwheel.backoff import EQUAL_JITTER, exponential_delay, spread
from actwheel.commands.workers import _Worker
from actwheel.redact import redact_url
from actwheel.storage import sqlite as sqlite_store


@pytest.mark.parametrize(("url", "shown"), [
    ("amqp://robot:s3cret@mq:5672/prod", "amqp://robot:***@mq:5672/prod"),
    ("postgresql://u:p@ss@db/x", "postgresql://u:***@db/x"),
    ("postgresql://u:@db/x", "postgresql://u:***@db/x"),
    ("amqp://guest@mq/", "amqp://guest@mq/"),
    ("sqlite:///actwheel.db", "sqlite:///actwheel.db"),
    ("memory://", "memory://"),
    ("postgresql://u:pw@h/db?search_path=s&password=x&sslpassword=y&access_token=t#frag",
     "postgresql://u:***@h/db?search_path=s&password=***&sslpassword=***&access_token=***#frag"),
])
def test_redact_url_keeps_the_user_and_hides_every_secret(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_an_unparseable_url_is_hidden_whole() -> None:
    assert redact_url("http://user:pw@[::1") == "***"


def test_no_jitter_doubles_up_to_the_cap() -> None:
    assert [exponential_delay(n, base_s=1.0, max_s=30.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_attempts_below_one_count_as_the_first_and_huge_ones_saturate() -> None:
    assert exponential_delay(0, base_s=0.5, max_s=30.0) == 0.5
    assert exponential_delay(10_000, base_s=0.1, max_s=30.0) == 30.0


def test_equal_jitter_stays_between_half_and_all_of_the_delay() -> None:
    rng = random.Random(7)
    delays = [exponential_delay(3, base_s=1.0, max_s=30.0, jitter=EQUAL_JITTER, rng=rng) for _ in range(200)]
    assert all(2.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 100


def test_spread_jitter_is_symmetric_and_never_negative() -> None:
    rng = random.Random(7)
    delays = [exponential_delay(1, base_s=10.0, max_s=300.0, jitter=spread(0.1), rng=rng) for _ in range(200)]
    assert all(9.0 <= d <= 11.0 for d in delays)
    assert all(exponential_delay(1, base_s=1.0, max_s=9.0, jitter=spread(1.0), rng=rng) >= 0.0 for _ in range(50))


def test_a_multiplier_other_than_two_is_honoured() -> None:
    assert exponential_delay(3, base_s=1.0, max_s=1000.0, multiplier=10.0) == 100.0


def test_a_worker_restarts_after_one_second_doubling_to_thirty_and_back_to_one_once_it_ran_a_minute() -> None:
    worker = _Worker(index=0, instance="w0")
    quick = [worker.restart_delay_s(ran_s=2.0) for _ in range(7)]
    assert quick == [1, 2, 4, 8, 16, 30, 30]
    assert worker.restart_delay_s(ran_s=60.0) == 1
    assert worker.restart_delay_s(ran_s=0.5) == 2


async def test_a_locked_pragma_is_retried_after_five_ms_doubling_to_a_tenth_of_a_second(
        monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def no_sleep(seconds: float) -> None:
        slept.append(seconds)

    class LockedSix:
        """A connection that answers "database is locked" six times, then runs the PRAGMA."""

        calls = 0

        async def execute(self, pragma: str) -> None:
            self.calls += 1
            if self.calls <= 6:
                raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(sqlite_store.asyncio, "sleep", no_sleep)
    store = sqlite_store.SqliteStore(":memory:")
    conn: Any = LockedSix()
    await store._pragma(conn, "PRAGMA journal_mode = WAL")
    assert slept == [0.005, 0.01, 0.02, 0.04, 0.08, 0.1]
