"""The MCP tools: each turns its arguments into a use case of the
:class:`~actwheel.service.ControlPlane`, called with the request's caller, and renders a structured
output. The rules of :mod:`actwheel.mcp.rules` and of
:class:`~actwheel.service.confirmations.ConfirmationService` are applied here, before the use case.

No tool retries or replays a run, resolves an UNKNOWN, reads a secret, submits an ad hoc action or
touches an engine internal (tick, claim, lease, a forced status).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel, Field

from actwheel.errors import InvalidInput, PermissionDenied
from actwheel.mcp.auth import CallerOf
from actwheel.mcp.outputs import (
    ActionTypesOut,
    AutomationDetailOut,
    AutomationsOut,
    ChangedOut,
    DisabledOut,
    PreviewOut,
    RunDetailOut,
    RunNowOut,
    RunsOut,
    action_type_out,
    audit_out,
    automation_out,
    fires_out,
    run_out,
)
from actwheel.mcp.rules import UNKNOWN_SENTENCE, automation_summary, preview_summary, require_named_zone
from actwheel.mcp.state import answered_round
from actwheel.service import Caller, ControlPlane
from actwheel.storage.records import Automation, AutomationStatus, RunStatus
from actwheel.triggers import Fire, preview_fires

__all__ = ["NOT_ASKED", "RunConfirmation", "Tools"]

_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])

#: The most automations one list_automations page holds.
MAX_PAGE = 100
_PREVIEW_FIRST = ("call preview_trigger with exactly this trigger, show the user the fire times it returns, "
                  "then pass its preview_digest")


class RunConfirmation(BaseModel):
    """What the user answers when asked to confirm a run now."""

    confirm: bool = Field(True, description="Run it now")


class _NotAsked:
    """The run-now resolver did not ask the user (a token, or no elicitation): the body decides."""


NOT_ASKED = _NotAsked()


def accepts_from(fn: _F) -> _F:
    """Let a tool method take the argument ``from`` (a Python keyword) as its parameter ``from_``."""

    @functools.wraps(fn)
    async def call(self: Any, /, **kwargs: Any) -> Any:
        if "from" in kwargs:
            kwargs["from_"] = kwargs.pop("from")
        return await fn(self, **kwargs)

    return call  # type: ignore[return-value]


def can_elicit(ctx: Context[Any, Any]) -> bool:
    """Whether the client declared form elicitation (a bare ``elicitation: {}`` counts)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


async def ask_to_run(automation_id: str, confirmation_token: str | None,
                     ctx: Context[Any, Any]) -> Elicit[RunConfirmation] | _NotAsked:
    """Rule 4, elicitation: ask the user this turn, with the server-written summary, when the mode allows
    and the client can; otherwise leave it to the token path of the tool body."""
    tools = tools_of(ctx)
    mode = tools.control.settings.mcp_run_now
    if confirmation_token is not None or mode in ("token", "deny") or not can_elicit(ctx):
        return NOT_ASKED
    caller = await tools.caller(ctx)
    automation = await tools.control.automations.get_to_run(caller, automation_id)
    tools.control.confirmations.require_run(caller, automation)
    summary, warning = await tools.run_summary(caller, automation)
    message = f"Run this automation now? {summary}" + (f" {warning}" if warning else "")
    return Elicit(message, RunConfirmation)


def tools_of(ctx: Context[Any, Any]) -> Tools:
    tools = getattr(ctx.mcp_server, "actwheel_tools", None)
    if not isinstance(tools, Tools):
        raise ToolError("this tool runs only on actwheel's MCP server")
    return tools


