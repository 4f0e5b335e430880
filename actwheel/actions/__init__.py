"""Actions: the registry, the executor port and the built-in executors.

The dispatch pipeline (``actwheel.actions.pipeline``) resolves a type through an
:class:`ActionRegistry`, validates, and calls an :class:`ActionDefinition` with an
:class:`ActionContext`; executors return an :class:`ActionResult`.
"""

from __future__ import annotations

from actwheel.actions.base import (
    ActionContext,
    ActionDefinition,
    ActionResult,
    Capabilities,
    Idempotency,
    StepEvent,
    execute_with_deadline,
)
from actwheel.actions.defaults import default_registry
from actwheel.actions.registry import ActionRegistry
from actwheel.errors import DuplicateActionType

__all__ = [
    "ActionContext",
    "ActionDefinition",
    "ActionRegistry",
    "ActionResult",
    "Capabilities",
    "DuplicateActionType",
    "Idempotency",
    "StepEvent",
    "default_registry",
    "execute_with_deadline",
]
