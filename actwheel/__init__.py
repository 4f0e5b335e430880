"""actwheel — a scheduling and action-execution engine.

When (once, cron, repeat with calendars, event) and what (ontology changes,
functions, webhooks, notifications, sagas): each scheduled instant fires
exactly once and runs through one audited pipeline.
"""

from __future__ import annotations

from actwheel.clock import Clock, SystemClock, VirtualClock
from actwheel.errors import (
    ActwheelError,
    Conflict,
    InvalidInput,
    InvalidTrigger,
    NotAvailable,
    NotFound,
)

__all__ = [
    "ActwheelError",
    "Clock",
    "Conflict",
    "InvalidInput",
    "InvalidTrigger",
    "NotAvailable",
    "NotFound",
    "SystemClock",
    "VirtualClock",
    "__version__",
]

__version__ = "0.1.0"
