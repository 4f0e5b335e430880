"""An ad hoc action's config is validated when it is submitted, like an automation's (issue 14, 1b).

``POST /v1/actions`` used to answer 202 to a config the type refuses and the run FAILED later, while
``POST /v1/automations`` answered 422 naming the fields. Now both refuse it at once, naming
``config.<field>``, and no run is created — on the API, on the checked amqp path (a service publisher)
and on the trusted in-process bus alike. Also: ``simple.op set_variable`` takes ``key`` as an alias of
``name``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from actwheel.actions.base import ActionContext
from actwheel.actions.defaults import default_registry
from actwheel.actors.router import ExecutorRouter
from actwheel.api.app import create_app
from actwheel.bus.base import Delivery, Reject
from actwheel.bus.envelope import Envelope
from actwheel.engine import Engine
from actwheel.errors import InvalidInput
from actwheel.messages import ActionRequested
from actwheel.service import Caller
from actwheel.storage.records import NewPrincipal, PrincipalKind

#: (action, the field the 422 names first, every field it names)
BAD = [
    ({"type": "notification.send", "config": {"channel": "log"}}, "config.body", {"config.body"}),
    ({"type": "simple.op", "config": {"op": "assert", "condition": "open('/etc/passwd')"}}, "config.condition",
     {"config.condition"}),
    ({"type": "simple.op", "config": {"op": "log"}}, "config.message", {"config.message"}),
    ({"type": "simple.op", "config": {"op": "explode", "mesage": "typo"}}, "config.mesage",
     {"config.op", "config.mesage"}),
    ({"type": "simple.op", "config": {"op": "set_variable", "name": "a", "key": "b", "value": 1}}, "config.key",
     {"config.key"}),
]
OWNER = "alice"


@pytest.fixture
async def client(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(engine.control))
    async with httpx.AsyncClient(transport=transport, base_url="http://actwheel.test") as http:
        yield http


async def _runs(engine: Engine) -> list[Any]:
    async with engine.store.transaction() as tx:
        return list(await tx.runs.query(limit=100))


@pytest.mark.parametrize(("action", "field", "fields"), BAD)
async def test_post_actions_refuses_an_invalid_config_with_422_naming_the_fields_and_creates_no_run(
        client: httpx.AsyncClient, engine: Engine, action: dict[str, Any], field: str, fields: set[str]) -> None:
    response = await client.post("/v1/actions", json={**action, "idempotency_key": "k-1"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == field
    assert {e["field"] for e in error["errors"]} == fields
    assert await _runs(engine) == []


async def test_the_same_config_is_refused_by_post_automations_with_the_same_fields(
        client: httpx.AsyncClient) -> None:
    action, _, fields = BAD[0]
    response = await client.post("/v1/automations", json={
        "trigger": {"type": "once", "at": "2031-01-01T09:00:00+00:00"}, "action": action})
    assert response.status_code == 422
    assert {e["field"] for e in response.json()["error"]["errors"]} == {f"action.{f}" for f in fields}


async def test_a_valid_config_is_still_accepted(client: httpx.AsyncClient, engine: Engine) -> None:
    response = await client.post("/v1/actions", json={"type": "simple.op", "config": {"op": "log", "message": "m"}})
    assert response.status_code == 202, response.text
    assert len(await _runs(engine)) == 1


async def test_an_unknown_type_is_refused_before_anything_is_written(engine: Engine) -> None:
    with pytest.raises(InvalidInput) as refused:
        await engine.control.actions.submit(Caller(OWNER, frozenset({"*"})), ActionRequested(
            type="no.such", config={}, owner_id=OWNER))
    assert refused.value.field == "type"
    assert await _runs(engine) == []


def _request(action: dict[str, Any], *, trusted: bool) -> Delivery:
    message = ActionRequested(type=action["type"], config=action["config"], owner_id=OWNER,
                              scopes=("notification:send",))
    envelope = Envelope.new(type=message.TYPE, data=message.to_data(), source="svc")
    return Delivery(envelope=envelope, queue="actwheel.router.requests", exchange="actwheel.commands",
                    routing_key="action.request", redelivered=False, delivery_count=1, headers={},
                    publisher=None if trusted else "svc-billing", trusted=trusted)


@pytest.mark.parametrize("trusted", [False, True], ids=["amqp-service", "memory-bus"])
@pytest.mark.parametrize(("action", "field", "fields"), BAD)
async def test_a_published_request_with_an_invalid_config_is_dead_lettered_invalid_message_with_no_run(
        engine: Engine, trusted: bool, action: dict[str, Any], field: str, fields: set[str]) -> None:
    async with engine.store.transaction() as tx:
        await tx.principals.create_if_absent(NewPrincipal(
            id="svc-billing", kind=PrincipalKind.SERVICE, scopes=("action:request", "notification:send"),
            on_behalf_of=(OWNER,)))
    router = engine.actors["router"]
    assert isinstance(router, ExecutorRouter)
    with pytest.raises(Reject) as refused:
        await router.on_request(_request(action, trusted=trusted))
    assert refused.value.reason == "invalid_message"
    assert refused.value.detail.startswith(field + "="), refused.value.detail
    assert all(f in refused.value.detail for f in fields), refused.value.detail
    assert await _runs(engine) == []


# --- simple.op set_variable: key is an alias of name ------------------------------------------------------


class _Ctx:
    """Just enough of an ActionContext for set_variable."""

    def expression_names(self) -> dict[str, Any]:
        return {"amount": 120}


@pytest.mark.parametrize("config", [
    {"op": "set_variable", "key": "big", "expression": "amount > 100"},
    {"op": "set_variable", "name": "big", "expression": "amount > 100"},
])
async def test_set_variable_takes_key_as_an_alias_of_name(config: dict[str, Any]) -> None:
    definition = default_registry().get("simple.op")
    assert definition.validate(config) == []
    ctx: ActionContext = _Ctx()  # type: ignore[assignment]
    result = await definition.execute(config, ctx)
    assert result.data["set_variables"] == {"big": True}
    assert result.summary == "set big"


@pytest.mark.parametrize(("config", "field"), [
    ({"op": "set_variable", "value": 1}, "name"),
    ({"op": "set_variable", "key": "1bad", "value": 1}, "key"),
    ({"op": "set_variable", "name": "a", "key": "a", "value": 1}, "key"),
])
def test_set_variable_without_a_usable_name_or_key_is_refused(config: dict[str, Any], field: str) -> None:
    errors = default_registry().get("simple.op").validate(config)
    assert [e.field for e in errors] == [field], errors
