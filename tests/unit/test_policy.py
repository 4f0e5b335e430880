"""Policy.parse (every error at once, dotted field names) and RetryPolicy.delay_for (backoff, cap, jitter)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from actwheel.errors import InvalidInput, NotAvailable
from actwheel.policy import Policy, RetryPolicy


def _fields(exc: InvalidInput) -> dict[str, object]:
    return {e.field: e.value for e in exc.errors}


def test_defaults_when_absent() -> None:
    assert Policy.parse(None) == Policy()
    assert Policy.parse({}) == Policy()
    policy = Policy()
    assert (policy.overlap, policy.misfire, policy.grace_s, policy.concurrency) == ("skip", "fire_once", 60.0, 1)


def test_round_trips_through_to_dict() -> None:
    policy = Policy.parse({"retry": {"max_attempts": 5, "backoff_initial_s": 0.5, "jitter": 0},
                           "timeout_s": 12, "overlap": "buffer_one", "misfire": "skip", "grace_s": 0,
                           "concurrency": 1})
    assert policy.retry.max_attempts == 5
    assert policy.overlap == "buffer_one"
    assert Policy.parse(policy.to_dict()) == policy


@pytest.mark.parametrize("policy", [Policy(), Policy(retry=RetryPolicy(max_attempts=7, jitter=0.0), timeout_s=1.5,
                                                    overlap="allow", misfire="skip", grace_s=0.0)])
def test_to_dict_names_every_field_of_the_dataclasses(policy: Policy) -> None:
    """to_dict is written out field by field: a field added to Policy or RetryPolicy must appear in it."""
    assert policy.to_dict() == dataclasses.asdict(policy)
    assert list(policy.to_dict()) == [f.name for f in dataclasses.fields(Policy)]
    assert list(policy.to_dict()["retry"]) == [f.name for f in dataclasses.fields(RetryPolicy)]


def test_concurrency_other_than_one_is_loudly_unavailable() -> None:
    with pytest.raises(NotAvailable, match=r"policy\.concurrency"):
        Policy.parse({"concurrency": 4})


def test_every_error_is_collected_with_its_dotted_field() -> None:
    raw = {"retry": {"max_attempts": 0, "multiplier": 0.5, "jitter": 2, "bogus": 1},
           "timeout_s": 0, "overlap": "queue", "misfire": "later", "grace_s": -1, "concurrency": 1.5,
           "colour": "red"}
    with pytest.raises(InvalidInput) as caught:
        Policy.parse(raw)
    assert _fields(caught.value) == {
        "policy.retry.max_attempts": 0,
        "policy.retry.multiplier": 0.5,
        "policy.retry.jitter": 2,
        "policy.retry.bogus": 1,
        "policy.timeout_s": 0,
        "policy.overlap": "queue",
        "policy.misfire": "later",
        "policy.grace_s": -1,
        "policy.concurrency": 1.5,
        "policy.colour": "red",
    }
    message = str(caught.value)
    assert "policy.overlap='queue'" in message
    assert "'skip', 'buffer_one', 'allow'" in message


@pytest.mark.parametrize("value", [True, "3", None, 3.0])
def test_max_attempts_must_be_a_real_integer(value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        Policy.parse({"retry": {"max_attempts": value}})
    assert caught.value.field == "policy.retry.max_attempts"
    assert caught.value.value == value
    assert "an integer" in caught.value.expected


def test_booleans_are_not_numbers() -> None:
    with pytest.raises(InvalidInput) as caught:
        Policy.parse({"timeout_s": True})
    assert caught.value.field == "policy.timeout_s"


def test_non_object_policy_and_retry() -> None:
    with pytest.raises(InvalidInput) as caught:
        Policy.parse(["skip"])  # type: ignore[arg-type]
    assert caught.value.field == "policy"
    with pytest.raises(InvalidInput) as caught:
        Policy.parse({"retry": 3})
    assert caught.value.field == "policy.retry"


def test_field_prefix_is_used() -> None:
    with pytest.raises(InvalidInput) as caught:
        Policy.parse({"grace_s": "x"}, field_prefix="automation.policy")
    assert caught.value.field == "automation.policy.grace_s"


def test_delay_grows_exponentially_without_jitter() -> None:
    retry = RetryPolicy(backoff_initial_s=1.0, multiplier=2.0, backoff_max_s=300.0, jitter=0.0)
    assert [retry.delay_for(a) for a in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert retry.delay_for(0) == 1.0  # attempt numbers below one count as the first


def test_delay_is_capped() -> None:
    retry = RetryPolicy(backoff_initial_s=1.0, multiplier=10.0, backoff_max_s=30.0, jitter=0.0)
    assert retry.delay_for(3) == 30.0
    assert retry.delay_for(50) == 30.0


def test_jitter_stays_within_its_spread_and_varies() -> None:
    retry = RetryPolicy(backoff_initial_s=10.0, multiplier=2.0, backoff_max_s=300.0, jitter=0.1)
    rng = random.Random(7)
    delays = [retry.delay_for(2, rng) for _ in range(200)]
    assert all(18.0 <= d <= 22.0 for d in delays)
    assert max(delays) - min(delays) > 1.0  # it does spread


def test_full_jitter_never_goes_negative() -> None:
    retry = RetryPolicy(backoff_initial_s=1.0, jitter=1.0)
    rng = random.Random(1)
    assert all(0.0 <= retry.delay_for(1, rng) <= 2.0 for _ in range(200))
