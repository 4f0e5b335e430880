"""The dashboard without a browser: every page renders for its scopes, forms work as plain HTML
(POST → 303 → GET), hostile names are escaped, the CSP is sent, another owner's objects are out of
reach by URL, and a POST without the session's CSRF token is refused."""

from __future__ import annotations

import re

import pytest
from ui_support import UiWorld, automation_body, csrf_in, run_in

from actwheel.api.guard import ROUTE_POLICIES
from actwheel.storage.records import NewDeadLetter, Origin, RunStatus
from actwheel.ui.render import CSP

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


async def test_the_root_and_every_page_without_a_session_send_the_browser_to_sign_in(world: UiWorld) -> None:
    async with world.client() as http:
        root = await http.get("/")
        assert (root.status_code, root.headers["location"]) == (303, "/ui/")
        for path in ("/ui/", "/ui/automations", "/ui/runs", "/ui/attention", "/ui/system", "/ui/automations/x"):
            answer = await http.get(path)
            assert (answer.status_code, answer.headers["location"]) == (303, "/ui/login"), path


async def test_signing_in_sets_a_strict_httponly_cookie_and_signing_out_revokes_it(world: UiWorld) -> None:
    http = world.client()
    form = await http.get("/ui/login")
    answer = await http.post("/ui/login", data={"csrf": csrf_in(form.text), "api_key": world.tokens["alice"]})
    cookie = answer.headers["set-cookie"]
    assert answer.status_code == 303
    assert "aw_session=" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Secure" not in cookie  # plain HTTP here; https:// requests get Secure
    token = http.cookies["aw_session"]
    page = await http.get("/ui/")
    out = await http.post("/ui/logout", data={"csrf": csrf_in(page.text)})
    assert (out.status_code, out.headers["location"]) == (303, "/ui/login")
    async with world.client() as replay:  # the old cookie, replayed, is dead on the server
        replay.cookies.set("aw_session", token)
        assert (await replay.get("/ui/")).status_code == 303
    await http.aclose()


async def test_a_bad_key_or_a_forged_sign_in_form_is_refused(world: UiWorld) -> None:
    async with world.client() as http:
        form = await http.get("/ui/login")
        bad = await http.post("/ui/login", data={"csrf": csrf_in(form.text), "api_key": "awk_nope"})
        forged = await http.post("/ui/login", data={"csrf": "guessed", "api_key": world.tokens["alice"]})
    assert bad.status_code == 401
    assert "not accepted" in bad.text
    assert forged.status_code == 403
    assert "aw_session" not in forged.headers.get("set-cookie", "")


@pytest.mark.parametrize("path", ["/ui/", "/ui/automations", "/ui/runs", "/ui/attention", "/ui/system",
                                  "/ui/login"])
async def test_every_page_renders_with_a_strict_content_security_policy(world: UiWorld, path: str) -> None:
    http, _ = await world.signed_in("alice")
    answer = await http.get(path)
    await http.aclose()
    assert answer.status_code == 200
    assert answer.headers["content-security-policy"] == CSP
    assert "frame-ancestors 'none'" in CSP
    assert "'unsafe-inline'" not in CSP
    assert "<script>" not in answer.text.replace('<script src="/ui/static/', "")
    assert ' style="' not in answer.text
    assert 'name="csrf" value=""' not in answer.text  # every form carries the session's token


async def test_a_hostile_name_and_label_render_escaped_everywhere(world: UiWorld) -> None:
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(
        alice, automation_body(HOSTILE, labels={"team": HOSTILE}))
    http, _ = await world.signed_in("alice")
    for path in ("/ui/automations", f"/ui/automations/{automation.id}", f"/ui/automations/{automation.id}/run"):
        answer = await http.get(path)
        assert answer.status_code == 200, path
        assert HOSTILE not in answer.text, path
        assert "&lt;script&gt;alert(" in answer.text, path
    await http.aclose()