class Tools:
    """The tools of one server over one control plane; ``caller_of`` names who asks."""

    def __init__(self, control: ControlPlane, caller_of: CallerOf) -> None:
        self.control = control
        self._caller_of = caller_of

    async def caller(self, ctx: Context[Any, Any]) -> Caller:
        return await self._caller_of(ctx.request_context)

    # --- reads -------------------------------------------------------------------------

    @accepts_from
    async def preview_trigger(
        self,
        trigger: Annotated[dict[str, Any], Field(description="the trigger spec (docs/triggers.md); a time-based "
                                                            "one names its IANA timezone")],
        ctx: Context[Any, Any],
        count: Annotated[int, Field(ge=1, le=50, description="how many fires")] = 5,
        from_: Annotated[str | None, Field(alias="from", description="ISO-8601 instant with an offset to "
                                                                      "start after (default: now)")] = None,
    ) -> PreviewOut:
        """The next fires of a trigger, each with its UTC offset and any DST or holiday note, a one-line
        summary to show the user, and the preview_digest that create_automation (and an update that
        changes the trigger) must carry. Show the user these fire times before creating anything. A
        time-based trigger must name its IANA timezone: ask the user, never guess."""
        caller = await self.caller(ctx)
        require_named_zone(trigger)
        after = _instant("from", from_) if from_ is not None else None
        fires = self.control.triggers.preview(caller, trigger, count=count, after=after)
        zone = trigger.get("timezone")
        return PreviewOut(fires=fires_out(fires), timezone=zone if isinstance(zone, str) else None,
                          summary=preview_summary(trigger, fires),
                          preview_digest=await self.control.confirmations.preview_digest(trigger))

    async def list_action_types(self, ctx: Context[Any, Any]) -> ActionTypesOut:
        """The action types this credential may use, with each one's config schema, a description for
        agents and its idempotency (whether a crashed run can be retried safely). An automation needs
        automation:write and its action's own scopes to be created enabled, enabled or run."""
        caller = await self.caller(ctx)
        return ActionTypesOut(items=[action_type_out(d) for d in self.control.actions.types(caller)])

    async def list_automations(
        self,
        ctx: Context[Any, Any],
        status: Literal["ACTIVE", "PAUSED", "COMPLETED"] | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        after_id: Annotated[str | None, Field(description="the next_after_id of the previous page")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50,
    ) -> AutomationsOut:
        """Your own automations (never another owner's), by id, filtered by status and labels; page with
        after_id. Needs automation:read."""
        caller = await self.caller(ctx)
        items = await self.control.automations.query(
            caller, session_id=session_id, agent_id=agent_id,
            status=AutomationStatus(status) if status is not None else None, after_id=after_id, limit=limit)
        return AutomationsOut(items=[automation_out(a) for a in items],
                              next_after_id=items[-1].id if len(items) == limit else None)

    async def get_automation(self, automation_id: str, ctx: Context[Any, Any]) -> AutomationDetailOut:
        """One of your automations with its next 3 fires, its version (pass it to update_automation) and
        its status. Another owner's automation answers "not found". Needs automation:read."""
        caller = await self.caller(ctx)
        automation = await self.control.automations.get(caller, automation_id)
        fires = self._next_fires(automation, 3)
        state = f"{automation.status.value}, {'enabled' if automation.enabled else 'disabled'}"
        return AutomationDetailOut(automation=automation_out(automation), next_fires=fires_out(fires),
                                   owner_id=automation.owner_id, owner_status=state,
                                   summary=self._summary(automation))

    async def list_runs(
        self,
        ctx: Context[Any, Any],
        automation_id: str | None = None,
        status: Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "RETRY_WAIT", "UNKNOWN", "SKIPPED", "CANCELED",
                        "COMPENSATING", "ROLLED_BACK", "DEAD"] | None = None,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 20,
    ) -> RunsOut:
        """Your runs, newest first. A run in UNKNOWN comes back with duplicate_risk true and retry_allowed
        false: its action may have happened; never run it again without telling the user. Needs run:read."""
        caller = await self.caller(ctx)
        runs = await self.control.runs.query(caller, automation_id=automation_id,
                                             status=RunStatus(status) if status is not None else None, limit=limit)
        return RunsOut(items=[run_out(r) for r in runs])

    async def get_run(self, run_id: str, ctx: Context[Any, Any]) -> RunDetailOut:
        """One of your runs with its condensed audit trail, duplicate_risk and retry_allowed (UNKNOWN: the
        action may have happened, it is never retried; tell the user). Needs run:read."""
        caller = await self.caller(ctx)
        found = await self.control.runs.get(caller, run_id)
        return RunDetailOut(run=run_out(found.run), audit=[audit_out(e) for e in found.audit])

    # --- writes ------------------------------------------------------------------------

    async def create_automation(
        self,
        name: str,
        trigger: Annotated[dict[str, Any], Field(description="the trigger spec exactly as previewed")],
        action: Annotated[dict[str, Any], Field(description='{"type": <action type>, "config": {...}} (see '
                                                           "list_action_types)")],
        preview_digest: Annotated[str, Field(description="the preview_digest preview_trigger returned for "
                                                         "exactly this trigger")],
        ctx: Context[Any, Any],
        policy: dict[str, Any] | None = None,
        labels: dict[str, Any] | None = None,
        enabled: bool = True,
    ) -> ChangedOut:
        """Create an automation. First call preview_trigger with exactly this trigger, show the user the
        fire times and pass its preview_digest; a time-based trigger names its IANA timezone. Needs
        automation:write, and the action's own scopes unless created disabled. Show the user the
        summary this returns, not your own restatement."""
        caller = await self.caller(ctx)
        await self._require_previewed(trigger, preview_digest)
        payload: dict[str, Any] = {"name": name, "trigger": trigger, "action": action, "enabled": enabled}
        if policy is not None:
            payload["policy"] = policy
        if labels is not None:
            payload["labels"] = labels
        automation = await self.control.automations.create(caller, payload)
        return ChangedOut(automation=automation_out(automation), summary=self._summary(automation))

    async def update_automation(
        self,
        automation_id: str,
        version: Annotated[int, Field(description="the version get_automation returned (optimistic locking)")],
        changes: Annotated[dict[str, Any], Field(description="the fields to replace: name, trigger, action, "
                                                            "policy, labels (not enabled: use enable/disable)")],
        ctx: Context[Any, Any],
        preview_digest: Annotated[str | None, Field(description="required when changes has a trigger: the "
                                                                "preview_digest of exactly that trigger")] = None,
    ) -> ChangedOut:
        """Change an automation (replaces the given fields). A new trigger needs the preview_digest of
        exactly that trigger from preview_trigger, and names its IANA timezone. Needs automation:write, and
        the action's own scopes while the automation is enabled. Show the user the summary this returns."""
        caller = await self.caller(ctx)
        if "trigger" in changes:
            await self._require_previewed(changes["trigger"], preview_digest, field="changes.trigger")
        automation = await self.control.automations.update(caller, automation_id, changes, version)
        return ChangedOut(automation=automation_out(automation), summary=self._summary(automation))

    async def enable_automation(self, automation_id: str, ctx: Context[Any, Any]) -> ChangedOut:
        """Enable an automation so it fires again (a past next fire moves to the next one from now).
        Needs automation:write and the action's own scopes: turning on is harder than turning off."""
        caller = await self.caller(ctx)
        automation, _ = await self.control.automations.set_enabled(caller, automation_id, True)
        return ChangedOut(automation=automation_out(automation), summary=self._summary(automation))

    async def disable_automation(self, automation_id: str, ctx: Context[Any, Any]) -> DisabledOut:
        """Disable an automation: nothing fires and its waiting runs are canceled. Needs automation:write
        only (the action's scopes are not needed to turn something off)."""
        caller = await self.caller(ctx)
        automation, canceled = await self.control.automations.set_enabled(caller, automation_id, False)
        return DisabledOut(automation=automation_out(automation), canceled_run_ids=canceled,
                           summary=self._summary(automation))

    async def run_automation_now(
        self,
        automation_id: str,
        ctx: Context[Any, Any],
        confirmation: Annotated[ElicitationResult[RunConfirmation], Resolve(ask_to_run)],
        confirmation_token: Annotated[str | None, Field(description="the confirmation_token of the previous "
                                                                    "confirmation_required answer, once the user "
                                                                    "confirmed this turn")] = None,
    ) -> RunNowOut:
        """Run an automation's action once, now, after the user confirms it in this turn. When the client
        can ask the user, the server asks (accept / decline / cancel). Otherwise the first call answers
        status confirmation_required with a summary and a confirmation_token: show the user the summary,
        and only after they confirm call again with the token (valid 2 minutes, this automation and
        credential only); a retried call with the same token returns the same run. When the last run is
        UNKNOWN, running again may duplicate it: say so. Needs automation:write and the action's scopes."""
        caller = await self.caller(ctx)
        mode = self.control.settings.mcp_run_now
        if mode == "deny":
            raise ToolError("run now is turned off on this server (ACTWHEEL_MCP_RUN_NOW=deny): the user can run "
                            "it from the dashboard or the REST API")
        if confirmation_token is not None:
            run = await self.control.confirmations.run_confirmed(caller, automation_id, confirmation_token)
            return await self._started(caller, run.automation_id or automation_id, run)
        if not isinstance(confirmation, AcceptedElicitation):  # the user declined or cancelled
            return await self._not_run(caller, automation_id, confirmation.action)
        answer: object = confirmation.data  # NOT_ASKED when the resolver left it to the token
        if isinstance(answer, RunConfirmation):
            if not answer.confirm:
                return await self._not_run(caller, automation_id, "declined")
            # A client that sends this final round twice gets the run of the first (mcp/state.py).
            answered = answered_round(ctx.request_state)
            run = await self.control.automations.run_now(
                caller, automation_id, dedupe_id=None if answered is None else f"elicit_{answered[:32]}")
            return await self._started(caller, automation_id, run)
        if mode == "elicit":
            raise ToolError("this server confirms run now only by asking the user through the client "
                            "(ACTWHEEL_MCP_RUN_NOW=elicit), and this client declared no elicitation capability")
        automation = await self.control.automations.get_to_run(caller, automation_id)
        issued = await self.control.confirmations.issue(caller, automation)
        summary, warning = await self.run_summary(caller, automation)
        return RunNowOut(status="confirmation_required", summary=summary, confirmation_token=issued.token,
                         expires_at=issued.expires_at.isoformat(), warning=warning)

    # --- helpers -----------------------------------------------------------------------

    async def run_summary(self, caller: Caller, automation: Automation) -> tuple[str, str | None]:
        """The sentence to confirm a run now with, and the UNKNOWN warning when the last run is one."""
        summary = (f"Runs {automation.action_type} of automation “{automation.name}” once, now. "
                   + self._summary(automation))
        try:
            last = await self.control.runs.query(caller, automation_id=automation.id, limit=1)
        except PermissionDenied:  # no run:read: the warning cannot be known here
            return summary, None
        if last and last[0].status is RunStatus.UNKNOWN:
            return summary, ("The last run of this automation is UNKNOWN: it may have happened already, and "
                             "running again may duplicate it. " + UNKNOWN_SENTENCE)
        return summary, None

    async def _started(self, caller: Caller, automation_id: str, run: Any) -> RunNowOut:
        automation = await self.control.automations.get_to_run(caller, automation_id)
        summary, warning = await self.run_summary(caller, automation)
        return RunNowOut(status="started", summary=summary, run_id=run.id, run=run_out(run), warning=warning)

    async def _not_run(self, caller: Caller, automation_id: str, action: str) -> RunNowOut:
        automation = await self.control.automations.get_to_run(caller, automation_id)
        summary, warning = await self.run_summary(caller, automation)
        status: Literal["declined", "cancelled"] = "cancelled" if action == "cancel" else "declined"
        return RunNowOut(status=status, summary=f"Not run: the user {status} it. {summary}", warning=warning)

    async def _require_previewed(self, trigger: Any, digest: str | None, *, field: str = "trigger") -> None:
        """Rules 1 and 2: the zone is named, and the digest is preview_trigger's for exactly this trigger."""
        require_named_zone(trigger, field)
        if digest is None:
            raise ToolError(f"preview_digest is missing: {_PREVIEW_FIRST}")
        if not await self.control.confirmations.digest_matches(trigger, digest):
            raise ToolError(f"preview_digest does not match this trigger (stale, or for another trigger): "
                            f"{_PREVIEW_FIRST}")

    def _next_fires(self, automation: Automation, count: int) -> list[Fire]:
        if not automation.enabled or automation.next_run_at is None:
            return []
        after = automation.next_run_at - _TICK
        return preview_fires(automation.trigger, after=after, count=count)

    def _summary(self, automation: Automation) -> str:
        return automation_summary(name=automation.name, trigger=automation.trigger,
                                  fires=self._first_fires(automation), action_type=automation.action_type,
                                  action_config=automation.action_config, enabled=automation.enabled)

    def _first_fires(self, automation: Automation) -> list[Fire]:
        if automation.trigger.get("type") == "event":
            return []
        if automation.next_run_at is not None:
            return self._next_fires(automation, 1) if automation.enabled else [Fire(automation.next_run_at)]
        return preview_fires(automation.trigger, after=self.control.clock.now(), count=1)


_TICK = timedelta(microseconds=1)


def _instant(field: str, value: str) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(field, value, "an ISO-8601 instant with an offset, e.g. 2030-01-01T09:00:00+01:00") from None
    if at.tzinfo is None:
        raise InvalidInput(field, value, "an instant with an offset (+01:00 or Z): a naive time is refused")
    return at
