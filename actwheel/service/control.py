"""The control plane: the one typed seam every face (HTTP, bus commands, MCP, dashboard) calls.

A face turns its input into a :class:`~actwheel.service.caller.Caller` and arguments, calls a use
case here, and renders the answer. No face opens a store transaction, reads the action registry or
reaches into the engine: what a face may do is exactly what this object offers, so the rules
(validation, ownership, scopes) hold for every face alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from actwheel.clock import Clock
from actwheel.service.actions import ActionService, TriggerService
from actwheel.service.automations import AutomationService
from actwheel.service.caller import Caller
from actwheel.service.confirmations import ConfirmationService
from actwheel.service.history import HistoryService
from actwheel.service.identity import KeyService, PrincipalService
from actwheel.service.ontology import OntologyService, SecretService
from actwheel.service.operations import OperationsService
from actwheel.service.runs import RunService
from actwheel.service.sessions import SessionService
from actwheel.service.stats import StatsService
from actwheel.service.stream import StreamHub
from actwheel.settings import Settings

__all__ = ["Authenticates", "ControlPlane", "EngineStatus"]


class Authenticates(Protocol):
    """Turns a presented credential into a caller (the HTTP face's bearer key)."""

    async def authenticate(self, token: str | None) -> Caller:
        """:raises Unauthenticated: no credential, or a malformed, unknown, revoked or expired one"""
        ...


class EngineStatus(Protocol):
    """What the health routes read of the running engine."""

    @property
    def ready(self) -> bool:
        """Started, and every actor is ready."""
        ...

    def actor_states(self) -> dict[str, str]:
        """Each actor's role → its run state (``running``, ``restarting``, …)."""
        ...

    def metrics_text(self) -> bytes:
        """This instance's Prometheus exposition."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlPlane:
    """The use cases of one engine, grouped by what they act on."""

    settings: Settings
    clock: Clock
    automations: AutomationService
    runs: RunService
    actions: ActionService
    triggers: TriggerService
    ontology: OntologyService
    secrets: SecretService
    principals: PrincipalService
    keys: KeyService
    authenticator: Authenticates
    status: EngineStatus
    #: the MCP face's preview digests and run-now confirmations
    confirmations: ConfirmationService
    #: the ops dashboard (issue 13): cancel / resolve / retry, bulk changes, dead letters
    operations: OperationsService
    #: automation change history
    history: HistoryService
    #: cluster stats, the system view and this instance's heartbeat
    stats: StatsService
    #: the dashboard's sign-in sessions
    sessions: SessionService
    #: this instance's live stream of run transitions, step progress and automation changes
    stream: StreamHub