async def test_another_owners_automation_and_run_are_unreachable_by_url(world: UiWorld) -> None:
    bob = world.callers["bob"]
    automation = await world.engine.control.automations.create(bob, automation_body("bobs"))
    run = await world.engine.control.automations.run_now(bob, automation.id)
    http, csrf = await world.signed_in("alice")
    listing = await http.get("/ui/automations")
    assert "bobs" not in listing.text
    for path in (f"/ui/automations/{automation.id}", f"/ui/runs/{run.id}", f"/ui/automations/{automation.id}/run"):
        assert (await http.get(path)).status_code == 404, path
    refused = await http.post(f"/ui/automations/{automation.id}/disable", data={"csrf": csrf})
    assert refused.status_code == 404
    assert (await world.engine.control.automations.get(bob, automation.id)).enabled
    await http.aclose()


async def test_a_post_without_the_sessions_csrf_token_is_refused_and_changes_nothing(world: UiWorld) -> None:
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body())
    http, csrf = await world.signed_in("alice")
    for data in ({}, {"csrf": "forged"}, {"csrf": csrf[:-1]}):
        answer = await http.post(f"/ui/automations/{automation.id}/disable", data=data)
        assert answer.status_code == 403, data
    assert (await world.engine.control.automations.get(alice, automation.id)).enabled
    ok = await http.post(f"/ui/automations/{automation.id}/disable", data={"csrf": csrf})
    assert ok.status_code == 303
    assert not (await world.engine.control.automations.get(alice, automation.id)).enabled
    await http.aclose()


async def test_run_now_asks_first_then_posts_and_lands_on_the_run(world: UiWorld) -> None:
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body())
    http, csrf = await world.signed_in("alice")
    ask = await http.get(f"/ui/automations/{automation.id}/run")
    assert ask.status_code == 200
    assert "Yes, run now" in ask.text
    assert await world.engine.control.runs.query(alice, automation_id=automation.id) == []
    done = await http.post(f"/ui/automations/{automation.id}/run", data={"csrf": csrf})
    assert done.status_code == 303
    assert done.headers["location"].startswith("/ui/runs/")
    detail = await http.get(done.headers["location"])
    assert detail.status_code == 200
    assert "PENDING" in detail.text
    assert "Audit trail" in detail.text
    await http.aclose()


async def test_bulk_disable_by_label_shows_the_dry_run_count_then_disables_only_those(world: UiWorld) -> None:
    alice = world.callers["alice"]
    for i in range(3):
        await world.engine.control.automations.create(alice, automation_body(f"nightly-{i}", labels={"team": "ops"}))
    other = await world.engine.control.automations.create(alice, automation_body("keep", labels={"team": "web"}))
    http, csrf = await world.signed_in("alice")
    form = {"csrf": csrf, "op": "disable", "scope": "filter", "label": "team=ops"}
    dry = await http.post("/ui/automations/bulk", data=form)
    assert dry.status_code == 200
    assert 'data-count="3"' in dry.text
    assert all(a.enabled for a in await world.engine.control.automations.query(alice))
    done = await http.post("/ui/automations/bulk", data={**form, "confirm": "yes"})
    assert done.status_code == 303
    states = {a.name: a.enabled for a in await world.engine.control.automations.query(alice)}
    assert states == {"nightly-0": False, "nightly-1": False, "nightly-2": False, "keep": True}
    assert (await world.engine.control.automations.get(alice, other.id)).enabled
    await http.aclose()


async def test_an_edit_with_a_stale_version_is_a_409_shown_inline_and_a_preview_saves_nothing(
        world: UiWorld) -> None:
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body())
    http, csrf = await world.signed_in("alice")
    trigger = '{"type": "cron", "expression": "0 30 18 ? * MON-FRI", "timezone": "Asia/Shanghai"}'
    form = {"csrf": csrf, "name": "renamed", "labels": "team=ops", "trigger": trigger, "version": "1"}
    preview = await http.post(f"/ui/automations/{automation.id}/preview", data=form)
    assert preview.status_code == 200
    assert "Preview:" in preview.text
    assert "18:30:00+08:00" in preview.text
    assert (await world.engine.control.automations.get(alice, automation.id)).name == "minutely"
    stale = await http.post(f"/ui/automations/{automation.id}", data={**form, "version": "0"})
    assert stale.status_code == 409
    assert "not saved" in stale.text
    assert 'value="renamed"' in stale.text
    saved = await http.post(f"/ui/automations/{automation.id}", data=form)
    assert saved.status_code == 303
    assert (await world.engine.control.automations.get(alice, automation.id)).name == "renamed"
    await http.aclose()


