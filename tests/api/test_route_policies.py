"""Every route of the app has one RoutePolicy, and every route answers what its policy predicts for each
credential: the matrix ROUTE_POLICIES × {none, read-only key of A, full key of A, agent key of A, full key
of B, admin}, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from api_support import CREDENTIALS, EVERY_MINUTE, World, automation_body
from starlette.routing import Route

from actwheel.api.app import create_app
from actwheel.api.guard import ROUTE_POLICIES, RoutePolicy
from actwheel.engine import Engine
from actwheel.settings import Settings

#: A minimal valid body per route that takes one (an invalid one would still only be 422: "allowed").
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/automations"): automation_body(),
    ("PATCH", "/v1/automations/{id}"): {"version": 1, "name": "renamed"},
    ("POST", "/v1/actions"): {"type": "simple.op", "config": {"op": "log", "message": "hi"}},
    ("POST", "/v1/triggers/preview"): {"trigger": EVERY_MINUTE, "count": 1},
    ("POST", "/v1/ontology/types"): {"name": "Order", "properties": {"sku": {"type": "string"}}},
    ("POST", "/v1/secrets"): {"name": "token", "value": "not-much-of-a-secret"},
    ("POST", "/v1/keys"): {"name": "minted", "scopes": ["automation:read"]},
    ("POST", "/v1/keys/{id}/rotate"): {"grace_s": 0},
    ("POST", "/v1/principals"): {"id": "newcomer", "kind": "user", "scopes": []},
    ("POST", "/v1/principals/{id}/ban"): {"reason": "the matrix says so"},
}


def app_routes() -> set[tuple[str, str]]:
    engine = Engine(Settings(database_url="sqlite:///:memory:", instance="t"))
    found = set()
    for route in create_app(engine.control).routes:
        assert isinstance(route, Route)
        found |= {(method, route.path) for method in route.methods or () if method != "HEAD"}
    return found


def test_every_route_has_a_policy() -> None:
    routes = app_routes()
    assert len(routes) >= 30
    assert sorted(routes - ROUTE_POLICIES.keys()) == []


def test_no_policy_is_stale() -> None:
    assert sorted(ROUTE_POLICIES.keys() - app_routes()) == []


def predicted_missing(world: World, credential: str, policy: RoutePolicy) -> list[str] | None:
    """The scopes the guard will name in its 403, ``[]`` when allowed, ``None`` for a 401."""
    if policy.public:
        return []
    if world.tokens[credential] is None:
        return None
    return world.callers[credential].grant.missing(policy.scopes)


async def seed(world: World) -> dict[str, str]:
    """The path ids of the matrix: alice's automation, run and spare key; a principal to ban."""
    alice = world.callers["full_a"]
    automation = await world.engine.control.automations.create(alice, automation_body())
    run = await world.engine.control.automations.run_now(alice, automation.id)
    spare, _ = await world.mint("full_a", {"name": "spare", "scopes": ["automation:read"]})
    return {"/v1/automations/": automation.id, "/v1/runs/": run.id, "/v1/keys/": spare,
            "/v1/principals/": "victim", "/v1/ontology/objects/": "no-such-object",
            "/v1/dead-letters/": "no-such-letter"}


def concrete(path: str, ids: dict[str, str]) -> str:
    for prefix, value in ids.items():
        if path.startswith(prefix + "{id}"):
            return path.replace("{id}", value)
    assert "{" not in path, f"no id for {path}"
    return path


#: The bearer-key routes: the dashboard's session routes and the stream are tested in tests/ui.
BEARER_POLICIES = {k: p for k, p in ROUTE_POLICIES.items() if p.credential == "bearer"}


@pytest.mark.parametrize(("method", "path"), sorted(BEARER_POLICIES), ids=lambda p: str(p))
async def test_the_matrix(world: World, method: str, path: str) -> None:
    policy = ROUTE_POLICIES[(method, path)]
    url = concrete(path, await seed(world))
    body = BODIES.get((method, path))
    wrong = []
    for credential in CREDENTIALS:
        missing = predicted_missing(world, credential, policy)
        answer = await world.as_(credential, method, url, **({"json": body} if body is not None else {}))
        if missing is None:
            ok = (answer.status_code == 401 and answer.headers["WWW-Authenticate"] == 'Bearer realm="actwheel"'
                  and answer.json()["error"]["code"] == "missing_token")
        elif missing:
            error = answer.json().get("error", {}) if answer.status_code == 403 else {}
            ok = error.get("code") == "insufficient_scope" and error.get("missing_scopes") == missing
        else:
            ok = answer.status_code not in (401, 403, 500)  # /readyz is 503 here: actors not started
        if not ok:
            wrong.append((credential, "401" if missing is None else f"403 {missing}" if missing else "allowed",
                          answer.status_code, answer.text[:200]))
    assert wrong == []


def test_the_matrix_is_not_trivial() -> None:
    """Each credential is denied somewhere and allowed somewhere, so the matrix can fail both ways."""
    public = [k for k, p in BEARER_POLICIES.items() if p.public]
    scoped = [k for k, p in BEARER_POLICIES.items() if p.scopes]
    assert len(public) == 5  # healthz, readyz, metrics, openapi.json, docs
    # any key: whoami, action types, preview, and GET/POST/DELETE /mcp (each MCP tool checks its own scopes)
    assert len(scoped) == len(BEARER_POLICIES) - len(public) - 3 - 3
    assert len(BEARER_POLICIES) * len(CREDENTIALS) >= 192  # 32 routes x 6 credentials at issue 11; later faces add
