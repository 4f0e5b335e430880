"""The dashboard without a browser: every page renders for its scopes, forms work as plain HTML
(POST → 303 → GET), hostile names are escaped, the CSP is sent, another owner's objects are out of
reach by URL, and a POST without the session's CSRF token is refused."""

from __future__ import annotations

import pytest
from ui_support import UiWorld, automation_body, csrf_in

from actwheel.api.guard import ROUTE_POLICIES
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


async def test_an_action_whose_service_has_not_landed_says_so_instead_of_doing_nothing(world: UiWorld) -> None:
    http, csrf = await world.signed_in("alice")
    answer = await http.post("/ui/runs/r1/resolve", data={"csrf": csrf, "outcome": "FAILED", "note": "n"})
    assert answer.status_code == 501
    assert "Not available yet" in answer.text
    await http.aclose()


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