@pytest.mark.parametrize("who", ["alice", "admin"])
async def test_no_page_says_not_available_yet_any_more(world: UiWorld, who: str) -> None:
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body())
    run = await world.engine.control.automations.run_now(alice, automation.id)
    http, _ = await world.signed_in(who)
    paths = ["/ui/", "/ui/automations", "/ui/runs", "/ui/attention", "/ui/system"]
    if who == "alice":
        paths += [f"/ui/automations/{automation.id}", f"/ui/runs/{run.id}"]
    for path in paths:
        answer = await http.get(path)
        assert answer.status_code == 200, path
        assert "not available yet" not in answer.text.lower(), path
    await http.aclose()


async def test_the_overview_shows_the_database_stats_cluster_wide_to_an_admin_only(world: UiWorld) -> None:
    engine = world.engine
    await run_in(engine, "alice", RunStatus.UNKNOWN, key="u")
    await run_in(engine, "alice", RunStatus.SKIPPED, key="s")
    await run_in(engine, "bob", RunStatus.FAILED, key="f")
    await engine.control.stats.beat()
    admin, _ = await world.signed_in("admin")
    cluster = (await admin.get("/ui/")).text
    alice, _ = await world.signed_in("alice")
    own = (await alice.get("/ui/")).text
    await admin.aclose()
    await alice.aclose()
    assert "Cluster-wide" in cluster
    assert re.search(r"UNKNOWN</span>: 1</a>", cluster)
    assert re.search(r"FAILED</span>: 1</a>", cluster)  # bob's, seen by the admin
    assert "Backlog (unpublished rows)" in cluster
    assert "<td>test</td><td>1</td>" in cluster  # SKIPPED by reason
    assert "Every instance's actors" in cluster
    assert "Your runs" in own
    assert re.search(r"FAILED</span>: 0</a>", own)  # bob's run is not alice's
    assert "Backlog (unpublished rows)" not in own
    assert "admin:read" in own


async def test_the_automation_page_shows_who_changed_what_before_and_after(world: UiWorld) -> None:
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body("before-name"))
    http, csrf = await world.signed_in("alice")
    trigger = '{"type": "cron", "expression": "0 30 18 ? * MON-FRI", "timezone": "Asia/Shanghai"}'
    saved = await http.post(f"/ui/automations/{automation.id}", data={
        "csrf": csrf, "name": "after-name", "labels": "", "trigger": trigger, "version": "1"})
    assert saved.status_code == 303
    await http.post(f"/ui/automations/{automation.id}/disable", data={"csrf": csrf})
    detail = (await http.get(f"/ui/automations/{automation.id}")).text
    await http.aclose()
    history = detail[detail.index('id="hist-h"'):]
    assert [m for m in re.findall(r'<h3 id="ch-\d+">(\w+)', history)] == ["created", "updated", "disabled"]
    assert "by <strong>alice</strong>" in history
    updated = history[history.index(">updated"):history.index(">disabled")]
    name_row = '<th scope="row">name</th><td><pre>&#34;before-name&#34;</pre></td><td><pre>&#34;after-name&#34;</pre>'
    assert name_row in updated
    assert '<th scope="row">enabled</th>' not in updated  # only the fields that changed


