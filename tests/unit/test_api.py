"""The HTTP API through the real Starlette app (httpx ASGI transport) on a SQLite engine, actors not started."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from actwheel.api.app import create_app
from actwheel.api.errors import RETRY_AFTER_S, error_response
from actwheel.engine import Engine
from actwheel.errors import (
    Busy,
    Conflict,
    IntegrityViolation,
    InvalidAction,
    NotAvailable,
    NotFound,
    PermissionDenied,
    StorageFull,
    StorageUnavailable,
)

START = datetime(2030, 1, 1, tzinfo=UTC)
EVERY_MINUTE = {"type": "cron", "expression": "0 * * * * ?", "timezone": "UTC"}
LOG = {"type": "simple.op", "config": {"op": "log", "message": "hi"}}


@pytest.fixture
async def client(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(engine.control))
    async with httpx.AsyncClient(transport=transport, base_url="http://actwheel.test") as http:
        yield http


async def _create(client: httpx.AsyncClient, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "minutely", "trigger": EVERY_MINUTE, "action": LOG}
    body.update(overrides)
    response = await client.post("/v1/automations", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _error(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


# --- health, readiness, metrics --------------------------------------------------------------------


async def test_healthz(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_is_503_while_the_actors_are_not_running(client: httpx.AsyncClient, engine: Engine) -> None:
    assert not engine.ready
    response = await client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["ready"] is False
    assert set(body["actors"]) == {"ticker", "planner", "router", "recovery", "retention", "cdc", "auditor",
                                   "metrics"}  # retention runs in the recovery role
    assert set(body["actors"].values()) == {"new"}


async def test_metrics_text(client: httpx.AsyncClient, engine: Engine) -> None:
    engine.metrics.action_dispatched.labels("simple.op", "SUCCEEDED").inc()
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'action_dispatched_total{executor_type="simple.op",status="SUCCEEDED"} 1.0' in response.text
    for name in ("action_execution_duration_seconds", "action_compensation_total", "action_dead_letter_total"):
        assert f"# TYPE {name}" in response.text


# --- automations -----------------------------------------------------------------------------------


async def test_create_get_list(client: httpx.AsyncClient) -> None:
    created = await _create(client, labels={"session_id": "s1"})
    assert created["owner_id"] == "local"
    assert created["next_run_at"] == (START + timedelta(minutes=1)).isoformat()
    assert created["status"] == "ACTIVE"
    fetched = await client.get(f"/v1/automations/{created['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == created
    listed = await client.get("/v1/automations", params={"session_id": "s1"})
    assert [a["id"] for a in listed.json()["items"]] == [created["id"]]
    other = await client.get("/v1/automations", params={"session_id": "s2"})
    assert other.json()["items"] == []


async def test_create_422_names_every_field_and_value(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/automations", json={
        "trigger": {"type": "cron", "expression": "0 * * * * ?", "timezone": "Nowhere/Land"},
        "action": {"type": "simple.op", "config": {"op": "explode"}}, "policy": {"misfire": "later"}})
    assert response.status_code == 422
    error = _error(response)
    assert error["type"] == "InvalidInput"
    assert (error["field"], error["value"]) == ("trigger.timezone", "Nowhere/Land")
    assert {(e["field"], e["value"]) for e in error["errors"]} == {
        ("trigger.timezone", "Nowhere/Land"), ("action.config.op", "explode"), ("policy.misfire", "later")}
    assert "expected" in error["errors"][0]


async def test_malformed_json_is_422_naming_the_body(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/automations", content=b'{"name": ',
                                 headers={"content-type": "application/json"})
    assert response.status_code == 422
    error = _error(response)
    assert error["field"] == "body"
    assert error["value"] == "9 bytes (not shown)"  # a body that does not parse may hold a secret
    assert "valid JSON" in error["expected"]


async def test_a_malformed_secret_is_not_echoed(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/secrets", content=b'{"name": "db", "value": "hunter2-s3cr3t",}',
                                 headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert "hunter2" not in response.text


async def test_json_that_is_not_an_object_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/automations", json=[1, 2])
    assert response.status_code == 422
    assert (_error(response)["field"], _error(response)["value"]) == ("body", "list")


async def test_oversized_body_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/automations", content=b" " * ((1 << 20) + 1))
    assert response.status_code == 422
    assert _error(response)["field"] == "body"


async def test_non_durable_is_created_in_memory_and_listed(client: httpx.AsyncClient, engine: Engine) -> None:
    created = await _create(client, durable=False)
    assert created["id"].startswith("tr_")
    assert (created["durable"], created["next_run_at"]) == (False, "2030-01-01T00:01:00+00:00")
    assert (await client.get(f"/v1/automations/{created['id']}")).json() == created
    assert [a["id"] for a in (await client.get("/v1/automations")).json()["items"]] == [created["id"]]
    async with engine.store.transaction() as tx:
        assert await tx.automations.query() == []


async def test_durable_that_is_not_a_boolean_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/automations", json={"trigger": EVERY_MINUTE, "action": LOG, "durable": "no"})
    assert response.status_code == 422
    assert (_error(response)["field"], _error(response)["value"]) == ("durable", "no")


async def test_unknown_automation_is_404(client: httpx.AsyncClient) -> None:
    for response in (await client.get("/v1/automations/nope"), await client.delete("/v1/automations/nope"),
                     await client.post("/v1/automations/nope/run"),
                     await client.patch("/v1/automations/nope", json={"version": 1, "name": "x"})):
        assert response.status_code == 404, response.text
        assert _error(response)["type"] == "NotFound"
        assert "nope" in _error(response)["message"]


async def test_patch_needs_the_version_and_conflicts_when_stale(client: httpx.AsyncClient) -> None:
    created = await _create(client)
    missing = await client.patch(f"/v1/automations/{created['id']}", json={"name": "x"})
    assert missing.status_code == 422
    assert (_error(missing)["field"], _error(missing)["value"]) == ("version", None)
    ok = await client.patch(f"/v1/automations/{created['id']}", json={"name": "x", "version": created["version"]})
    assert ok.status_code == 200
    assert ok.json()["version"] == created["version"] + 1
    stale = await client.patch(f"/v1/automations/{created['id']}", json={"name": "y", "version": created["version"]})
    assert stale.status_code == 409
    assert _error(stale)["type"] == "Conflict"
    assert (await client.get(f"/v1/automations/{created['id']}")).json()["name"] == "x"


async def test_run_disable_enable_delete(client: httpx.AsyncClient) -> None:
    created = await _create(client)
    run = await client.post(f"/v1/automations/{created['id']}/run")
    assert run.status_code == 202
    run_id = run.json()["run_id"]
    assert run.json()["run"]["status"] == "PENDING"
    disabled = await client.post(f"/v1/automations/{created['id']}/disable")
    assert disabled.status_code == 200
    assert disabled.json()["canceled_run_ids"] == [run_id]
    assert disabled.json()["automation"]["enabled"] is False
    enabled = await client.post(f"/v1/automations/{created['id']}/enable")
    assert enabled.json()["enabled"] is True
    deleted = await client.delete(f"/v1/automations/{created['id']}")
    assert deleted.status_code == 200
    assert deleted.json()["automation_ids"] == [created["id"]]
    assert (await client.get(f"/v1/automations/{created['id']}")).status_code == 404


async def test_list_automations_bad_filters(client: httpx.AsyncClient) -> None:
    status = await client.get("/v1/automations", params={"status": "sleeping"})
    limit = await client.get("/v1/automations", params={"limit": "0"})
    assert status.status_code == 422
    assert (_error(status)["field"], _error(status)["value"]) == ("status", "sleeping")
    assert limit.status_code == 422
    assert _error(limit)["field"] == "limit"


# --- runs ------------------------------------------------------------------------------------------


async def test_runs_filtered_by_automation_and_status_newest_first(client: httpx.AsyncClient,
                                                                   engine: Engine) -> None:
    a = await _create(client)
    b = await _create(client)
    first = (await client.post(f"/v1/automations/{a['id']}/run")).json()["run_id"]
    engine.clock.advance(1)  # type: ignore[attr-defined]
    second = (await client.post(f"/v1/automations/{a['id']}/run")).json()["run_id"]
    engine.clock.advance(1)  # type: ignore[attr-defined]
    await client.post(f"/v1/automations/{b['id']}/run")
    of_a = await client.get("/v1/runs", params={"automation_id": a["id"]})
    assert [r["id"] for r in of_a.json()["items"]] == [second, first]
    pending = await client.get("/v1/runs", params={"automation_id": a["id"], "status": "pending"})
    assert [r["id"] for r in pending.json()["items"]] == [second, first]
    succeeded = await client.get("/v1/runs", params={"automation_id": a["id"], "status": "SUCCEEDED"})
    assert succeeded.json()["items"] == []
    everything = await client.get("/v1/runs")
    assert len(everything.json()["items"]) == 3
    limited = await client.get("/v1/runs", params={"limit": "1"})
    assert len(limited.json()["items"]) == 1
    bad = await client.get("/v1/runs", params={"status": "exploded"})
    assert bad.status_code == 422
    assert _error(bad)["field"] == "status"


async def test_get_run_with_its_audit_trail(client: httpx.AsyncClient) -> None:
    accepted = await client.post("/v1/actions", json={"type": "simple.op", "config": {"op": "log", "message": "x"}})
    run = await client.get(f"/v1/runs/{accepted.json()['run_id']}")
    assert run.status_code == 200
    body = run.json()
    assert body["id"] == accepted.json()["run_id"]
    assert body["status"] == "PENDING"
    assert body["audit"] == []
    assert (await client.get("/v1/runs/nope")).status_code == 404


# --- actions ---------------------------------------------------------------------------------------


async def test_action_request_202_then_200_duplicate(client: httpx.AsyncClient) -> None:
    body = {"type": "simple.op", "config": {"op": "log", "message": "x"}, "idempotency_key": "order-1"}
    first = await client.post("/v1/actions", json=body)
    assert first.status_code == 202
    assert first.json()["duplicate"] is False
    assert first.json()["status"] == "PENDING"
    again = await client.post("/v1/actions", json=body)
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["run_id"] == first.json()["run_id"]
    assert "result" in again.json()
    other = await client.post("/v1/actions", json={**body, "idempotency_key": "order-2"})
    assert other.status_code == 202
    assert other.json()["run_id"] != first.json()["run_id"]


async def test_action_request_accepts_executor_type_and_parameters(client: httpx.AsyncClient) -> None:
    accepted = await client.post("/v1/actions", json={"executor_type": "SimpleOp",
                                                      "parameters": {"op": "log", "message": "x"}})
    assert accepted.status_code == 202
    run = (await client.get(f"/v1/runs/{accepted.json()['run_id']}")).json()
    assert run["action_config"] == {"op": "log", "message": "x"}
    assert run["origin"] == "request"


async def test_action_request_errors_name_the_body_field(client: httpx.AsyncClient) -> None:
    missing = await client.post("/v1/actions", json={"config": {}})
    assert missing.status_code == 422
    assert (_error(missing)["field"], _error(missing)["value"]) == ("type", None)
    dry = await client.post("/v1/actions", json={"type": "simple.op", "dry_run": "maybe"})
    assert (_error(dry)["field"], _error(dry)["value"]) == ("dry_run", "maybe")


async def test_action_types_list_the_registry(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/actions/types")
    items = {t["type"]: t for t in response.json()["items"]}
    assert {"simple.op", "webhook.call", "composite", "ontology.create_object"} <= set(items)
    assert items["webhook.call"]["required_scopes"] == ["webhook:call"]
    assert items["simple.op"]["config_schema"]["required"] == ["op"]
    assert "Webhook" in items["webhook.call"]["aliases"]


# --- preview ---------------------------------------------------------------------------------------


async def test_preview_from_the_engine_clock_and_from_a_given_instant(client: httpx.AsyncClient) -> None:
    now = await client.post("/v1/triggers/preview", json={"trigger": EVERY_MINUTE, "count": 2})
    assert now.status_code == 200
    assert [f["at"] for f in now.json()["fires"]] == [(START + timedelta(minutes=m)).isoformat() for m in (1, 2)]
    given = await client.post("/v1/triggers/preview", json={"trigger": EVERY_MINUTE, "count": 1,
                                                            "from": "2031-05-05T10:00:30+00:00"})
    assert given.json()["fires"] == [{"at": "2031-05-05T10:01:00+00:00", "note": None}]


@pytest.mark.parametrize(("body", "field", "value"), [
    ({"trigger": EVERY_MINUTE, "count": 0}, "count", 0),
    ({"trigger": EVERY_MINUTE, "count": 501}, "count", 501),
    ({"trigger": EVERY_MINUTE, "count": True}, "count", True),
    ({"trigger": EVERY_MINUTE, "from": "2031-05-05T10:00:00"}, "from", "2031-05-05T10:00:00"),
    ({"trigger": "every minute"}, "trigger", "every minute"),
])
async def test_preview_422(client: httpx.AsyncClient, body: dict[str, Any], field: str, value: Any) -> None:
    response = await client.post("/v1/triggers/preview", json=body)
    assert response.status_code == 422
    error = _error(response)
    assert error["field"] == field
    assert error["value"] == value


async def test_preview_names_trigger_fields_from_the_body_root(client: httpx.AsyncClient) -> None:
    bad = {"type": "cron", "expression": "61 * * * * ?", "timezone": "UTC"}
    preview = await client.post("/v1/triggers/preview", json={"trigger": bad})
    assert preview.status_code == 422
    create = await client.post("/v1/automations", json={"trigger": bad, "action": LOG})
    assert _error(create)["field"] == "trigger.expression.seconds"
    assert _error(preview)["field"] == _error(create)["field"]


# --- errors ----------------------------------------------------------------------------------------


async def test_storage_unavailable_is_503(client: httpx.AsyncClient, engine: Engine) -> None:
    await engine.store.stop()
    response = await client.get("/v1/automations")
    assert response.status_code == 503
    assert _error(response)["type"] == "StorageUnavailable"
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)


@pytest.mark.parametrize(("error", "status"), [
    (NotFound("automation", "a1"), 404), (Conflict("automation", "a1"), 409),
    (PermissionDenied("bob", "webhook.call", ["webhook:call"]), 403),
    (NotAvailable("x"), 501), (StorageUnavailable("down"), 503),
    (InvalidAction("config.url", "ftp://x", "an http(s) URL"), 422),
])
def test_error_statuses(error: Exception, status: int) -> None:
    response = error_response(error)  # type: ignore[arg-type]
    assert response.status_code == status


def test_only_a_503_says_when_to_retry() -> None:
    assert error_response(Busy("stream", "at its cap")).headers["Retry-After"] == str(RETRY_AFTER_S)
    assert "Retry-After" not in error_response(NotFound("automation", "a1")).headers
    assert "Retry-After" not in error_response(StorageFull("sqlite", "disk full")).headers


def test_error_subclasses_keep_their_parents_status() -> None:
    assert error_response(IntegrityViolation("unique", "runs_dedupe")).status_code == 409
