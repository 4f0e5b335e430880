"""The dashboard's filters: what a query string (or a bulk form) asks for, as the service's keywords.

Every filter is done by the service in SQL (:meth:`RunService.query`, :meth:`AutomationService.query`,
:meth:`OperationsService.bulk_automations` / ``bulk_cancel_runs``), never by page code over a sample
of rows; these classes only read the form fields, refuse bad ones naming the field, and write them
back into links (a filtered view is a link you can share).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData, QueryParams

from actwheel.errors import InvalidInput
from actwheel.storage.records import AutomationStatus, Origin, RunStatus

__all__ = ["AUTOMATION_FIELDS", "RUN_FIELDS", "AutomationFilter", "RunFilter", "labels_filter"]

Fields = QueryParams | FormData

#: The automation filter's form fields (also the hidden fields a bulk form carries along).
AUTOMATION_FIELDS = ("status", "enabled", "action_type", "label", "name")
#: The run filter's single-valued form fields (``status`` is repeated, one per checked box).
RUN_FIELDS = ("automation_id", "action_type", "origin", "since", "until", "owner")
_WAITING = (RunStatus.PENDING.value, RunStatus.RETRY_WAIT.value)


def _text(q: Fields, name: str) -> str:
    return str(q.get(name) or "").strip()


def labels_filter(text: str) -> dict[str, str]:
    """``"team=ops, tier=1"`` → ``{"team": "ops", "tier": "1"}``.

    :raises InvalidInput: naming ``label``: a part without ``=`` or without a key
    """
    labels: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise InvalidInput("label", text, "key=value (several: comma-separated, e.g. team=ops, tier=1)")
        labels[key.strip()] = value.strip()
    return labels


@dataclass(frozen=True, slots=True)
class AutomationFilter:
    status: str = ""
    enabled: str = ""
    action_type: str = ""
    label: str = ""
    name: str = ""

    @classmethod
    def of(cls, q: Fields) -> AutomationFilter:
        return cls(*(_text(q, f) for f in AUTOMATION_FIELDS))

    def query_kwargs(self) -> dict[str, Any]:
        """The keywords of :meth:`AutomationService.query`.

        :raises InvalidInput: naming ``status``, ``enabled`` or ``label``
        """
        return {"status": self._status(), "enabled": self._enabled(), "action_type": self.action_type or None,
                "name_contains": self.name or None, "labels": labels_filter(self.label) or None}

    def bulk_filter(self) -> dict[str, Any]:
        """The same filter as :meth:`OperationsService.bulk_automations` takes it (only the fields set)."""
        kwargs = self.query_kwargs()
        found = {"status": kwargs["status"], "enabled": kwargs["enabled"], "action_type": kwargs["action_type"],
                 "q": kwargs["name_contains"], "labels": kwargs["labels"]}
        return {k: (v.value if isinstance(v, AutomationStatus) else v) for k, v in found.items() if v is not None}

    def query(self) -> str:
        return urlencode({f: getattr(self, f) for f in AUTOMATION_FIELDS if getattr(self, f)})

    def _status(self) -> AutomationStatus | None:
        if not self.status:
            return None
        if self.status not in AutomationStatus.__members__:
            raise InvalidInput("status", self.status, "one of " + ", ".join(AutomationStatus.__members__))
        return AutomationStatus(self.status)

    def _enabled(self) -> bool | None:
        if self.enabled not in ("", "yes", "no"):
            raise InvalidInput("enabled", self.enabled, "yes or no")
        return None if not self.enabled else self.enabled == "yes"


@dataclass(frozen=True, slots=True)
class RunFilter:
    statuses: tuple[str, ...] = ()
    automation_id: str = ""
    action_type: str = ""
    origin: str = ""
    since: str = ""
    until: str = ""
    #: ``*``: every owner's runs (``admin:read``); empty: the caller's own
    owner: str = ""

    @classmethod
    def of(cls, q: Fields) -> RunFilter:
        statuses = tuple(dict.fromkeys(str(v) for v in q.getlist("status") if str(v)))
        return cls(statuses, *(_text(q, f) for f in RUN_FIELDS))

    def query_kwargs(self) -> dict[str, Any]:
        """The keywords of :meth:`RunService.query` (without ``before`` and ``limit``).

        :raises InvalidInput: naming ``status``, ``origin``, ``since``, ``until`` or ``owner``
        """
        if self.owner not in ("", "*"):
            raise InvalidInput("owner", self.owner, "empty (your runs) or * (every owner's, admin:read)")
        return {"statuses": [self._status(s) for s in self.statuses] or None,
                "automation_id": self.automation_id or None, "action_type": self.action_type or None,
                "origin": self._origin(), "created_after": _instant("since", self.since),
                "created_before": _instant("until", self.until), "any_owner": self.owner == "*"}

    def cancel_filter(self) -> dict[str, Any]:
        """The filter of :meth:`OperationsService.bulk_cancel_runs`: the waiting statuses among those
        asked for (both when none is), everything else as given.

        :raises InvalidInput: naming ``owner``: bulk cancel acts on the caller's own runs only
        """
        if self.owner:
            raise InvalidInput("owner", self.owner, "your own runs: bulk cancel acts on the caller's runs "
                               "(clear “every owner” first)")
        kwargs = self.query_kwargs()
        asked = [s for s in self.statuses if s in _WAITING] if self.statuses else list(_WAITING)
        found: dict[str, Any] = {"statuses": asked or list(self.statuses),
                                 "automation_id": kwargs["automation_id"], "action_type": kwargs["action_type"],
                                 "origin": None if kwargs["origin"] is None else kwargs["origin"].value}
        for key in ("created_after", "created_before"):
            found[key] = None if kwargs[key] is None else kwargs[key].isoformat()
        return {k: v for k, v in found.items() if v is not None}

    def pairs(self) -> list[tuple[str, str]]:
        return [("status", s) for s in self.statuses] + [(f, getattr(self, f)) for f in RUN_FIELDS if getattr(self, f)]

    def query(self) -> str:
        return urlencode(self.pairs())

    @staticmethod
    def _status(value: str) -> RunStatus:
        if value not in RunStatus.__members__:
            raise InvalidInput("status", value, "one of " + ", ".join(RunStatus.__members__))
        return RunStatus(value)

    def _origin(self) -> Origin | None:
        if not self.origin:
            return None
        try:
            return Origin(self.origin)
        except ValueError:
            raise InvalidInput("origin", self.origin, "one of " + ", ".join(o.value for o in Origin)) from None


def _instant(name: str, value: str) -> datetime | None:
    """An ISO-8601 instant; one without an offset is read as UTC (what the form says)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(name, value, "an ISO-8601 instant, e.g. 2031-03-04T05:06+00:00 (UTC without an offset)"
                           ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
