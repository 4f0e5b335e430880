"""The dashboard's pages: each one reads the query string, calls the control plane, renders a template.

Every form works without JavaScript (POST → 303 → GET); htmx only re-fetches fragments when the live
stream says something changed. Filters are the service's, in SQL (:mod:`actwheel.ui.filters`); a bulk
change is one call of :class:`~actwheel.service.operations.OperationsService` with its dry run first.
Cluster-wide panels need ``admin:read`` and say so to anyone else; nothing here is a silent no-op.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote_plus

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from actwheel.api.errors import error_response
from actwheel.api.guard import SESSION_COOKIE, Handler, caller_of
from actwheel.errors import ActwheelError, Conflict, InvalidInput, NotAvailable, NotFound, Unauthenticated
from actwheel.service import Caller, ControlPlane
from actwheel.service.authorize import ADMIN_READ
from actwheel.service.runs import READ as RUN_READ
from actwheel.service.runs import run_cursor
from actwheel.storage.records import AutomationHistoryEntry, AutomationStatus, Origin, Run, RunStatus
from actwheel.triggers import parse
from actwheel.ui.filters import AutomationFilter, RunFilter
from actwheel.ui.render import page, redirect, secure_headers, static_file
from actwheel.ui.run_view import steps_of, timeline

__all__ = ["Pages", "html_errors", "ui_routes"]

LOGIN_COOKIE = "aw_login"
_AUTOMATION_PAGE = 200
_RUN_PAGE = 50
_HISTORY_PAGE = 50
_NAMED = 20
_ATTENTION = (RunStatus.UNKNOWN, RunStatus.DEAD, RunStatus.FAILED)
_OUTCOMES = ("happened", "did_not_happen")
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
        """Run numbers from the database over the stats service's default window (a day is slow at a
        million runs), cluster-wide for ``admin:read``, else the caller's own."""
        caller = caller_of(request)
        stats = await self._c.stats.stats(caller)
        cluster = stats.scope == "cluster"
        instances = (await self._c.stats.system(caller)).instances if cluster else []
        rates = [("last 5 min", stats.runs_per_minute["last_5m"]), ("last 60 min", stats.runs_per_minute["last_60m"])]
        return page(request, "overview.html", stats=stats, cluster=cluster, instances=instances,
                    actors=self._c.status.actor_states(), rate_chart=_bars(rates, "{:.1f}/min"),
                    status_chart=_bars(list(stats.by_status.items()), "{:.0f}"),
                    lateness=[("Fire (created − scheduled)", stats.fire_lateness_s),
                              ("Start (started − scheduled)", stats.start_lateness_s)],
                    window_min=round(stats.window_s / 60), owner_q="&owner=*" if cluster else "")

    async def system(self, request: Request) -> Response:
        caller = caller_of(request)
        report = await self._c.stats.system(caller) if _admin(caller) else None
        return page(request, "system.html", actors=self._c.status.actor_states(), settings=self._c.settings,
                    streams=self._c.stream.clients, stream_cap=self._c.stream.max_clients, report=report,
                    local=report.this_instance if report else {}, ranges=_ranges, now=self._c.clock.now())

    # --- automations ---------------------------------------------------------------------

    async def automations(self, request: Request) -> Response:
        caller, q = caller_of(request), request.query_params
        flt = AutomationFilter.of(q)
        after = str(q.get("after") or "") or None
        found = await self._c.automations.query(caller, **flt.query_kwargs(), after_id=after,
                                                limit=_AUTOMATION_PAGE + 1)
        shown = found[:_AUTOMATION_PAGE]
        last = await self._latest_runs(caller, [a.id for a in shown])
        rows = [(a, describe(a.trigger), a.next_run_at, (last or {}).get(a.id)) for a in shown]
        more = found[_AUTOMATION_PAGE - 1].id if len(found) > _AUTOMATION_PAGE else None
        types = sorted(d.type for d in self._c.actions.types(caller))
        return page(request, "automations.html", rows=rows, flt=flt, types=types, now=self._c.clock.now(),
                    statuses=[s.value for s in AutomationStatus], notice=q.get("notice", ""), more=more,
                    after=after, runs_shown=last is not None)

    async def _latest_runs(self, caller: Caller, automation_ids: list[str]) -> dict[str, Run] | None:
        """The last run of each listed automation, in one query; None (no column) for a key without
        ``run:read``, which may list automations but not read their runs."""
        if not caller.holds(RUN_READ):
            return None
        return await self._c.runs.latest_of(caller, automation_ids)

    async def bulk(self, request: Request) -> Response:
        """Bulk enable, disable or delete, by selection or by filter, through
        :meth:`OperationsService.bulk_automations`: the first POST is its dry run (the count, and every
        refusal with its reason), the second, with ``confirm=yes``, does it."""
        caller, form = caller_of(request), await request.form()
        op = str(form.get("op") or "")
        flt = AutomationFilter.of(form)
        scope = "filter" if form.get("scope") == "filter" else "selection"
        ids = None if scope == "filter" else [str(v) for v in form.getlist("ids")]
        confirm = form.get("confirm") == "yes"
        result = await self._c.operations.bulk_automations(
            caller, op, ids=ids, filter=flt.bulk_filter() if scope == "filter" else None, dry_run=not confirm,
            note=_optional(form, "note"))
        if not confirm:
            names = {i: await self._name(caller, i) for i in result.ids[:_NAMED]}
            return page(request, "bulk_confirm.html", op=op, result=result, names=names, flt=flt, scope=scope,
                        refused=[i for i in result.items if i.status != "would_apply"])
        notice = _notice(f"{op}d", result.count, sum(1 for i in result.items if i.status != "applied"),
                         result.truncated)
        return redirect(_with_query("/ui/automations", flt.query(), notice))

    async def _name(self, caller: Caller, automation_id: str) -> str:
        try:
            return (await self._c.automations.get(caller, automation_id)).name
        except NotFound:
            return "(gone)"

    async def automation(self, request: Request, *, status: int = 200, **extra: Any) -> Response:
        caller = caller_of(request)
        a = await self._c.automations.get(caller, request.path_params["id"])
        fires = self._c.triggers.preview(caller, a.trigger, count=10)
        runs = await self._c.runs.query(caller, automation_id=a.id, limit=30)
        after = str(request.query_params.get("history_after") or "")
        history = await self._history(caller, a.id, int(after) if after.isdigit() else None)
        extra.setdefault("draft", None)
        return page(request, "automation.html", status, a=a, described=describe(a.trigger), fires=fires,
                    runs=runs, now=self._c.clock.now(), history=[_change(e) for e in history],
                    history_more=history[-1].seq if len(history) == _HISTORY_PAGE else None, **extra)

    async def _history(self, caller: Caller, automation_id: str, after: int | None) -> list[AutomationHistoryEntry]:
        """Oldest first; a transient (``tr_``) automation has none, nor one stored before migration 0008."""
        try:
            return await self._c.history.history(caller, automation_id, after_seq=after, limit=_HISTORY_PAGE)
        except NotFound:
            return []

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

    async def _runs(self, request: Request) -> tuple[RunFilter, list[Run], str | None]:
        """One page of runs, newest first, filtered by the service in SQL; and the cursor of the next."""
        flt = RunFilter.of(request.query_params)
        before = str(request.query_params.get("before") or "") or None
        found = await self._c.runs.query(caller_of(request), **flt.query_kwargs(), before=before,
                                         limit=_RUN_PAGE + 1)
        return flt, found[:_RUN_PAGE], run_cursor(found[_RUN_PAGE - 1]) if len(found) > _RUN_PAGE else None

    async def runs(self, request: Request) -> Response:
        flt, found, older = await self._runs(request)
        before = request.query_params.get("before", "")
        rows_query = flt.query() + (f"&before={before}" if before else "")
        return page(request, "runs.html", flt=flt, runs=found, statuses=[s.value for s in RunStatus],
                    origins=[o.value for o in Origin], now=self._c.clock.now(), older=older, before=before,
                    rows_query=rows_query.lstrip("&"), admin=_admin(caller_of(request)),
                    notice=request.query_params.get("notice", ""))

    async def run_rows(self, request: Request) -> Response:
        """The runs table's body alone: what the live stream makes the page re-fetch."""
        _, found, _ = await self._runs(request)
        return page(request, "_run_rows.html", runs=found, now=self._c.clock.now())

    async def run(self, request: Request, *, status: int = 200, error: str = "") -> Response:
        found = await self._c.runs.get(caller_of(request), request.path_params["id"])
        run = found.run
        raw = masked({k: getattr(run, k) for k in run.__dataclass_fields__})
        return page(request, "run.html", status, run=run, trail=timeline(run, found.audit),
                    steps=steps_of(run, raw["result"]), outcome=raw["error"] or raw["result"], raw=raw,
                    error=error, config=raw["action_config"], context=raw["context"], now=self._c.clock.now(),
                    notice=request.query_params.get("notice", ""),
                    retry_of=run.dedupe_key.removeprefix("retry:") if run.dedupe_key.startswith("retry:") else None)

    async def cancel(self, request: Request) -> Response:
        form = await request.form()
        run_id = request.path_params["id"]
        try:
            await self._c.operations.cancel_run(caller_of(request), run_id, note=_optional(form, "note"))
        except (Conflict, InvalidInput) as exc:
            return await self.run(request, status=error_response(exc).status_code, error=str(exc))
        return redirect(f"/ui/runs/{run_id}?notice=canceled")

    async def bulk_cancel(self, request: Request) -> Response:
        """Cancel the waiting runs matching the runs filter: the first POST is the dry run's count, the
        second (``confirm=yes``) cancels, each run as a single cancel would (audited, one event each)."""
        caller, form = caller_of(request), await request.form()
        flt = RunFilter.of(form)
        confirm = form.get("confirm") == "yes"
        result = await self._c.operations.bulk_cancel_runs(caller, filter=flt.cancel_filter(), dry_run=not confirm,
                                                           note=_optional(form, "note"))
        if not confirm:
            return page(request, "cancel_confirm.html", result=result, flt=flt,
                        statuses=flt.cancel_filter()["statuses"],
                        refused=[i for i in result.items if i.status != "would_apply"])
        notice = _notice("canceled", result.count, sum(1 for i in result.items if i.status != "applied"),
                         result.truncated)
        return redirect(_with_query("/ui/runs", flt.query(), notice))

    async def resolve(self, request: Request) -> Response:
        """An operator's verdict on an UNKNOWN run; the note is required (the service refuses without one,
        and the page shows why, keeping the run as it was)."""
        form = await request.form()
        run_id, outcome = request.path_params["id"], str(form.get("outcome") or "")
        try:
            resolved = await self._c.operations.resolve_run(caller_of(request), run_id, outcome,
                                                             _optional(form, "note"))
        except (Conflict, InvalidInput) as exc:
            return await self.run(request, status=error_response(exc).status_code, error=str(exc))
        return redirect(f"/ui/runs/{run_id}?notice=resolved+as+{resolved.status.value}")

    async def retry(self, request: Request) -> Response:
        run_id = request.path_params["id"]
        try:
            inserted = await self._c.operations.retry_run(caller_of(request), run_id)
        except Conflict as exc:
            return await self.run(request, status=409, error=str(exc))
        notice = "retry+created" if inserted.created else "already+retried:+this+is+its+retry"
        return redirect(f"/ui/runs/{inserted.run.id}?notice={notice}")

    async def attention(self, request: Request) -> Response:
        """UNKNOWN, DEAD and FAILED runs (every owner's for ``admin:read``) and, for admins, the dead letters."""
        caller = caller_of(request)
        admin = _admin(caller)
        groups = {s.value: await self._c.runs.query(caller, status=s, limit=50, any_owner=admin) for s in _ATTENTION}
        letters = await self._c.operations.dead_letters(caller, limit=100) if admin else None
        return page(request, "attention.html", groups=groups, admin=admin,
                    letters=None if letters is None else [(d, masked(d.payload)) for d in letters],
                    now=self._c.clock.now(), notice=request.query_params.get("notice", ""))

    async def dead_letter(self, request: Request) -> Response:
        """Discard a dead letter, or requeue it (a run letter becomes a retry run, an outbox one is
        published again); any other source is refused by the service with its reason."""
        caller, form = caller_of(request), await request.form()
        letter_id, op = request.path_params["id"], str(form.get("op") or "")
        if op == "discard":
            await self._c.operations.discard_dead_letter(caller, letter_id)
            return redirect("/ui/attention?notice=dead+letter+discarded")
        if op != "requeue":
            raise InvalidInput("op", op, "discard or requeue")
        requeued = await self._c.operations.requeue_dead_letter(caller, letter_id)
        if requeued.run is not None:
            return redirect(f"/ui/runs/{requeued.run.id}?notice=requeued+as+a+retry")
        return redirect("/ui/attention?notice=dead+letter+requeued:+the+outbox+publishes+it+again")


