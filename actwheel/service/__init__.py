"""The application layer: the use cases every face calls, with the caller who asks.

- :mod:`~actwheel.service.control` — :class:`ControlPlane`, the one typed seam of the faces
- :mod:`~actwheel.service.automations` — create, change, enable, disable, delete, run now
- :mod:`~actwheel.service.transient` — the same for ``durable: false`` automations
- :mod:`~actwheel.service.payload` — an automation payload parsed into a spec, every error at once
- :mod:`~actwheel.service.runs`, :mod:`~actwheel.service.actions`, :mod:`~actwheel.service.ontology` —
  runs and their trails, ad hoc requests and previews, the ontology and secrets
"""

from __future__ import annotations

from actwheel.service.actions import ActionService, TriggerService
from actwheel.service.automations import AutomationService
from actwheel.service.caller import Caller, caller_snapshot
from actwheel.service.control import Authenticates, ControlPlane, EngineStatus
from actwheel.service.identity import KeyService, MintedKey, PrincipalService
from actwheel.service.ontology import OntologyService, SecretService
from actwheel.service.payload import AutomationSpec, SpecParser
from actwheel.service.runs import RunService, RunWithTrail
from actwheel.service.transient import TransientAutomations

__all__ = [
    "ActionService",
    "Authenticates",
    "AutomationService",
    "AutomationSpec",
    "Caller",
    "ControlPlane",
    "EngineStatus",
    "KeyService",
    "MintedKey",
    "OntologyService",
    "PrincipalService",
    "RunService",
    "RunWithTrail",
    "SecretService",
    "SpecParser",
    "TransientAutomations",
    "TriggerService",
    "caller_snapshot",
]
