"""The consuming queue of every role, in one place.

Every instance declares all of them at start, whatever roles it runs, so that a
message published before its consumer ever started (``--actors ticker`` on one
host, planners on another) waits in its queue instead of being unroutable.
Declaring is idempotent on the broker.
"""

from __future__ import annotations

from actwheel.bus.topology import QueueSpec, Topology
from actwheel.messages import ActionRequested, AutomationsDue, RunsReady

__all__ = ["auditor_events", "planner_changes", "planner_commands", "planner_due", "planner_events",
           "role_queues", "router_ready", "router_requests"]

AUDITED_CHANGES = ("created", "updated", "enabled", "disabled", "deleted", "completed")


def planner_due(topology: Topology, prefix: str = "") -> QueueSpec:
    return QueueSpec(f"{prefix}actwheel.planner.due", ((topology.events, AutomationsDue.TYPE),))


def planner_commands(topology: Topology, prefix: str = "") -> QueueSpec:
    return QueueSpec(f"{prefix}actwheel.planner.commands", ((topology.commands, "command.#"),))


def planner_changes(topology: Topology, prefix: str = "") -> QueueSpec:
    changes = tuple((topology.events, f"automation.{c}") for c in ("created", "updated", "enabled"))
    return QueueSpec(f"{prefix}actwheel.planner.changes", changes)


def planner_events(topology: Topology, prefix: str = "", patterns: frozenset[str] = frozenset()) -> QueueSpec:
    """Business events for event triggers: bound to each enabled event automation's pattern."""
    return QueueSpec(f"{prefix}actwheel.planner.events", tuple((topology.events, p) for p in sorted(patterns)))


def router_ready(topology: Topology, prefix: str = "") -> QueueSpec:
    return QueueSpec(f"{prefix}actwheel.router.ready", ((topology.events, RunsReady.TYPE),))


def router_requests(topology: Topology, prefix: str = "") -> QueueSpec:
    return QueueSpec(f"{prefix}actwheel.router.requests", ((topology.commands, ActionRequested.TYPE),))


def auditor_events(topology: Topology, prefix: str = "") -> QueueSpec:
    changes = [(topology.events, f"automation.{c}") for c in AUDITED_CHANGES]
    bindings = ((topology.events, "run.#"), *changes, (topology.events, "action.completed"), (topology.cdc, "#"))
    return QueueSpec(f"{prefix}actwheel.auditor", bindings)


def role_queues(topology: Topology, prefix: str = "") -> list[QueueSpec]:
    """Every role's queue (the planner's event queue without bindings: the planner adds them)."""
    return [planner_due(topology, prefix), planner_commands(topology, prefix), planner_changes(topology, prefix),
            planner_events(topology, prefix), router_ready(topology, prefix), router_requests(topology, prefix),
            auditor_events(topology, prefix)]
