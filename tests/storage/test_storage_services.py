"""The test-service helpers themselves: reachability and schema isolation."""

from __future__ import annotations

import asyncpg
import pytest
from services import isolated_postgres_url, postgres_dsn, rabbitmq_url


@pytest.mark.postgres
async def test_isolated_url_binds_a_fresh_schema_and_drops_it() -> None:
    async with isolated_postgres_url() as url:
        conn = await asyncpg.connect(url)
        try:
            schema = await conn.fetchval("select current_schema()")
            await conn.execute("create table probe (x int)")
            assert await conn.fetchval("select count(*) from probe") == 0
        finally:
            await conn.close()
    assert schema.startswith("t_")
    conn = await asyncpg.connect(postgres_dsn())
    try:
        assert await conn.fetchval("select count(*) from pg_namespace where nspname = $1", schema) == 0
    finally:
        await conn.close()


@pytest.mark.rabbitmq
def test_rabbitmq_url_points_at_a_reachable_broker() -> None:
    assert rabbitmq_url().startswith("amqp://")
