"""Fixtures for the ops API tests (issue 13): the world of tests/api (admin, alice, bob, alice's agent,
a key per credential) on SQLite and PostgreSQL, plus ``ops_a`` / ``ops_b``: alice's and bob's keys with
``run:write`` (their ceilings raised to hold it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "api"))

from api_support import USER_SCOPES, World, WorldFactory
from conftest_api import clock, db_url, make_world, store

__all__ = ["OPS_SCOPES", "clock", "db_url", "make_world", "store", "world"]

OPS_SCOPES = [*USER_SCOPES, "run:write"]


@pytest.fixture
async def world(make_world: WorldFactory) -> World:
    built: World = await make_world()
    async with built.store.transaction() as tx:
        for user in ("alice", "bob"):
            await tx.principals.set_scopes(user, OPS_SCOPES)
    for credential, user in (("ops_a", "alice"), ("ops_b", "bob")):
        key_id, token = await built.mint("admin", {"name": credential, "principal_id": user, "scopes": OPS_SCOPES})
        built.tokens[credential] = token
        built.key_ids[credential] = key_id
        built.callers[credential] = await built.engine.control.authenticator.authenticate(token)
    return built
