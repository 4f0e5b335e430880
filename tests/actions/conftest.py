"""Fixtures for the action tests (helpers live in actions_support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from actions_support import LocalHttpServer, Recorder, order_ontology

from actwheel.actions.ontology_port import InMemoryOntology


@pytest.fixture
async def ontology() -> InMemoryOntology:
    return await order_ontology()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def http_server() -> Iterator[LocalHttpServer]:
    with LocalHttpServer().running() as server:
        yield server
