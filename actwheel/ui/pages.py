"""The dashboard's pages: each one reads the query string, calls the control plane, renders a template.

Every form works without JavaScript (POST → 303 → GET); htmx only re-fetches fragments when the live
stream says something changed. A panel whose service function does not exist yet says "not available
yet", and its action raises :class:`~actwheel.errors.NotAvailable` — never a silent no-op.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData, QueryParams
from starlette.requests import Request
from starlette.responses import Response

from actwheel.api.errors import error_response
from actwheel.api.guard import SESSION_COOKIE, Handler, caller_of
from actwheel.errors import ActwheelError, Conflict, InvalidInput, NotAvailable, Unauthenticated
from actwheel.service import ControlPlane
from actwheel.storage.records import Automation, AutomationStatus, Run, RunStatus
from actwheel.triggers import parse
from actwheel.ui.render import page, redirect, secure_headers, static_file

__all__ = ["Pages", "html_errors", "ui_routes"]

LOGIN_COOKIE = "aw_login"
_LIST_LIMIT = 500
_RUN_PAGE = 50
_ATTENTION = (RunStatus.UNKNOWN, RunStatus.DEAD, RunStatus.FAILED)
_SECRET_WORDS = ("secret", "token", "password", "authorization", "api_key", "apikey", "signing_key")


def ui_routes(control: ControlPlane) -> list[tuple[str, str, Handler]]:
    """Every dashboard route, in matching order (a fixed path before its ``{id}`` sibling)."""
    p = Pages(control)
    return [
        ("GET", "/", p.root), ("GET", "/ui/static/{path:path}", p.static),
        ("GET", "/ui/login", p.login_form), ("POST", "/ui/login", p.login), ("POST", "/ui/logout", p.logout),
        ("GET", "/ui/", p.overview),
        ("GET", "/ui/automations", p.automations), ("POST", "/ui/automations/bulk", p.bulk),
        ("GET", "/ui/automations/{id}", p.automation), ("POST", "/ui/automations/{id}", p.edit),
        ("POST", "/ui/automations/{id}/preview", p.preview),
        ("POST", "/ui/automations/{id}/enable", p.enable), ("POST", "/ui/automations/{id}/disable", p.disable),
        ("GET", "/ui/automations/{id}/run", p.confirm_run), ("POST", "/ui/automations/{id}/run", p.run_now),
        ("GET", "/ui/automations/{id}/delete", p.confirm_delete), ("POST", "/ui/automations/{id}/delete", p.delete),
        ("GET", "/ui/runs", p.runs), ("GET", "/ui/runs/rows", p.run_rows), ("POST", "/ui/runs/cancel", p.bulk_cancel),
        ("GET", "/ui/runs/{id}", p.run), ("POST", "/ui/runs/{id}/cancel", p.cancel),
        ("POST", "/ui/runs/{id}/resolve", p.resolve), ("POST", "/ui/runs/{id}/retry", p.retry),
        ("GET", "/ui/attention", p.attention), ("POST", "/ui/dead-letters/{id}", p.dead_letter),
        ("GET", "/ui/system", p.system),
    ]


@dataclass(frozen=True, slots=True)
class AutomationFilter:
    status: str = ""
    enabled: str = ""
    action_type: str = ""
    label: str = ""
    name: str = ""

    @classmethod
    def of(cls, q: QueryParams | FormData) -> AutomationFilter:
        return cls(**{f: str(q.get(f) or "").strip() for f in ("status", "enabled", "action_type", "label", "name")})

    def matches(self, a: Automation) -> bool:
        if self.enabled and (a.enabled != (self.enabled == "yes")):
            return False
        if self.action_type and a.action_type != self.action_type:
            return False
        if self.name and self.name.lower() not in a.name.lower():
            return False
        return not self.label or _has_label(a, self.label)

    def query(self) -> str:
        return urlencode({f: getattr(self, f) for f in ("status", "enabled", "action_type", "label", "name")
                          if getattr(self, f)})


def _has_label(a: Automation, label: str) -> bool:
    key, sep, value = label.partition("=")
    if not sep:
        return key in a.labels
    return str(a.labels.get(key.strip())) == value.strip()


@dataclass(frozen=True, slots=True)
class RunFilter:
    statuses: tuple[str, ...] = ()
    automation_id: str = ""
    action_type: str = ""
    origin: str = ""
    since: str = ""
    until: str = ""

    @classmethod
    def of(cls, q: QueryParams | FormData) -> RunFilter:
        statuses = tuple(s for s in (str(v) for v in q.getlist("status")) if s in RunStatus.__members__)
        return cls(statuses, *(str(q.get(f) or "").strip() for f in ("automation_id", "action_type", "origin",
                                                                       "since", "until")))

    def matches(self, run: Run) -> bool:
        if self.statuses and run.status.value not in self.statuses:
            return False
        if self.action_type and run.action_type != self.action_type:
            return False
        if self.origin and run.origin.value != self.origin:
            return False
        created = run.created_at.isoformat()
        return (not self.since or created >= _instant_text(self.since)) and (
            not self.until or created < _instant_text(self.until))

    def query(self) -> str:
        pairs = [("status", s) for s in self.statuses]
        pairs += [(f, getattr(self, f)) for f in ("automation_id", "action_type", "origin", "since", "until")
                  if getattr(self, f)]
        return urlencode(pairs)


def _instant_text(value: str) -> str:
    try:
        return datetime.fromisoformat(value).isoformat()
    except ValueError:
        raise InvalidInput("since/until", value, "an ISO-8601 instant, e.g. 2031-03-04T05:06+00:00") from None


def masked(value: Any) -> Any:
    """``value`` with every secret-looking entry replaced: snapshots are shown, secrets never."""
    if isinstance(value, dict):
        return {k: "••••••" if any(w in str(k).lower() for w in _SECRET_WORDS) else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def describe(trigger: Any) -> str:
    try:
        return parse(trigger).describe()
    except ActwheelError as exc:
        return f"(unreadable trigger: {exc})"


def _labels_of(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for i, line in enumerate(t.strip() for t in text.splitlines()):
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"labels[{i}]", line, "one key=value per line")
        labels[key.strip()] = value.strip()
    return labels


def _json_field(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput(name, text[:200], f"JSON ({exc})") from None


class Pages:
    def __init__(self, control: ControlPlane) -> None:
        self._c = control

    # --- sign-in -------------------------------------------------------------------------

    async def root(self, request: Request) -> Response:
        return redirect("/ui/")

    async def static(self, request: Request) -> Response:
        found = static_file(request.path_params["path"])
        return found if found is not None else secure_headers(Response("not found", 404, media_type="text/plain"))

    async def login_form(self, request: Request, *, error: str = "", status: int = 200) -> Response:
        token = secrets.token_urlsafe(24)
        response = page(request, "login.html", status, login_csrf=token, error=error,
                        auth=self._c.settings.auth)
        response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="strict", path="/ui/login",
                            secure=request.url.scheme == "https")
        return response

    async def login(self, request: Request) -> Response:
        form = await request.form()
        sent, expected = form.get("csrf"), request.cookies.get(LOGIN_COOKIE)
        if not expected or not isinstance(sent, str) or not secrets.compare_digest(sent, expected):
            return await self.login_form(request, error="The sign-in form expired; please try again.", status=403)
        try:
            signed = await self._c.sessions.sign_in(str(form.get("api_key") or ""))
        except Unauthenticated:
            return await self.login_form(request, error="That key was not accepted.", status=401)
        response = redirect("/ui/")
        response.set_cookie(SESSION_COOKIE, signed.token, httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https",
                            max_age=int((signed.expires_at - self._c.clock.now()).total_seconds()))
        response.delete_cookie(LOGIN_COOKIE, path="/ui/login")
        return response

    async def logout(self, request: Request) -> Response:
        await self._c.sessions.sign_out(request.cookies.get(SESSION_COOKIE))
        response = redirect("/ui/login")
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    # --- overview, system ----------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        caller = caller_of(request)
        recent = await self._c.runs.query(caller, limit=_LIST_LIMIT)
        counts = Counter(r.status.value for r in recent)
        skipped = Counter(r.reason or "—" for r in recent if r.status is RunStatus.SKIPPED)
        attention = {s.value: counts.get(s.value, 0) for s in _ATTENTION}
        return page(request, "overview.html", counts=sorted(counts.items()), skipped=sorted(skipped.items()),
                    attention=attention, sampled=len(recent), actors=self._c.status.actor_states(),
                    chart=_status_chart(counts))

    async def system(self, request: Request) -> Response:
        return page(request, "system.html", actors=self._c.status.actor_states(), settings=self._c.settings,
                    streams=self._c.stream.clients, stream_cap=self._c.stream.max_clients)

    # --- automations ---------------------------------------------------------------------

    async def _filtered(self, request: Request, flt: AutomationFilter) -> list[Automation]:
        status = AutomationStatus(flt.status) if flt.status in AutomationStatus.__members__ else None
        found = await self._c.automations.query(caller_of(request), status=status, limit=_LIST_LIMIT)
        return [a for a in found if flt.matches(a)]

    async def automations(self, request: Request) -> Response:
        flt = AutomationFilter.of(request.query_params)
        found = await self._filtered(request, flt)
        types = sorted(d.type for d in self._c.actions.types(caller_of(request)))
        now = self._c.clock.now()
        rows = [(a, describe(a.trigger), a.next_run_at) for a in found]
        return page(request, "automations.html", rows=rows, flt=flt, types=types, now=now,
                    statuses=[s.value for s in AutomationStatus], notice=request.query_params.get("notice", ""))

    async def bulk(self, request: Request) -> Response:
        """Bulk enable, disable or delete, by selection or by filter: the first POST shows the count
        (dry run), the second, with ``confirm=yes``, does it."""
        form = await request.form()
        op = str(form.get("op") or "")
        if op not in ("enable", "disable", "delete"):
            raise InvalidInput("op", op, "enable, disable or delete")
        flt = AutomationFilter.of(form)
        selected = [str(v) for v in form.getlist("ids")]
        targets = await self._filtered(request, flt)
        if form.get("scope") != "filter":
            targets = [a for a in targets if a.id in selected] if selected else []
        if form.get("confirm") != "yes":
            return page(request, "bulk_confirm.html", op=op, targets=targets, flt=flt,
                        scope=form.get("scope") or "selection")
        done = await self._apply(request, op, targets)
        return redirect(f"/ui/automations?{flt.query()}&notice={op}d+{done}" if flt.query()
                        else f"/ui/automations?notice={op}d+{done}")

    async def _apply(self, request: Request, op: str, targets: Iterable[Automation]) -> int:
        caller, done = caller_of(request), 0
        for a in targets:
            if op == "delete":
                await self._c.automations.delete(caller, a.id)
            else:
                await self._c.automations.set_enabled(caller, a.id, op == "enable")
            done += 1
        return done

    async def automation(self, request: Request, *, status: int = 200, **extra: Any) -> Response:
        caller = caller_of(request)
        a = await self._c.automations.get(caller, request.path_params["id"])
        fires = self._c.triggers.preview(caller, a.trigger, count=10)
        runs = await self._c.runs.query(caller, automation_id=a.id, limit=30)
        extra.setdefault("draft", None)
        return page(request, "automation.html", status, a=a, described=describe(a.trigger), fires=fires,
                    runs=runs, now=self._c.clock.now(), **extra)

    async def edit(self, request: Request) -> Response:
        form = await request.form()
        draft = {k: str(form.get(k) or "") for k in ("name", "labels", "trigger", "version")}
        try:
            payload = {"name": draft["name"], "labels": _labels_of(draft["labels"]),
                       "trigger": _json_field("trigger", draft["trigger"])}
            version = int(draft["version"]) if draft["version"].isdigit() else -1
            await self._c.automations.update(caller_of(request), request.path_params["id"], payload, version)
        except Conflict:
            return await self.automation(request, status=409, draft=draft, error=(
                "Someone changed this automation since you opened it: your edit was not saved. "
                "Reload to see the current version."))
        except InvalidInput as exc:
            return await self.automation(request, status=422, draft=draft, error=str(exc))
        return redirect(f"/ui/automations/{request.path_params['id']}?notice=saved")

    async def preview(self, request: Request) -> Response:
        form = await request.form()
        draft = {k: str(form.get(k) or "") for k in ("name", "labels", "trigger", "version")}
        try:
            fires = self._c.triggers.preview(caller_of(request), _json_field("trigger", draft["trigger"]), count=10)
            return await self.automation(request, draft=draft, draft_fires=fires,
                                         draft_described=describe(json.loads(draft["trigger"])))
        except InvalidInput as exc:
            return await self.automation(request, status=422, draft=draft, error=str(exc))

    async def enable(self, request: Request) -> Response:
        await self._c.automations.set_enabled(caller_of(request), request.path_params["id"], True)
        return redirect(_back(request, "/ui/automations"))

    async def disable(self, request: Request) -> Response:
        await self._c.automations.set_enabled(caller_of(request), request.path_params["id"], False)
        return redirect(_back(request, "/ui/automations"))

    async def confirm_run(self, request: Request) -> Response:
        a = await self._c.automations.get(caller_of(request), request.path_params["id"])
        return page(request, "confirm.html", a=a, what="run", verb="Run now",
                    question=f"Run “{a.name}” now, once, outside its schedule?")

    async def run_now(self, request: Request) -> Response:
        run = await self._c.automations.run_now(caller_of(request), request.path_params["id"])
        return redirect(f"/ui/runs/{run.id}")

    async def confirm_delete(self, request: Request) -> Response:
        a = await self._c.automations.get(caller_of(request), request.path_params["id"])
        return page(request, "confirm.html", a=a, what="delete", verb="Delete",
                    question=f"Delete “{a.name}”? Its waiting runs are canceled; this cannot be undone.")

    async def delete(self, request: Request) -> Response:
        await self._c.automations.delete(caller_of(request), request.path_params["id"])
        return redirect("/ui/automations?notice=deleted+1")

    # --- runs ----------------------------------------------------------------------------

    async def _runs(self, request: Request) -> tuple[RunFilter, list[Run]]:
        flt = RunFilter.of(request.query_params)
        single = RunStatus(flt.statuses[0]) if len(flt.statuses) == 1 else None
        found = await self._c.runs.query(caller_of(request), automation_id=flt.automation_id or None,
                                         status=single, limit=_LIST_LIMIT)
        return flt, [r for r in found if flt.matches(r)][:_RUN_PAGE]

    async def runs(self, request: Request) -> Response:
        flt, found = await self._runs(request)
        return page(request, "runs.html", flt=flt, runs=found, statuses=[s.value for s in RunStatus],
                    origins=[o.value for o in type(found[0].origin)] if found else
                    ["schedule", "manual", "event", "request", "retry"], now=self._c.clock.now())

    async def run_rows(self, request: Request) -> Response:
        """The runs table's body alone: what the live stream makes the page re-fetch."""
        _, found = await self._runs(request)
        return page(request, "_run_rows.html", runs=found, now=self._c.clock.now())

    async def run(self, request: Request) -> Response:
        found = await self._c.runs.get(caller_of(request), request.path_params["id"])
        run = found.run
        base = run.scheduled_for or run.created_at
        trail = [(e, (e.occurred_at - base).total_seconds()) for e in found.audit]
        steps = [e for e in found.audit if e.phase.startswith("step")]
        raw = masked({k: getattr(run, k) for k in run.__dataclass_fields__})
        return page(request, "run.html", run=run, trail=trail, steps=steps, raw=raw,
                    config=masked(run.action_config), context=masked(run.context), now=self._c.clock.now())

    async def cancel(self, request: Request) -> Response:
        raise NotAvailable("run.cancel", "canceling a single run lands with the run operations service")

    async def bulk_cancel(self, request: Request) -> Response:
        raise NotAvailable("runs.bulk_cancel", "bulk cancel lands with the run operations service")

    async def resolve(self, request: Request) -> Response:
        raise NotAvailable("run.resolve", "resolving an UNKNOWN run lands with the run operations service")

    async def retry(self, request: Request) -> Response:
        raise NotAvailable("run.retry", "retrying a run lands with the run operations service")

    async def attention(self, request: Request) -> Response:
        caller = caller_of(request)
        groups = {s.value: await self._c.runs.query(caller, status=s, limit=50) for s in _ATTENTION}
        return page(request, "attention.html", groups=groups, now=self._c.clock.now())

    async def dead_letter(self, request: Request) -> Response:
        raise NotAvailable("dead_letters", "discarding or requeueing a dead letter lands with the operations service")


def _back(request: Request, default: str) -> str:
    """Where a per-row form returns to: its own ``back`` field if it is a dashboard path."""
    back = request.query_params.get("back", "")
    return back if back.startswith("/ui/") and "//" not in back else default


def _status_chart(counts: Counter[str]) -> list[dict[str, Any]]:
    """Bars for the inline SVG chart (the table beside it holds the same numbers)."""
    top = max(counts.values(), default=0) or 1
    return [{"status": s, "count": n, "width": round(300 * n / top), "y": 24 * i}
            for i, (s, n) in enumerate(sorted(counts.items()))]



def html_errors(endpoint: Handler) -> Handler:
    """``endpoint`` with every actwheel error rendered as a page (same status as the JSON API's)."""

    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ActwheelError as exc:
            status = error_response(exc).status_code
            return page(request, "error.html", status, error=exc, code=status,
                        not_available=isinstance(exc, NotAvailable))

    return wrapped
