"""The OpenAPI 3.1 document of the REST API, built at runtime, and the routes that publish it.

``GET /openapi.json`` answers :func:`openapi_document` (public); ``GET /docs`` renders the same document
as one static HTML page (no script, strict CSP). The document is built here from tables, not
introspected: every route of :func:`~actwheel.api.app.create_app` is in it and nothing else, except
:func:`excluded` — the dashboard's HTML pages (``/`` and ``/ui/…``, a browser's, behind the session
cookie) and ``/mcp`` (JSON-RPC over streamable HTTP: docs/mcp.md describes it). ``tests/api/test_openapi.py``
keeps both directions true and runs ``openapi-spec-validator`` over it; ``tests/fuzz`` runs Schemathesis
against a running engine with it, so a response outside its schema fails the suite.

The shapes are those of the handlers (:mod:`actwheel.api.app`, :mod:`~actwheel.api.identity`,
:mod:`~actwheel.api.ontology`, :mod:`~actwheel.api.operations`, :mod:`~actwheel.api.stream`) and the
errors of :mod:`actwheel.api.errors`: 422 names ``field``, ``value``, ``expected`` (and every problem in
``errors``), 401 carries ``WWW-Authenticate``, 403 ``insufficient_scope`` names ``missing_scopes``.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable
from functools import cache
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from actwheel import __version__
from actwheel.actions.secrets import MASK
from actwheel.api.guard import Handler
from actwheel.storage.records import AutomationStatus, Origin, PrincipalKind, RunStatus

__all__ = ["DOCS_PATH", "OPENAPI_PATH", "excluded", "openapi_document", "openapi_routes"]

OPENAPI_PATH = "/openapi.json"
DOCS_PATH = "/docs"


def excluded(path: str) -> bool:
    """Whether a route of the app is left out of the document: the dashboard's pages and ``/mcp``."""
    return path in ("/", "/mcp") or path.startswith("/ui/")

Schema = dict[str, Any]

_DATETIME: Schema = {"type": "string", "format": "date-time"}
_NULLABLE_DATETIME: Schema = {"type": ["string", "null"], "format": "date-time"}
_NULLABLE_STRING: Schema = {"type": ["string", "null"]}
_STRINGS: Schema = {"type": "array", "items": {"type": "string"}}
_OBJECT: Schema = {"type": "object"}
_ANY: Schema = {}
_COUNTS: Schema = {"type": "object", "additionalProperties": {"type": "integer"}}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _record(properties: dict[str, Schema], *, optional: Iterable[str] = (), closed: bool = True) -> Schema:
    """An object whose properties are all present unless named ``optional``; ``closed``: no others."""
    skip = set(optional)
    schema: Schema = {"type": "object", "properties": properties,
                      "required": [name for name in properties if name not in skip]}
    if closed:
        schema["additionalProperties"] = False
    return schema


def _items(item: Schema, **extra: Schema) -> Schema:
    return _record({"items": {"type": "array", "items": item}, **extra})


# --- component schemas ------------------------------------------------------------------------------

_FIELD_ERROR = _record({"field": {"type": "string"}, "value": _ANY, "expected": {"type": "string"}})

_POLICY = {
    "type": "object", "additionalProperties": False,
    "description": "Retry, timeout, overlap, misfire, concurrency (docs/design.md). Every field is optional.",
    "properties": {
        "retry": {"type": "object", "additionalProperties": False, "properties": {
            "max_attempts": {"type": "integer", "minimum": 1}, "backoff_initial_s": {"type": "number"},
            "backoff_max_s": {"type": "number"}, "multiplier": {"type": "number"}, "jitter": {"type": "number"}}},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0}, "overlap": {"enum": ["skip", "buffer_one", "allow"]},
        "misfire": {"enum": ["fire_once", "skip"]}, "grace_s": {"type": "number", "minimum": 0},
        "concurrency": {"type": "integer", "minimum": 1,
                        "description": "only 1 is available (another answers 501)"},
    },
}

_TRIGGER = {"type": "object", "description": "A trigger spec: once, cron, repeat, event (docs/triggers.md).",
            "required": ["type"], "properties": {"type": {"type": "string"}}}

_ACTION = {"type": "object", "description": "An action: its type (GET /v1/actions/types) and its config.",
           "properties": {"type": {"type": "string"}, "config": _OBJECT}}

_AUTOMATION_FIELDS: dict[str, Schema] = {
    "name": {"type": "string", "maxLength": 200}, "trigger": _TRIGGER, "action": _ACTION,
    "action_type": {"type": "string", "description": "with action_config: the flat form of action"},
    "action_config": _OBJECT, "policy": _POLICY,
    "labels": {"type": "object", "description": "session_id, agent_id (strings) and free tags",
               "properties": {"session_id": {"type": "string"}, "agent_id": {"type": "string"}}},
}