async def test_runs_are_filtered_by_the_service_and_paged_with_the_older_cursor(world: UiWorld) -> None:
    engine = world.engine
    for i in range(55):
        await run_in(engine, "alice", RunStatus.PENDING, key=f"p{i}")
    failed = await run_in(engine, "alice", RunStatus.FAILED, key="f")
    unknown = await run_in(engine, "alice", RunStatus.UNKNOWN, key="u")
    manual = await run_in(engine, "alice", RunStatus.SUCCEEDED, key="m", origin=Origin.MANUAL)
    http, _ = await world.signed_in("alice")
    several = (await http.get("/ui/runs", params=[("status", "FAILED"), ("status", "UNKNOWN")])).text
    assert set(re.findall(r'href="/ui/runs/([^"?]+)"', several)) == {failed.id, unknown.id}
    by_origin = (await http.get("/ui/runs", params={"origin": "manual"})).text
    assert set(re.findall(r'href="/ui/runs/([^"?]+)"', by_origin)) == {manual.id}
    future = (await http.get("/ui/runs", params={"since": "2999-01-01T00:00"})).text
    assert "No run matches." in future
    first = (await http.get("/ui/runs", params={"status": "PENDING"})).text
    older = re.search(r'href="(/ui/runs\?[^"]*before=[^"]+)" rel="next">Older', first)
    assert older, "no Older link"
    second = (await http.get(older.group(1).replace("&amp;", "&"))).text
    await http.aclose()
    page_one = re.findall(r'href="/ui/runs/([^"?]+)"><code>', first)
    page_two = re.findall(r'href="/ui/runs/([^"?]+)"><code>', second)
    assert (len(page_one), len(page_two)) == (50, 5)
    assert not set(page_one) & set(page_two)
    assert 'rel="next">Older' not in second
    assert ">Newest</a>" in second
    bad = await world.signed_in("alice")
    refused = await bad[0].get("/ui/runs", params={"since": "yesterday"})
    await bad[0].aclose()
    assert refused.status_code == 422
    assert "since" in refused.text


async def test_resolving_an_unknown_run_needs_a_note_and_is_audited(world: UiWorld) -> None:
    run = await run_in(world.engine, "alice", RunStatus.UNKNOWN)
    http, csrf = await world.signed_in("alice")
    path = f"/ui/runs/{run.id}/resolve"
    no_note = await http.post(path, data={"csrf": csrf, "outcome": "happened", "note": "  "})
    assert no_note.status_code == 422
    assert 'role="alert"' in no_note.text
    assert "note" in no_note.text
    assert (await world.engine.control.runs.get(world.callers["alice"], run.id)).run.status is RunStatus.UNKNOWN
    done = await http.post(path, data={"csrf": csrf, "outcome": "did_not_happen", "note": "no row in the ledger"})
    assert (done.status_code, done.headers["location"]) == (303, f"/ui/runs/{run.id}?notice=resolved+as+FAILED")
    again = await http.post(path, data={"csrf": csrf, "outcome": "happened", "note": "late"})
    assert again.status_code == 409
    detail = (await http.get(f"/ui/runs/{run.id}")).text
    await http.aclose()
    found = await world.engine.control.runs.get(world.callers["alice"], run.id)
    assert (found.run.status, found.run.reason) == (RunStatus.FAILED, "resolved_manually")
    assert [e.details["note"] for e in found.audit if e.phase == "MANUAL_RESOLVE"] == ["no row in the ledger"]
    assert "no row in the ledger" in detail


