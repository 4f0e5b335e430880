"""Issue 5's saga, exactly as a publisher sends it, through the real dispatch pipeline with the
StorageOntology on SQLite and PostgreSQL: ROLLED_BACK, nothing left, compensations c, b, a."""

from __future__ import annotations

import json

import pytest
from actions_storage_support import cdc_rows

from actwheel.actions.base import ActionContext, AuditSink
from actwheel.actions.defaults import default_registry
from actwheel.actions.pipeline import DispatchPipeline, DispatchRequest
from actwheel.actions.storage_ontology import StorageOntology
from actwheel.clock import VirtualClock
from actwheel.errors import NotFound
from actwheel.metrics import Metrics
from actwheel.storage import Store
from actwheel.storage.records import NewAuditEntry

SAGA = json.loads("""
{"type": "composite", "config": {"mode": "sequential", "saga": true, "steps": [
  {"name": "a", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": {"sku": "A"}}},
  {"name": "b", "type": "ontology.create_object", "config": {"object_type": "Order", "properties": {"sku": "B"}}},
  {"name": "c", "type": "ontology.create_relation", "config": {"relation_type": "pairs",
    "source": "${steps.a.result.object_id}", "target": "${steps.b.result.object_id}"}},
  {"name": "d", "type": "simple.op", "config": {"op": "assert", "condition": "1 == 2"}}]}}
""")


def pipeline_over(ontology: StorageOntology, clock: VirtualClock) -> DispatchPipeline:
    """A pipeline whose contexts carry the storage ontology, as ``Engine._make_context`` builds them."""

    def make_context(request: DispatchRequest, audit: AuditSink) -> ActionContext:
        return ActionContext(
            run_id=request.run_id,
            owner_id=request.owner_id,
            automation_id=request.automation_id,
            scopes=request.scopes,
            attempt=request.attempt,
            idempotency_key=request.idempotency_key,
            variables=request.variables,
            timeout=request.timeout_s,
            clock=clock,
            ontology=ontology,
            audit=audit,
        )

    return DispatchPipeline(default_registry(), make_context=make_context, clock=clock, metrics=Metrics())


async def test_the_issue_saga_rolls_back_through_storage(
    ontology: StorageOntology, store: Store, clock: VirtualClock
) -> None:
    registry = default_registry()
    scopes = registry.get(SAGA["type"]).required_scopes_for(SAGA["config"])
    request = DispatchRequest(
        run_id="run-saga", owner_id="alice", action_type=SAGA["type"], config=SAGA["config"], scopes=scopes
    )

    outcome = await pipeline_over(ontology, clock).dispatch(request)

    assert (outcome.status, outcome.reason) == ("ROLLED_BACK", "rolled_back")
    assert outcome.result.data["compensation_order"] == ["c", "b", "a"]
    # both objects and the relation are gone from the tables
    assert await ontology.list_objects("Order", include_deleted=True) == []
    created = [rk for rk, _, data in await cdc_rows(store) if data["change"] == "created"]
    assert created == [
        "cdc.ontology.Order.created",
        "cdc.ontology.Order.created",
        "cdc.ontology.relation.pairs.created",
    ]
    relation_id = next(d["id"] for _, _, d in await cdc_rows(store) if d["entity"] == "relation")
    with pytest.raises(NotFound):
        await ontology.get_relation(relation_id)
    # every change and every undo committed with its CDC event, in order
    assert [rk for rk, _, _ in await cdc_rows(store)] == [
        "cdc.ontology.Order.created",
        "cdc.ontology.Order.created",
        "cdc.ontology.relation.pairs.created",
        "cdc.ontology.relation.pairs.deleted",
        "cdc.ontology.Order.deleted",
        "cdc.ontology.Order.deleted",
    ]
    # the audit trail, stored as the executor router stores it, shows the compensations c, b, a
    async with store.transaction() as tx:
        await tx.audit.append_many(
            [
                NewAuditEntry(
                    event_id=f"run-saga:1:{i}",
                    phase=r.phase,
                    actor="t",
                    run_id="run-saga",
                    details=r.details,
                    occurred_at=r.at,
                )
                for i, r in enumerate(outcome.audit)
            ]
        )
        trail = await tx.audit.trail("run-saga")
    compensations = [(e.details["step"], e.details["status"]) for e in trail if e.phase == "COMPENSATE"]
    assert compensations == [("c", "completed"), ("b", "completed"), ("a", "completed")]
    phases = [e.phase for e in trail]
    assert phases[:4] == ["DISPATCH", "PERMISSION", "VALIDATE", "EXECUTE"]
    assert phases.index("COMPENSATE") > phases.index("EXECUTE")


async def test_a_retried_saga_attempt_replays_instead_of_creating_twice(
    ontology: StorageOntology, store: Store, clock: VirtualClock
) -> None:
    """The same run dispatched again (a crash after commit) replays each step's ledger entry."""
    ok_saga = {**SAGA["config"], "steps": SAGA["config"]["steps"][:3]}
    registry = default_registry()
    scopes = registry.get("composite").required_scopes_for(ok_saga)
    request = DispatchRequest(
        run_id="run-ok", owner_id="alice", action_type="composite", config=ok_saga, scopes=scopes
    )
    pipeline = pipeline_over(ontology, clock)
    first = await pipeline.dispatch(request)
    again = await pipeline.dispatch(request)
    assert (first.status, again.status) == ("SUCCEEDED", "SUCCEEDED")
    assert len(await ontology.list_objects("Order")) == 2
    assert len(await cdc_rows(store)) == 3
