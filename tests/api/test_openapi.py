"""The OpenAPI document stays true: every route of the app is in it and nothing else (but the declared
exclusions: the dashboard's pages and /mcp), openapi-spec-validator accepts it, and the app serves it at
/openapi.json and as a page at /docs without a credential."""

from __future__ import annotations

import re

import httpx
import pytest
from openapi_spec_validator import validate
from starlette.routing import Route

from actwheel.api.app import create_app
from actwheel.api.guard import ROUTE_POLICIES
from actwheel.api.openapi import excluded, openapi_document
from actwheel.engine import Engine
from actwheel.settings import Settings

_METHODS = {"get", "put", "post", "delete", "patch"}


def app_routes() -> set[tuple[str, str]]:
    """``(METHOD, path)`` of every route of the app, read as tests/api/test_route_policies.py does."""
    engine = Engine(Settings(database_url="sqlite:///:memory:", instance="t"))
    found = set()
    for route in create_app(engine.control).routes:
        assert isinstance(route, Route)
        found |= {(method, route.path) for method in route.methods or () if method != "HEAD"}
    return found


def documented() -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in openapi_document()["paths"].items()
            for method in item if method in _METHODS}


def test_every_route_of_the_app_is_documented() -> None:
    missing = {(m, p) for m, p in app_routes() if not excluded(p)} - documented()
    assert sorted(missing) == []


def test_the_document_has_no_route_the_app_lacks() -> None:
    assert sorted(documented() - app_routes()) == []


def test_only_the_dashboard_pages_and_mcp_are_left_out() -> None:
    left_out = {(m, p) for m, p in app_routes() if excluded(p)}
    assert {p for _, p in left_out if not p.startswith("/ui/")} == {"/", "/mcp"}
    assert {m for m, p in left_out if p == "/mcp"} == {"GET", "POST", "DELETE"}
    assert all(ROUTE_POLICIES[route].credential == "session" for route in left_out if route[1] != "/mcp")
    assert len(documented()) >= 48


def test_openapi_spec_validator_accepts_it() -> None:
    document = openapi_document()
    assert document["openapi"].startswith("3.1.")
    validate(document)


def test_every_operation_has_an_id_a_tag_and_its_error_shapes() -> None:
    operations = [(p, m, op) for p, item in openapi_document()["paths"].items()
                  for m, op in item.items() if m in _METHODS]
    ids = [op["operationId"] for _, _, op in operations]
    assert len(ids) == len(set(ids))
    for path, method, op in operations:
        assert op["tags"], (method, path)
        public = op.get("security") == [] or ROUTE_POLICIES[(method.upper(), path)].public
        if not public:
            assert "401" in op["responses"], (method, path)
            assert op["responses"]["401"]["headers"]["WWW-Authenticate"]["required"] is True
        if "{id}" in path and not public:
            assert "404" in op["responses"], (method, path)


def test_path_parameters_are_declared_for_every_template() -> None:
    for path, item in openapi_document()["paths"].items():
        names = set(re.findall(r"{(\w+)}", path))
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert names == declared, path


def test_the_security_schemes_are_bearer_keys_and_the_session_cookie() -> None:
    document = openapi_document()
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}
    assert schemes["sessionCookie"]["in"] == "cookie"
    assert schemes["sessionCookie"]["name"] == "aw_session"
    assert document["security"] == [{"bearerAuth": []}]
    assert document["paths"]["/v1/stream"]["get"]["security"] == [{"bearerAuth": []}, {"sessionCookie": []}]
    stream = document["paths"]["/v1/stream"]["get"]["responses"]["200"]["content"]
    assert list(stream) == ["text/event-stream"]


@pytest.fixture
async def http() -> httpx.AsyncClient:
    engine = Engine(Settings(database_url="sqlite:///:memory:", instance="t"))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(engine.control)), base_url="http://t")


async def test_the_app_serves_the_document_without_a_credential(http: httpx.AsyncClient) -> None:
    async with http:
        answer = await http.get("/openapi.json")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == openapi_document()


async def test_the_docs_page_lists_every_operation_under_a_strict_csp(http: httpx.AsyncClient) -> None:
    async with http:
        answer = await http.get("/docs")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    csp = answer.headers["content-security-policy"]
    assert "default-src 'none'" in csp
    assert "script" not in csp
    assert "<script" not in answer.text
    for method, path in documented():
        assert f"<span class=m>{method}</span> <code>{path}</code>" in answer.text