_SCHEMAS: dict[str, Schema] = {
    "FieldError": _FIELD_ERROR,
    "ValidationError": _record({"error": _record({
        "type": {"type": "string"}, "message": {"type": "string"},
        "code": {"const": "unsupported", "description": "a request refused for good (Unsupported)"},
        "field": {"type": "string", "description": "the first offending field, dotted from the body root"},
        "value": _ANY, "expected": {"type": "string"},
        "errors": {"type": "array", "items": _ref("FieldError"), "description": "every problem found"},
    }, optional=("code", "errors"))}),
    "Unauthenticated": _record({"error": _record({
        "type": {"type": "string"}, "code": {"enum": ["missing_token", "invalid_token"]},
        "message": {"type": "string"}})}),
    "Forbidden": _record({"error": _record({
        "type": {"type": "string"}, "code": {"enum": ["insufficient_scope", "forbidden"]},
        "message": {"type": "string"}, "missing_scopes": _STRINGS})}),
    "Error": _record({"error": _record({"type": {"type": "string"}, "message": {"type": "string"}})}),
    "Policy": _POLICY,
    "AutomationCreate": {
        "type": "object", "additionalProperties": False, "required": ["trigger"],
        "properties": {**_AUTOMATION_FIELDS, "enabled": {"type": "boolean"},
                       "durable": {"type": "boolean", "description": "false: held in this instance's memory"}}},
    "AutomationUpdate": {
        "type": "object", "additionalProperties": False, "required": ["version"],
        "description": "The fields to replace, and the version read (optimistic locking: a stale one is 409). "
                       "enabled is changed by /enable and /disable only.",
        "properties": {**_AUTOMATION_FIELDS, "version": {"type": "integer"}, "durable": {"const": True}}},
    "Automation": _record({
        "id": {"type": "string"}, "owner_id": {"type": "string"}, "name": {"type": "string"},
        "trigger": _OBJECT, "action_type": {"type": "string"}, "action_config": _OBJECT, "policy": _OBJECT,
        "labels": _OBJECT, "enabled": {"type": "boolean"}, "status": {"enum": [s.value for s in AutomationStatus]},
        "durable": {"type": "boolean"}, "next_run_at": _NULLABLE_DATETIME, "end_at": _NULLABLE_DATETIME,
        "version": {"type": "integer"}, "partition": {"type": "integer"}, "created_at": _DATETIME,
        "updated_at": _DATETIME, "created_by": _NULLABLE_STRING, "created_by_key": _NULLABLE_STRING}),
    "Deleted": _record({"automation_ids": _STRINGS, "canceled_run_ids": _STRINGS}),
    "Run": _record({
        "id": {"type": "string"}, "automation_id": _NULLABLE_STRING, "dedupe_key": {"type": "string"},
        "scheduled_for": _NULLABLE_DATETIME, "origin": {"enum": [o.value for o in Origin]},
        "status": {"enum": [s.value for s in RunStatus]}, "reason": _NULLABLE_STRING,
        "attempt": {"type": "integer"}, "not_before": _NULLABLE_DATETIME, "lease_owner": _NULLABLE_STRING,
        "lease_expires_at": _NULLABLE_DATETIME, "lease_epoch": {"type": "integer"},
        "action_type": {"type": "string"}, "action_config": _OBJECT, "policy": _OBJECT,
        "owner_id": {"type": "string"}, "context": _OBJECT, "result": _ANY, "error": _ANY,
        "created_at": _DATETIME, "updated_at": _DATETIME, "started_at": _NULLABLE_DATETIME,
        "finished_at": _NULLABLE_DATETIME}),
    "AuditEntry": _record({
        "seq": {"type": "integer"}, "event_id": {"type": "string"}, "phase": {"type": "string"},
        "actor": {"type": "string"}, "run_id": _NULLABLE_STRING, "automation_id": _NULLABLE_STRING,
        "details": _OBJECT, "occurred_at": _DATETIME}),
    "RunStarted": _record({"run_id": {"type": "string"}, "run": _ref("Run")}),
    "ActionRequest": {
        "type": "object", "description": "An ad hoc request (executor_type / parameters are accepted for "
                                         "type / config); a repeated idempotency_key answers the first run.",
        "properties": {"type": {"type": "string"}, "config": _OBJECT, "owner_id": {"type": "string"},
                       "idempotency_key": {"type": "string"}, "dry_run": {"type": "boolean"},
                       "context": _OBJECT, "executor_type": {"type": "string"}, "parameters": _OBJECT}},
    "ActionAccepted": _record({"run_id": {"type": "string"}, "status": {"enum": [s.value for s in RunStatus]},
                               "duplicate": {"type": "boolean"},
                               "result": {**_ANY, "description": "the first run's result (a duplicate only)"}},
                              optional=("result",)),
    "ActionType": _record({
        "type": {"type": "string"}, "aliases": _STRINGS, "display_name": {"type": "string"},
        "description": {"type": "string"}, "config_schema": _OBJECT,
        "idempotency": {"type": "string"}, "required_scopes": _STRINGS,
        "capabilities": _record({name: {"type": "boolean"} for name in
                                 ("compensable", "dry_run", "timeout_control", "parallel_safe")})}),
    "PreviewRequest": {
        "type": "object", "additionalProperties": False, "required": ["trigger"],
        "properties": {"trigger": _TRIGGER, "count": {"type": "integer", "minimum": 1, "maximum": 500},
                       "from": {**_DATETIME, "description": "default: now"}}},
    "Preview": _record({"fires": {"type": "array", "items": _record({"at": _DATETIME,
                                                                     "note": _NULLABLE_STRING})}}),
    "ObjectTypeSpec": {
        "type": "object", "additionalProperties": False, "required": ["name"],
        "properties": {"name": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.-]{0,99}$"},
                       "properties": {"type": "object", "additionalProperties": {"type": "object"}},
                       "required": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}},
    "ObjectType": _record({"name": {"type": "string"}, "properties": _OBJECT, "required": _STRINGS,
                           "version": {"type": "integer"}}),
    "OntologyObject": _record({"id": {"type": "string"}, "object_type": {"type": "string"}, "properties": _OBJECT,
                               "version": {"type": "integer"}, "deleted": {"type": "boolean"}}),
    "Relation": _record({"id": {"type": "string"}, "relation_type": {"type": "string"},
                         "source": {"type": "string"}, "target": {"type": "string"}, "properties": _OBJECT}),
    "SecretPut": {"type": "object", "required": ["name", "value"],
                  "properties": {"name": {"type": "string"}, "value": {"type": "string", "minLength": 1},
                                 "replace": {"type": "boolean"}}},
    "Secret": _record({"name": {"type": "string"}, "value": {"const": MASK}, "version": {"type": "integer"},
                       "reference": _OBJECT}),
    "SecretName": _record({"name": {"type": "string"}, "value": {"const": MASK}}),
    "WhoAmI": _record({"principal_id": {"type": "string"}, "kind": {"type": "string"}, "key_id": _NULLABLE_STRING,
                       "agent_id": _NULLABLE_STRING, "owner_id": {"type": "string"}, "scopes": _STRINGS,
                       "auth": {"enum": ["enabled", "disabled"]}}),
    "KeyCreate": {"type": "object", "required": ["name", "scopes"],
                  "properties": {"name": {"type": "string"}, "scopes": _STRINGS, "principal_id": {"type": "string"},
                                 "agent_id": {"type": "string"},
                                 "expires_in_s": {"type": "integer", "minimum": 1}}},
    "KeyRotate": {"type": "object", "properties": {"grace_s": {"type": "integer", "minimum": 0}}},
    "Key": _record(_KEY := {
        "id": {"type": "string"}, "name": {"type": "string"}, "principal_id": {"type": "string"},
        "agent_id": _NULLABLE_STRING, "scopes": _STRINGS, "expires_at": _NULLABLE_DATETIME,
        "revoked": {"type": "boolean"}, "revoked_at": _NULLABLE_DATETIME, "last_used_at": _NULLABLE_DATETIME,
        "replaced_by": _NULLABLE_STRING, "created_at": _DATETIME}),
    "MintedKey": _record({**_KEY, "key": {"type": "string", "description": "shown this once only"}}),
    "PrincipalCreate": {
        "type": "object", "required": ["id", "kind", "scopes"],
        "properties": {"id": {"type": "string"}, "kind": {"enum": [k.value for k in PrincipalKind]},
                       "scopes": _STRINGS, "parent_id": {"type": "string", "description": "an agent's user"},
                       "display_name": {"type": "string", "maxLength": 200}, "on_behalf_of": _STRINGS}},
    "Principal": _record({
        "id": {"type": "string"}, "kind": {"enum": [k.value for k in PrincipalKind]},
        "display_name": {"type": "string"}, "status": {"enum": ["ACTIVE", "BANNED"]}, "scopes": _STRINGS,
        "parent_id": _NULLABLE_STRING, "on_behalf_of": _STRINGS, "ban_reason": _NULLABLE_STRING,
        "banned_by": _NULLABLE_STRING, "banned_at": _NULLABLE_DATETIME, "created_at": _DATETIME,
        "updated_at": _DATETIME}),
    "Percentiles": _record({"count": {"type": "integer"}, "p50": {"type": ["number", "null"]},
                            "p95": {"type": ["number", "null"]}, "p99": {"type": ["number", "null"]},
                            "ranked": {"type": ["integer", "null"]}}),
    "Stats": _record({
        "scope": {"enum": ["owner", "cluster"]}, "owner_id": _NULLABLE_STRING, "now": _DATETIME,
        "window_s": {"type": "number"}, "since": _DATETIME,
        "runs_per_minute": _record({"last_5m": {"type": "number"}, "last_60m": {"type": "number"}}),
        "by_status": _COUNTS, "skipped_by_reason": _COUNTS, "canceled_by_reason": _COUNTS,
        "fire_lateness_s": _ref("Percentiles"), "start_lateness_s": _ref("Percentiles"), "attention": _COUNTS,
        "attention_since": _DATETIME, "outbox": {"type": ["object", "null"]},
        "dead_letters": {"type": ["object", "null"], "additionalProperties": {"type": "integer"}},
        "attention_in_window": _COUNTS}),
    "System": _record({
        "now": _DATETIME, "instance": {"type": "string"}, "instances": {"type": "array", "items": _OBJECT},
        "partitions": {"type": "array", "items": _OBJECT}, "outbox": _OBJECT, "dead_letters": _COUNTS,
        "this_instance": _OBJECT}),
    "HistoryEntry": _record({
        "seq": {"type": "integer"}, "id": {"type": "string"}, "automation_id": {"type": "string"},
        "owner_id": {"type": "string"}, "change": {"enum": ["created", "updated", "enabled", "disabled", "deleted"]},
        "actor_id": {"type": "string"}, "key_id": _NULLABLE_STRING, "at": _DATETIME,
        "before": {"type": ["object", "null"]}, "after": {"type": ["object", "null"]}}),
    "BulkAutomations": {
        "type": "object", "required": ["op"],
        "description": "Exactly one of ids and filter; dry_run answers what would apply.",
        "properties": {"op": {"enum": ["enable", "disable", "delete"]}, "ids": _STRINGS, "filter": _OBJECT,
                       "dry_run": {"type": "boolean"}, "note": {"type": "string", "maxLength": 2000}}},
    "BulkCancel": {
        "type": "object", "description": "Exactly one of ids and filter; dry_run answers what would apply.",
        "properties": {"ids": _STRINGS, "filter": _OBJECT, "dry_run": {"type": "boolean"},
                       "note": {"type": "string", "maxLength": 2000}}},
    "BulkResult": _record({
        "op": {"type": "string"}, "dry_run": {"type": "boolean"}, "count": {"type": "integer"},
        "items": {"type": "array", "items": _record({
            "id": {"type": "string"},
            "status": {"enum": ["applied", "would_apply", "not_found", "forbidden", "conflict", "invalid"]},
            "error": _NULLABLE_STRING})},
        "truncated": {"type": "boolean"}, "ids": _STRINGS}),
    "Note": {"type": "object", "properties": {"note": {"type": "string", "maxLength": 2000}}},
    "Resolve": {"type": "object", "required": ["outcome", "note"],
                "properties": {"outcome": {"enum": ["happened", "did_not_happen"]},
                               "note": {"type": "string", "minLength": 1, "maxLength": 2000}}},
    "Retried": _record({"run_id": {"type": "string"}, "run": _ref("Run"), "created": {"type": "boolean"}}),
    "DeadLetter": _record({"id": {"type": "string"}, "source": {"type": "string"}, "ref_id": _NULLABLE_STRING,
                           "reason": {"type": "string"}, "payload": _OBJECT, "created_at": _DATETIME}),
    "Requeued": _record({"letter_id": {"type": "string"}, "source": {"type": "string"},
                         "run": {"oneOf": [_ref("Run"), {"type": "null"}]}, "created": {"type": "boolean"},
                         "outbox_id": {"type": ["integer", "null"]}}),
}