async def test_cancel_one_run_and_retry_a_failed_one_from_its_page(world: UiWorld) -> None:
    alice = world.callers["alice"]
    waiting = await run_in(world.engine, "alice", RunStatus.PENDING, key="w")
    failed = await run_in(world.engine, "alice", RunStatus.FAILED, key="f")
    http, csrf = await world.signed_in("alice")
    canceled = await http.post(f"/ui/runs/{waiting.id}/cancel", data={"csrf": csrf, "note": "not today"})
    assert canceled.status_code == 303
    assert "Cancel this run" not in (await http.get(canceled.headers["location"])).text
    twice = await http.post(f"/ui/runs/{waiting.id}/cancel", data={"csrf": csrf})
    assert twice.status_code == 409
    retried = await http.post(f"/ui/runs/{failed.id}/retry", data={"csrf": csrf})
    assert retried.status_code == 303
    new_id = retried.headers["location"].split("/ui/runs/")[1].split("?")[0]
    repeat = await http.post(f"/ui/runs/{failed.id}/retry", data={"csrf": csrf})
    assert repeat.headers["location"].startswith(f"/ui/runs/{new_id}?")  # a run is retried once
    retry_page = (await http.get(f"/ui/runs/{new_id}")).text
    await http.aclose()
    assert f'a retry of <a href="/ui/runs/{failed.id}">' in retry_page
    assert (await world.engine.control.runs.get(alice, waiting.id)).run.status is RunStatus.CANCELED
    new = (await world.engine.control.runs.get(alice, new_id)).run
    assert (new.status, new.origin, new.dedupe_key) == (RunStatus.PENDING, Origin.MANUAL, f"retry:{failed.id}")


async def test_bulk_cancel_by_filter_counts_first_then_cancels_only_the_waiting_ones(world: UiWorld) -> None:
    alice = world.callers["alice"]
    ops = await world.engine.control.automations.create(alice, automation_body("ops"))
    mine = [await run_in(world.engine, "alice", RunStatus.PENDING, key=f"a{i}", automation_id=ops.id)
            for i in range(3)]
    other = await run_in(world.engine, "alice", RunStatus.PENDING, key="other")
    done = await run_in(world.engine, "alice", RunStatus.SUCCEEDED, key="done", automation_id=ops.id)
    bobs = await run_in(world.engine, "bob", RunStatus.PENDING, key="b", automation_id=ops.id)
    http, csrf = await world.signed_in("alice")
    form = {"csrf": csrf, "automation_id": ops.id}
    dry = await http.post("/ui/runs/cancel", data=form)
    assert dry.status_code == 200
    assert 'data-count="3"' in dry.text
    statuses = {r.id: r.status for r in await world.engine.control.runs.query(alice, limit=100)}
    assert RunStatus.CANCELED not in statuses.values()
    applied = await http.post("/ui/runs/cancel", data={**form, "confirm": "yes", "note": "cleanup"})
    await http.aclose()
    assert applied.status_code == 303
    assert "notice=canceled+3" in applied.headers["location"]
    after = {r.id: r.status for r in await world.engine.control.runs.query(alice, limit=100)}
    assert {after[r.id] for r in mine} == {RunStatus.CANCELED}
    assert (after[other.id], after[done.id]) == (RunStatus.PENDING, RunStatus.SUCCEEDED)
    assert (await world.engine.control.runs.get(world.callers["bob"], bobs.id)).run.status is RunStatus.PENDING


async def test_bulk_by_filter_goes_through_the_service_and_names_what_it_would_refuse(world: UiWorld) -> None:
    alice = world.callers["alice"]
    for i in range(2):
        await world.engine.control.automations.create(alice, automation_body(f"x-{i}", labels={"team": "ops"}))
    http, csrf = await world.signed_in("alice")
    bare = await http.post("/ui/automations/bulk", data={"csrf": csrf, "op": "disable", "scope": "filter",
                                                         "label": "team"})
    assert bare.status_code == 422  # a label filter is key=value: never "every automation"
    nothing = await http.post("/ui/automations/bulk", data={"csrf": csrf, "op": "delete", "scope": "selection"})
    assert 'data-count="0"' in nothing.text
    assert "disabled" in nothing.text  # the confirm button
    two = await http.post("/ui/automations/bulk", data={"csrf": csrf, "op": "delete", "scope": "filter",
                                                        "label": "team=ops", "name": "x-"})
    assert 'data-count="2"' in two.text
    gone = await http.post("/ui/automations/bulk", data={"csrf": csrf, "op": "delete", "scope": "filter",
                                                         "label": "team=ops", "name": "x-", "confirm": "yes"})
    await http.aclose()
    assert "notice=deleted+2" in gone.headers["location"]
    assert await world.engine.control.automations.query(alice) == []


