"""The router bounds what one run may put into a shared finish transaction and its events."""

from __future__ import annotations

import orjson

from actwheel.actors.router import MAX_RESULT_BYTES, bounded_result
from actwheel.storage._codec import MAX_JSON_BYTES


def test_a_normal_result_is_kept_as_it_is() -> None:
    result = {"status": "succeeded", "summary": "ok", "data": {"value": 1}}
    assert bounded_result(result) is result


def test_a_huge_result_becomes_a_note_the_store_accepts() -> None:
    result = {"status": "succeeded", "summary": "big", "data": {"blob": "x" * (2 * MAX_JSON_BYTES)}}
    bounded = bounded_result(result)
    assert bounded["truncated"] is True
    assert bounded["summary"] == "big"
    assert bounded["bytes"] > MAX_JSON_BYTES
    assert len(orjson.dumps(bounded)) < MAX_RESULT_BYTES < MAX_JSON_BYTES


def test_a_result_just_under_the_bound_is_kept() -> None:
    result = {"data": "y" * (MAX_RESULT_BYTES - 100)}
    assert bounded_result(result) is result
