"""``masked``: what ``mask_secrets`` gives, without the walk when nothing can be sensitive.

The fast path hands back the value itself; whenever a sensitive name could be a key it takes the walk.
Checked against ``mask_secrets`` on generated JSON-like values, and on the cases a substring scan could
get wrong: a hyphenated key, a key that lowers to a sensitive name only in Unicode, a secret reference,
a value JSON cannot hold."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actwheel.actions.secrets import MASK, mask_secrets, masked

_KEYS = st.sampled_from(["name", "value", "Token", "api-key", "x_api_key", "summary", "data", "pass", "word",
                         "AUTHORIZATION", "note", "$secret", "SIGNATURE", "k"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                    st.sampled_from(["secret", "my token", "plain"]))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_masked_equals_mask_secrets(value: dict[str, Any]) -> None:
    assert masked(value) == mask_secrets(value)


def test_nothing_sensitive_is_handed_back_as_it_is() -> None:
    result = {"status": "succeeded", "summary": "set x", "data": {"name": "x", "value": 1, "set_variables": {"x": 1}}}
    assert masked(result) is result


def test_a_sensitive_key_is_masked_at_any_depth() -> None:
    value = {"data": [{"headers": {"Authorization": "Bearer abc", "X-Api-Key": "k1", "accept": "json"}}]}
    assert masked(value) == {"data": [{"headers": {"Authorization": MASK, "X-Api-Key": MASK, "accept": "json"}}]}


def test_a_key_that_lowers_to_a_sensitive_name_only_in_unicode_is_masked() -> None:
    kelvin = "to\u212aen"  # KELVIN SIGN: str.lower() makes it "token", bytes.lower() would not
    assert kelvin.lower() == "token"
    assert masked({kelvin: "abc"}) == {kelvin: MASK}


def test_a_secret_reference_is_kept_and_a_value_json_cannot_hold_takes_the_walk() -> None:
    ref = {"password": {"$secret": "db"}}
    assert masked(ref) == {"password": {"$secret": "db"}}
    odd = {"when": datetime(2026, 1, 1, tzinfo=UTC), "items": {1, 2}, "token": "t"}
    assert masked(odd) == mask_secrets(odd) == {"when": odd["when"], "items": {1, 2}, "token": MASK}


def test_scalars_are_what_mask_secrets_makes_of_them() -> None:
    assert masked("token") == "token"
    assert masked(3) == 3
