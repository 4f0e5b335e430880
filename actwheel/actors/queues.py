"""The consuming queue of every role, in one place.

Every instance declares all of them at start, whatever roles it runs, so that a
message published before its consumer ever started (``--actors ticker`` on one
host, planners on another) waits in its queue instead of being unroutable.
Declaring is idempotent on the broker.
"""

from __future__ import annotations

from actwheel.bus.topology import QueueSpec, Topology
from actwheel.messages import ActionRequested, AutomationsDue, RunsReady

__all__ = ["AUTOMATION_CHANGES", "auditor_events", "automation_changes", "planner_changes", "planner_commands",
           "planner_due", "planner_due_quiet", "planner_events", "role_queues", "router_ready", "router_ready_quiet",
           "router_requests"]

#: Every ``automation.<change>`` routing key's change: what the auditor records, the tickers apply to their
#: wheels and the planners to their event index.
AUTOMATION_CHANGES = ("created", "updated", "enabled", "disabled", "deleted", "completed")


def planner_due(topology: Topology, prefix: str = "") -> QueueSpec:
    return QueueSpec(f"{prefix}actwheel.planner.due", ((topology.events, AutomationsDue.TYPE),))


def planner_due_quiet(topology: Topology, prefix: str = "") -> QueueSpec:
    """Due announcements of at most QUIET_DUE_ITEMS instants: never behind a burst's held ones."""
    return QueueSpec(f"{prefix}actwheel.planner.due.quiet", ((topology.events, AutomationsDue.QUIET_KEY),))


def planner_commands(topology: Topology, prefix: str = "") -> QueueSpec:
    return QueueSpec(f"{prefix}actwheel.planner.commands", ((topology.commands, "command.#"),))


def planner_changes(topology: Topology, prefix: str = "") -> QueueSpec:
    """Every change: the planner applies each to its event index (a disable or a delete removes a pattern)."""
    return QueueSpec(f"{prefix}actwheel.planner.changes", automation_changes(topology))


def planner_events(topology: Topology, prefix: str = "", patterns: frozenset[str] = frozenset()) -> QueueSpec:
    """Business events for event triggers: bound to each enabled event automation's pattern."""
    return QueueSpec(f"{prefix}actwheel.planner.events", tuple((topology.events, p) for p in sorted(patterns)))


def router_ready(topology: Topology, prefix: str = "") -> QueueSpec:
    return QueueSpec(f"{prefix}actwheel.router.ready", ((topology.events, RunsReady.TYPE),))


def router_ready_quiet(topology: Topology, prefix: str = "") -> QueueSpec:
    """``run.ready`` of at most QUIET_READY_RUNS runs: never behind a burst's deliveries waiting for slots."""
    return QueueSpec(f"{prefix}actwheel.router.ready.quiet", ((topology.events, RunsReady.QUIET_KEY),))


def router_requests(topology: Topology, prefix: str = "") -> QueueSpec:
    return QueueSpec(f"{prefix}actwheel.router.requests", ((topology.commands, ActionRequested.TYPE),))


def auditor_events(topology: Topology, prefix: str = "") -> QueueSpec:
    bindings = ((topology.events, "run.#"), *automation_changes(topology), (topology.events, "action.completed"),
                (topology.cdc, "#"))
    return QueueSpec(f"{prefix}actwheel.auditor", bindings)


def automation_changes(topology: Topology) -> tuple[tuple[str, str], ...]:
    """The bindings of a queue that hears of every automation change."""
    return tuple((topology.events, f"automation.{c}") for c in AUTOMATION_CHANGES)


def role_queues(topology: Topology, prefix: str = "") -> list[QueueSpec]:
    """Every role's queue (the planner's event queue without bindings: the planner adds them)."""
    return [planner_due(topology, prefix), planner_due_quiet(topology, prefix), planner_commands(topology, prefix),
            planner_changes(topology, prefix), planner_events(topology, prefix), router_ready(topology, prefix),
            router_ready_quiet(topology, prefix), router_requests(topology, prefix), auditor_events(topology, prefix)]