# --- operations -------------------------------------------------------------------------------------

def _json(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS: dict[int, Schema] = {
    401: {**_json(_ref("Unauthenticated"), "No key, or a key refused (RFC 6750)"),
          "headers": {"WWW-Authenticate": {"required": True, "schema": {"type": "string"},
                                           "description": 'Bearer realm="actwheel"[, error="invalid_token"]'}}},
    403: {**_json(_ref("Forbidden"), "The key lacks a scope (insufficient_scope names them) or the rule refuses"),
          "headers": {"WWW-Authenticate": {"schema": {"type": "string"},
                                           "description": "with error=\"insufficient_scope\" and scope=\"…\""}}},
    404: _json(_ref("Error"), "No such object that the caller may see (another owner's answers the same)"),
    409: _json(_ref("Error"), "A conflict: a stale version, a status that moved on, an existing name"),
    422: _json(_ref("ValidationError"), "Bad input, naming the field, the value and what would be valid"),
    501: _json(_ref("Error"), "Not available on this server (or not yet)"),
    503: _json(_ref("Error"), "The database is unavailable, or the server is busy: retry shortly"),
}

_AUTH = (401, 403, 422, 503)


def _param(name: str, schema: Schema, description: str, *, where: str = "query",
           required: bool = False) -> Schema:
    return {"name": name, "in": where, "required": required, "schema": schema, "description": description}


_ID = _param("id", {"type": "string"}, "the object's id", where="path", required=True)
_LIMIT = _param("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "page size (default 100)")
_INCLUDE_DELETED = _param("include_deleted", {"type": "boolean"}, "soft-deleted objects too")
_WINDOW = {"type": "string", "pattern": r"^[0-9]{1,6}[smhd]$"}


def _op(tag: str, summary: str, ok: dict[int, Schema], *, scopes: Iterable[str] = (), errors: Iterable[int] = _AUTH,
        params: Iterable[Schema] = (), body: str | None = None, body_required: bool = False,
        public: bool = False, links: dict[int, dict[str, Schema]] | None = None, **extra: Any) -> Schema:
    responses = {str(code): response for code, response in ok.items()}
    for code, named in (links or {}).items():
        responses[str(code)] = {**responses[str(code)], "links": named}
    for code in errors:
        responses[str(code)] = _ERRORS[code]
    needed = list(scopes)
    operation: Schema = {"tags": [tag], "summary": summary, "responses": responses, **extra}
    if needed:
        operation["description"] = (operation.get("description", "") + f"\n\nScopes: {', '.join(needed)}.").strip()
    if public:
        operation["security"] = []
    params = list(params)
    if params:
        operation["parameters"] = params
    if body is not None:
        operation["requestBody"] = {"required": body_required,
                                    "content": {"application/json": {"schema": _ref(body)}}}
    return operation


def _link(operation_id: str, description: str, **parameters: str) -> Schema:
    return {"operationId": operation_id, "description": description,
            "parameters": parameters or {"id": "$response.body#/id"}}


_AUTOMATION_LINKS = {
    "GetAutomation": _link("getAutomation", "read it back"),
    "UpdateAutomation": _link("updateAutomation", "edit it"),
    "RunAutomation": _link("runAutomation", "run it now"),
    "DisableAutomation": _link("disableAutomation", "disable it"),
    "AutomationHistory": _link("automationHistory", "its history"),
    "DeleteAutomation": _link("deleteAutomation", "delete it"),
}
_RUN_LINKS = {
    "GetRun": _link("getRun", "the run with its audit trail", id="$response.body#/run_id"),
    "CancelRun": _link("cancelRun", "cancel it", id="$response.body#/run_id"),
    "RetryRun": _link("retryRun", "retry it", id="$response.body#/run_id"),
}


def _ok(code: int, schema: Schema | str, description: str = "OK") -> dict[int, Schema]:
    return {code: _json(_ref(schema) if isinstance(schema, str) else schema, description)}


def _list(schema: str, **extra: Schema) -> Schema:
    return _items(_ref(schema), **extra)


_AUTOMATION_QUERY = [
    _param("owner_id", {"type": "string"}, "another owner's (admin:read)"),
    _param("session_id", {"type": "string"}, "label session_id"),
    _param("agent_id", {"type": "string"}, "label agent_id"),
    _param("status", {"enum": [s.value for s in AutomationStatus]}, "status"),
    _param("enabled", {"type": "boolean"}, "enabled or not"),
    _param("q", {"type": "string"}, "the name contains (case-insensitive)"),
    _param("action_type", {"type": "string"}, "action type"),
    _param("after_id", {"type": "string"}, "the last id of the previous page"), _LIMIT,
]

_RUN_QUERY = [
    _param("status", {"type": "string"}, "a status, or several comma-separated (" +
           ", ".join(s.value for s in RunStatus) + ")"),
    _param("automation_id", {"type": "string"}, "the runs of one automation (required for an agent-bound key)"),
    _param("created_after", _DATETIME, "an ISO-8601 instant with an offset"),
    _param("created_before", _DATETIME, "an ISO-8601 instant with an offset"),
    _param("action_type", {"type": "string"}, "action type"),
    _param("origin", {"enum": [o.value for o in Origin]}, "why the run exists"),
    _param("before", {"type": "string"}, "the cursor of the next page (next of the previous answer)"),
    _param("owner_id", {"type": "string"}, "another owner's (admin:read), or * for every owner's"), _LIMIT,
]


def _paths() -> dict[str, dict[str, Any]]:
    automation, run, action = "automations", "runs", "actions"
    return {
        "/healthz": {"get": _op("health", "Liveness", _ok(200, _record({"status": {"const": "ok"}})),
                                public=True, errors=(), operationId="healthz")},
        "/readyz": {"get": _op("health", "Readiness: every actor running", {
            200: _json(_ref("Readiness"), "Ready"), 503: _json(_ref("Readiness"), "Not ready")},
            public=True, errors=(), operationId="readyz")},
        "/metrics": {"get": _op(
            "health", "Prometheus metrics", {200: {"description": "The exposition text",
                                                   "content": {"text/plain": {"schema": {"type": "string"}}}}},
            errors=(401, 403), operationId="metrics", security=[{}, {"bearerAuth": []}],
            description="Public by default; metrics:read when ACTWHEEL_METRICS_AUTH is set.")},
        OPENAPI_PATH: {"get": _op("docs", "This document", _ok(200, _OBJECT, "OpenAPI 3.1"), public=True,
                                  errors=(), operationId="openapi")},
        DOCS_PATH: {"get": _op("docs", "This document as a page", {200: {
            "description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}}, public=True,
            errors=(), operationId="docs")},
        "/v1/whoami": {"get": _op("identity", "Who the key is", _ok(200, "WhoAmI"), errors=(401, 503),
                                  operationId="whoami")},
        "/v1/automations": {
            "post": _op(automation, "Create an automation", _ok(201, "Automation", "Created"),
                        scopes=["automation:write", "the action's scopes"], errors=(*_AUTH, 501),
                        body="AutomationCreate", body_required=True, links={201: _AUTOMATION_LINKS},
                        operationId="createAutomation"),
            "get": _op(automation, "List automations (by id)", _ok(200, _list("Automation")),
                       scopes=["automation:read"], params=_AUTOMATION_QUERY, operationId="listAutomations",
                       description="Also label.<key>=<value>: the label has that value."),
        },
        "/v1/automations/{id}": {
            "parameters": [_ID],
            "get": _op(automation, "Read an automation", _ok(200, "Automation"), scopes=["automation:read"],
                       errors=(*_AUTH, 404), operationId="getAutomation"),
            "patch": _op(automation, "Update an automation", _ok(200, "Automation"),
                         scopes=["automation:write", "the action's scopes when enabled"],
                         errors=(*_AUTH, 404, 409, 501), body="AutomationUpdate", body_required=True,
                         links={200: _AUTOMATION_LINKS}, operationId="updateAutomation"),
            "delete": _op(automation, "Delete an automation (its waiting runs are canceled)", _ok(200, "Deleted"),
                          scopes=["automation:write"], errors=(*_AUTH, 404), operationId="deleteAutomation"),
        },
        "/v1/automations/{id}/enable": {"parameters": [_ID], "post": _op(
            automation, "Enable", _ok(200, "Automation"), scopes=["automation:write", "the action's scopes"],
            errors=(*_AUTH, 404, 409), operationId="enableAutomation")},
        "/v1/automations/{id}/disable": {"parameters": [_ID], "post": _op(
            automation, "Disable (canceling waiting runs)",
            _ok(200, _record({"automation": _ref("Automation"), "canceled_run_ids": _STRINGS})),
            scopes=["automation:write"], errors=(*_AUTH, 404, 409), operationId="disableAutomation")},
        "/v1/automations/{id}/run": {"parameters": [_ID], "post": _op(
            automation, "Run now", _ok(202, "RunStarted", "A manual run was created"),
            scopes=["automation:write", "the action's scopes"], errors=(*_AUTH, 404), links={202: _RUN_LINKS},
            operationId="runAutomation")},
        "/v1/automations/{id}/history": {"parameters": [_ID], "get": _op(
            automation, "The automation's changes", _ok(200, _list("HistoryEntry")), scopes=["automation:read"],
            errors=(*_AUTH, 404), operationId="automationHistory",
            params=[_param("after_seq", {"type": "integer", "minimum": 0}, "the seq of the last entry seen"),
                    _LIMIT])},
        "/v1/automations/batch": {"post": _op(
            automation, "Create up to 1,000 automations, all or none (bad items named items[i].<field>)",
            _ok(201, _list("Automation"), "Created, in the order given"),
            scopes=["automation:write", "each action's scopes"], errors=(*_AUTH, 501), body="AutomationBatch",
            body_required=True, operationId="createAutomationBatch")},
        "/v1/automations/bulk": {"post": _op(
            automation, "Enable, disable or delete by ids or by filter", _ok(200, "BulkResult"),
            scopes=["automation:write"], body="BulkAutomations", body_required=True,
            operationId="bulkAutomations")},
        "/v1/runs": {"get": _op(run, "List runs (newest first)", _ok(200, _list(
            "Run", next={"type": ["string", "null"], "description": "the cursor of the next page"})),
            scopes=["run:read"], params=_RUN_QUERY, operationId="listRuns")},
        "/v1/runs/{id}": {"parameters": [_ID], "get": _op(
            run, "A run with its audit trail", _ok(200, {"allOf": [_ref("Run")], "type": "object",
                                                         "properties": {"audit": {"type": "array",
                                                                                  "items": _ref("AuditEntry")}},
                                                         "required": ["audit"]}),
            scopes=["run:read"], errors=(*_AUTH, 404), operationId="getRun")},
        "/v1/runs/bulk-cancel": {"post": _op(
            run, "Cancel waiting runs by ids or by filter", _ok(200, "BulkResult"), scopes=["run:write"],
            body="BulkCancel", body_required=True, operationId="bulkCancelRuns")},
        "/v1/runs/{id}/cancel": {"parameters": [_ID], "post": _op(
            run, "Cancel a PENDING or RETRY_WAIT run", _ok(200, "Run"), scopes=["run:write"],
            errors=(*_AUTH, 404, 409), body="Note", operationId="cancelRun")},
        "/v1/runs/{id}/resolve": {"parameters": [_ID], "post": _op(
            run, "Resolve an UNKNOWN run", _ok(200, "Run"), scopes=["run:write"], errors=(*_AUTH, 404, 409),
            body="Resolve", body_required=True, operationId="resolveRun")},
        "/v1/runs/{id}/retry": {"parameters": [_ID], "post": _op(
            run, "Retry a DEAD or FAILED run (once: a repeat answers the same new run)",
            {202: _json(_ref("Retried"), "A new run"), 200: _json(_ref("Retried"), "Already retried")},
            scopes=["run:write", "the action's scopes"], errors=(*_AUTH, 404, 409), operationId="retryRun")},
        "/v1/actions": {"post": _op(
            action, "Request an action now (an ad hoc run)",
            {202: _json(_ref("ActionAccepted"), "A new run"),
             200: _json(_ref("ActionAccepted"), "A repeated idempotency_key: the first run")},
            scopes=["action:request", "the action's scopes"], body="ActionRequest", body_required=True,
            operationId="submitAction")},
        "/v1/actions/types": {"get": _op(action, "The action types the key may use",
                                         _ok(200, _list("ActionType")), errors=(401, 503),
                                         operationId="actionTypes")},
        "/v1/triggers/preview": {"post": _op(
            "triggers", "The next fires of a trigger, with DST and holiday notes", _ok(200, "Preview"),
            body="PreviewRequest", body_required=True, operationId="previewTrigger")},
        "/v1/stream": {"get": _op(
            "stream", "Server-Sent Events of the caller's runs and automations", {200: {
                "description": "event: run|step|automation|resync, JSON data, an id per event; "
                               "keep-alive comments. Last-Event-ID is not honoured.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}}}},
            scopes=["run:read"], errors=(401, 403, 503), operationId="stream",
            security=[{"bearerAuth": []}, {"sessionCookie": []}])},
        "/v1/ontology/types": {
            "post": _op("ontology", "Define (or redefine) an object type",
                        {201: _json(_ref("ObjectType"), "Defined"), 200: _json(_ref("ObjectType"), "Redefined")},
                        scopes=["ontology:schema"], body="ObjectTypeSpec", body_required=True,
                        operationId="defineObjectType"),
            "get": _op("ontology", "Every object type", _ok(200, _list("ObjectType")), scopes=["ontology:read"],
                       operationId="listObjectTypes"),
        },
        "/v1/ontology/objects": {"get": _op(
            "ontology", "Objects", _ok(200, _list("OntologyObject")), scopes=["ontology:read"],
            params=[_param("type", {"type": "string", "pattern": "^([A-Za-z][A-Za-z0-9_.-]{0,99})?$"},
                           "object type (empty: any)"),
                    _INCLUDE_DELETED, _LIMIT], operationId="listObjects")},
        "/v1/ontology/objects/{id}": {"parameters": [_ID], "get": _op(
            "ontology", "One object", _ok(200, "OntologyObject"), scopes=["ontology:read"], errors=(*_AUTH, 404),
            params=[_INCLUDE_DELETED], operationId="getObject")},
        "/v1/ontology/relations": {"get": _op(
            "ontology", "Relations of an object (source or target needed)", _ok(200, _list("Relation")),
            scopes=["ontology:read"], operationId="listRelations",
            params=[_param("source", {"type": "string"}, "source object id"),
                    _param("target", {"type": "string"}, "target object id"), _LIMIT])},
        "/v1/secrets": {
            "post": _op("secrets", "Store (or with replace, rotate) a secret: its value is never answered",
                        {201: _json(_ref("Secret"), "Stored"), 200: _json(_ref("Secret"), "Replaced")},
                        scopes=["secret:write"], errors=(*_AUTH, 409, 501), body="SecretPut", body_required=True,
                        operationId="putSecret"),
            "get": _op("secrets", "The caller's secret names", _ok(200, _list("SecretName")),
                       scopes=["secret:read"], operationId="listSecrets"),
        },
        "/v1/keys": {
            "post": _op("identity", "Mint a key (shown once)", _ok(201, "MintedKey", "Minted"),
                        scopes=["key:write"], errors=(*_AUTH, 404), body="KeyCreate", body_required=True,
                        links={201: {"RotateKey": _link("rotateKey", "rotate it"),
                                     "RevokeKey": _link("revokeKey", "revoke it")}},
                        operationId="createKey"),
            "get": _op("identity", "The caller's live keys (never the key)", _ok(200, _list("Key")),
                       scopes=["key:read"], operationId="listKeys",
                       params=[_param("principal_id", {"type": "string"}, "another principal's (admin:read)")]),
        },
        "/v1/keys/{id}": {"parameters": [_ID], "delete": _op(
            "identity", "Revoke a key", _ok(200, "Key"), scopes=["key:write"], errors=(*_AUTH, 404),
            operationId="revokeKey")},
        "/v1/keys/{id}/rotate": {"parameters": [_ID], "post": _op(
            "identity", "Rotate a key: a new one, the old one works for grace_s", _ok(201, "MintedKey", "Minted"),
            scopes=["key:write"], errors=(*_AUTH, 404, 409), body="KeyRotate", operationId="rotateKey")},
        "/v1/principals": {
            "post": _op("identity", "Create a principal", _ok(201, "Principal", "Created"), scopes=["admin:write"],
                        errors=(*_AUTH, 404, 409), body="PrincipalCreate", body_required=True,
                        links={201: {"BanPrincipal": _link("banPrincipal", "ban it"),
                                     "UnbanPrincipal": _link("unbanPrincipal", "unban it"),
                                     "SetScopes": _link("setPrincipalScopes", "set its ceiling")}},
                        operationId="createPrincipal"),
            "get": _op("identity", "Principals (by id)", _ok(200, _list("Principal")), scopes=["admin:read"],
                       operationId="listPrincipals",
                       params=[_param("kind", {"enum": [k.value for k in PrincipalKind]}, "kind"),
                               _param("after_id", {"type": "string"}, "the last id of the previous page"), _LIMIT]),
        },
        "/v1/principals/{id}/ban": {"parameters": [_ID], "post": _op(
            "identity", "Ban a principal", _ok(200, "Principal"), scopes=["admin:write"], errors=(*_AUTH, 404, 409),
            body="Ban", body_required=True, operationId="banPrincipal")},
        "/v1/principals/{id}/unban": {"parameters": [_ID], "post": _op(
            "identity", "Unban a principal", _ok(200, "Principal"), scopes=["admin:write"],
            errors=(*_AUTH, 404, 409), operationId="unbanPrincipal")},
        "/v1/principals/{id}/scopes": {"parameters": [_ID], "put": _op(
            "identity", "Replace a principal's scope ceiling", _ok(200, "Principal"), scopes=["admin:write"],
            errors=(*_AUTH, 404), body="Scopes", body_required=True, operationId="setPrincipalScopes")},
        "/v1/stats": {"get": _op(
            "operations", "Run counts, rates and lateness over a window (per owner unless admin:read)",
            _ok(200, "Stats"), scopes=["run:read"], operationId="stats",
            params=[_param("window", _WINDOW, "<n><s|m|h|d>, 1 s to 7 d (default 15m)"),
                    _param("attention", _WINDOW, "the span of the recent FAILED count (default: the window; "
                           "UNKNOWN and DEAD are counted whatever their age)")])},
        "/v1/system": {"get": _op("operations", "Instances, partitions, outbox, dead letters", _ok(200, "System"),
                                  scopes=["admin:read"], operationId="system")},
        "/v1/dead-letters": {"get": _op(
            "operations", "Dead letters (oldest first)", _ok(200, _list("DeadLetter")), scopes=["admin:read"],
            params=[_param("source", {"type": "string"}, "source"), _LIMIT], operationId="listDeadLetters")},
        "/v1/dead-letters/{id}": {
            "parameters": [_ID],
            "get": _op("operations", "One dead letter", _ok(200, "DeadLetter"), scopes=["admin:read"],
                       errors=(*_AUTH, 404), operationId="getDeadLetter"),
            "delete": _op("operations", "Discard a dead letter", _ok(200, "DeadLetter"), scopes=["admin:write"],
                          errors=(*_AUTH, 404), operationId="discardDeadLetter"),
        },
        "/v1/dead-letters/{id}/requeue": {"parameters": [_ID], "post": _op(
            "operations", "Send a dead letter round again", _ok(202, "Requeued", "Requeued"),
            scopes=["admin:write", "the action's scopes"], errors=(*_AUTH, 404), operationId="requeueDeadLetter")},
    }


_SCHEMAS.update({
    "Readiness": _record({"ready": {"type": "boolean"}, "actors": {"type": "object",
                                                                  "additionalProperties": {"type": "string"}}}),
    "AutomationBatch": {"type": "object", "additionalProperties": False, "required": ["items"],
                        "properties": {"items": {"type": "array", "maxItems": 1000,
                                                 "items": _ref("AutomationCreate")}}},
    "Ban": {"type": "object", "required": ["reason"],
            "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": 500}}},
    "Scopes": {"type": "object", "required": ["scopes"], "properties": {"scopes": _STRINGS}},
})


@cache
def _document() -> bytes:
    return orjson.dumps(openapi_document())


def openapi_document() -> dict[str, Any]:
    """The document (a fresh dict each call): OpenAPI 3.1, every REST route of the app."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "actwheel", "version": __version__,
                 "description": "The scheduling and action-execution engine's REST API. Authenticate with "
                                "`Authorization: Bearer <key>` (the bootstrap admin's key is written to "
                                "actwheel-admin.key at first start). Not in this document: the dashboard's HTML "
                                "pages (/ and /ui/…) and /mcp (docs/mcp.md).",
                 "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}},
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}],
        "paths": _paths(),
        "components": {
            "schemas": orjson.loads(orjson.dumps(_SCHEMAS)),
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer",
                               "description": "An API key (POST /v1/keys, actwheel keys create)"},
                "sessionCookie": {"type": "apiKey", "in": "cookie", "name": "aw_session",
                                  "description": "The dashboard's session (GET /v1/stream only here)"},
            },
        },
    }


# --- the routes -------------------------------------------------------------------------------------

_STYLE = ("body{font:15px/1.45 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}"
          "h2{margin-top:2rem;border-bottom:1px solid #ccc}code,pre{font:13px ui-monospace,monospace}"
          "pre{background:#f4f4f4;padding:.5rem;overflow:auto}.m{display:inline-block;min-width:4.5rem;"
          "font-weight:700}details{margin:.25rem 0 .75rem 1rem}")
_CSP = ("default-src 'none'; style-src 'sha256-" + base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
        + "'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def _docs_html(document: dict[str, Any]) -> str:
    """Every operation by tag: method, path, summary, parameters, body and responses (their schemas as JSON)."""
    def dump(value: Any) -> str:
        return html.escape(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())

    by_tag: dict[str, list[str]] = {}
    for path, item in document["paths"].items():
        shared = item.get("parameters", [])
        for method, operation in item.items():
            if method == "parameters":
                continue
            parts = [f"<h3><span class=m>{method.upper()}</span> <code>{html.escape(path)}</code> — "
                     f"{html.escape(operation['summary'])}</h3>"]
            if operation.get("description"):
                parts.append(f"<p>{html.escape(operation['description'])}</p>")
            params = [*shared, *operation.get("parameters", [])]
            if params:
                parts.append("<ul>" + "".join(
                    f"<li><code>{html.escape(p['name'])}</code> ({p['in']}{', required' if p['required'] else ''}): "
                    f"{html.escape(p['description'])} <code>{dump(p['schema'])}</code></li>" for p in params) + "</ul>")
            if "requestBody" in operation:
                parts.append(f"<details><summary>Body</summary><pre>{dump(operation['requestBody'])}</pre></details>")
            parts.append("<details><summary>Responses: " + ", ".join(operation["responses"]) +
                         f"</summary><pre>{dump(operation['responses'])}</pre></details>")
            by_tag.setdefault(operation["tags"][0], []).append("".join(parts))
    body = "".join(f"<h2>{html.escape(tag)}</h2>{''.join(ops)}" for tag, ops in by_tag.items())
    schemas = dump(document["components"])
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>actwheel API</title>"
            f"<style>{_STYLE}</style></head><body><h1>actwheel API {html.escape(document['info']['version'])}</h1>"
            f"<p>{html.escape(document['info']['description'])} The machine-readable document: "
            f"<a href={OPENAPI_PATH}>{OPENAPI_PATH}</a>.</p>{body}"
            f"<h2>Schemas and security</h2><pre>{schemas}</pre></body></html>")


@cache
def _docs_page() -> bytes:
    return _docs_html(openapi_document()).encode()


async def _openapi(request: Request) -> Response:
    return Response(_document(), media_type="application/json")


async def _docs(request: Request) -> Response:
    return Response(_docs_page(), media_type="text/html; charset=utf-8",
                    headers={"Content-Security-Policy": _CSP, "X-Content-Type-Options": "nosniff"})


def openapi_routes() -> list[tuple[str, str, Handler]]:
    """``GET /openapi.json`` and ``GET /docs`` (both public), for :func:`~actwheel.api.app.create_app`."""
    return [("GET", OPENAPI_PATH, _openapi), ("GET", DOCS_PATH, _docs)]
