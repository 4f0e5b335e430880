"""One URL redactor and one backoff formula, each with every caller's numbers."""

from __future__ import annotations

import random

import pytest

from actwheel.backoff import EQUAL_JITTER, exponential_delay, spread
from actwheel.redact import redact_url


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
