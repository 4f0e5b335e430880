"""``actwheel run``'s loop and collector tuning (issue 15): speed only, the stdlib loop as fallback."""

from __future__ import annotations

import asyncio
import gc
import importlib.util

import pytest

from actwheel.commands.run import loop_factory, tune_gc
from actwheel.errors import ActwheelError


def test_asyncio_is_the_stdlib_loop_and_auto_takes_uvloop_only_when_installed() -> None:
    assert loop_factory("asyncio") is None
    auto = loop_factory("auto")
    assert (auto is None) == (importlib.util.find_spec("uvloop") is None)


def test_an_unknown_loop_is_refused() -> None:
    with pytest.raises(ActwheelError, match="ACTWHEEL_LOOP"):
        loop_factory("trio")


def test_the_chosen_loop_runs_coroutines() -> None:
    with asyncio.Runner(loop_factory=loop_factory("auto")) as runner:
        assert runner.run(asyncio.sleep(0, result=42)) == 42


def test_tune_gc_freezes_and_sets_generation_0() -> None:
    before = gc.get_threshold()
    try:
        tune_gc(5000)
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == 5000
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