def _admin(caller: Caller) -> bool:
    """Cluster-wide panels: ``admin:read`` and not an agent-bound key (the stats service's own rule)."""
    return caller.holds(ADMIN_READ) and caller.agent_id is None


def _optional(form: FormData, name: str) -> str | None:
    value = str(form.get(name) or "").strip()
    return value or None


def _notice(done: str, count: int, refused: int, truncated: bool) -> str:
    text = f"{done} {count}"
    if refused:
        text += f", {refused} refused"
    if truncated:
        text += " (the filter matched more than one call takes: repeat for the rest)"
    return text


def _with_query(path: str, query: str, notice: str) -> str:
    return f"{path}?{query}&notice={quote_plus(notice)}" if query else f"{path}?notice={quote_plus(notice)}"


def _change(entry: AutomationHistoryEntry) -> dict[str, Any]:
    """One history entry as rows of field, before, after (masked like every snapshot)."""
    before, after = masked(entry.before or {}), masked(entry.after or {})
    fields = [k for k in (*before, *after) if k != "version"]
    rows = [(k, before.get(k), after.get(k), k in before, k in after) for k in dict.fromkeys(fields)]
    return {"entry": entry, "rows": rows, "version": (entry.after or entry.before or {}).get("version")}


def _ranges(numbers: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` → ``"0–2, 5, 7–8"``."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def _bars(items: list[tuple[str, float]], fmt: str) -> list[dict[str, Any]]:
    """Bars for an inline SVG chart (the table beside it holds the same numbers)."""
    top = max((v for _, v in items), default=0) or 1
    return [{"label": name, "value": fmt.format(v), "width": round(300 * v / top), "y": 24 * i,
             "css": name.lower().replace(" ", "-")} for i, (name, v) in enumerate(items)]


def _back(request: Request, default: str) -> str:
    """Where a per-row form returns to: its own ``back`` field if it is a dashboard path."""
    back = request.query_params.get("back", "")
    return back if back.startswith("/ui/") and "//" not in back else default


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
