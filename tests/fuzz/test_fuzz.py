"""Schemathesis against a running engine on both stacks — embedded (SQLite + the in-process bus) and
services (PostgreSQL + RabbitMQ) — as the bootstrap admin: every operation of /openapi.json but the
endless SSE stream, generated parameters and bodies, the document's links (create → get → patch → run
→ delete). Zero failures of any check (no 5xx but the documented 501, no response outside the schema),
no crash in the engine's log, and the fuzzer's key still works at the end.

Bounded for CI (a few examples per operation, ~15 s a stack); ``bench/fuzz.py`` runs the larger one.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fuzzing import RunningEngine, fuzz
from services import isolated_postgres_url, rabbitmq_url

from actwheel.api.openapi import openapi_document

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from procs import fresh_vhost  # tests/engine: a RabbitMQ vhost of the test's own

#: Examples per operation and phase in CI; the seed keeps a failure reproducible (the report names it).
CI_EXAMPLES = 5
SEED = 14


def fuzzed_operations() -> int:
    """Every documented operation but GET /v1/stream (endless; tests/ui/test_stream.py covers it)."""
    paths = openapi_document()["paths"]
    return sum(1 for path, item in paths.items() for m in item if m != "parameters" and path != "/v1/stream")


@pytest.fixture(params=["embedded", "services"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunningEngine]:
    if request.param == "embedded":
        with RunningEngine(tmp_path) as running:
            yield running
        return
    request.applymarker(pytest.mark.postgres)
    request.applymarker(pytest.mark.rabbitmq)
    async with isolated_postgres_url("fuzz") as database, fresh_vhost(rabbitmq_url()) as broker:
        running = RunningEngine(tmp_path, database=database, broker=broker)
        await asyncio.to_thread(running.__enter__)  # it waits for /readyz: not on the event loop
        try:
            yield running
        finally:
            await asyncio.to_thread(running.__exit__, None, None, None)


async def test_schemathesis_finds_nothing(engine: RunningEngine, request: pytest.FixtureRequest) -> None:
    stack = request.node.callspec.params["engine"]
    result = await asyncio.to_thread(fuzz, engine, stack=stack, max_examples=CI_EXAMPLES, seed=SEED)
    print(result.as_dict())
    assert result.failures == 0, result.output[-20000:]
    assert result.exit_code == 0, result.output[-20000:]
    # Schemathesis leaves out the document's own operation (GET /openapi.json: it read it to start)
    assert result.operations >= fuzzed_operations() - 1, result.output[-3000:]
    assert result.cases >= 20 * result.operations
    assert result.crash_lines == []
    assert result.key_still_works
