"""The ``once`` trigger (placeholder: being built)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actwheel.errors import NotAvailable
from actwheel.triggers.base import Trigger

__all__ = ["OnceTrigger"]


class OnceTrigger(Trigger):
    type = "once"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Trigger:
        raise NotAvailable("trigger type 'once'")