async def test_dead_letters_are_listed_discarded_and_requeued_by_an_admin_only(world: UiWorld) -> None:
    dead = await run_in(world.engine, "alice", RunStatus.DEAD, key="d")
    async with world.engine.store.transaction() as tx:
        of_run = await tx.dead_letters.add(NewDeadLetter(source="run", reason="compensation_failed", ref_id=dead.id))
        of_bus = await tx.dead_letters.add(NewDeadLetter(source="bus", reason="unroutable", ref_id="m1"))
    alice, alice_csrf = await world.signed_in("alice")
    hidden = (await alice.get("/ui/attention")).text
    refused = await alice.post(f"/ui/dead-letters/{of_bus.id}", data={"csrf": alice_csrf, "op": "discard"})
    await alice.aclose()
    assert of_run.id not in hidden
    assert "admin:read" in hidden
    assert refused.status_code == 403
    admin, csrf = await world.signed_in("admin")
    listing = (await admin.get("/ui/attention")).text
    assert of_run.id in listing
    assert of_bus.id in listing
    assert listing.count('value="requeue"') == 1  # a bus letter can only be read or discarded
    requeued = await admin.post(f"/ui/dead-letters/{of_run.id}", data={"csrf": csrf, "op": "requeue"})
    assert requeued.status_code == 303
    new_id = requeued.headers["location"].split("/ui/runs/")[1].split("?")[0]
    discarded = await admin.post(f"/ui/dead-letters/{of_bus.id}", data={"csrf": csrf, "op": "discard"})
    assert discarded.status_code == 303
    assert "No dead letters." in (await admin.get("/ui/attention")).text
    await admin.aclose()
    retry = (await world.engine.control.runs.get(world.callers["alice"], new_id)).run
    assert retry.dedupe_key == f"retry:{dead.id}"


async def test_the_system_page_shows_the_cluster_to_an_admin(world: UiWorld) -> None:
    await world.engine.control.stats.beat()
    admin, _ = await world.signed_in("admin")
    cluster = (await admin.get("/ui/system")).text
    alice, _ = await world.signed_in("alice")
    own = (await alice.get("/ui/system")).text
    await admin.aclose()
    await alice.aclose()
    assert "<td>ui (this one)</td><td>✓ alive</td>" in cluster
    assert "Partition leases" in cluster
    assert "Outbox backlog" in cluster
    assert "Bus statistics" in cluster
    assert "Wheel size" in cluster
    assert "Partition leases" not in own
    assert "admin:read" in own


async def test_a_key_without_the_page_scope_is_refused_the_page(world: UiWorld) -> None:
    minted = await world.engine.control.keys.create(world.callers["alice"], {"name": "ro",
                                                                               "scopes": ["automation:read"]})
    async with world.client() as client:
        form = await client.get("/ui/login")
        await client.post("/ui/login", data={"csrf": csrf_in(form.text), "api_key": minted.token})
        assert (await client.get("/ui/automations")).status_code == 200
        assert (await client.get("/ui/runs")).status_code == 403


def test_every_dashboard_route_is_a_session_route_and_every_post_needs_csrf() -> None:
    ui = {k: p for k, p in ROUTE_POLICIES.items() if k[1] == "/" or k[1].startswith("/ui/")}
    assert len(ui) >= 25
    assert all(p.credential == "session" for p in ui.values())
    public = sorted(k for k, p in ui.items() if p.public)
    assert public == [("GET", "/"), ("GET", "/ui/login"), ("GET", "/ui/static/{path:path}"), ("POST", "/ui/login")]


async def test_static_files_are_the_vendored_ones_and_nothing_else(world: UiWorld) -> None:
    async with world.client() as http:
        htmx = await http.get("/ui/static/htmx-2.0.11.min.js")
        licence = await http.get("/ui/static/htmx.LICENSE")
        escape = await http.get("/ui/static/../pages.py")
    assert htmx.status_code == 200
    assert htmx.headers["content-type"].startswith("text/javascript")
    assert licence.status_code == 200
    assert escape.status_code == 404
