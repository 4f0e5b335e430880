"""The dashboard in a real browser (Playwright + the Debian chromium): sign in, filter, bulk disable by
label with its dry-run count, run now with confirmation, keyboard-only navigation, a run row arriving
live through the stream, resolving an UNKNOWN run with a note, bulk cancel by filter with its dry-run
count; axe-core finds no violation on any page (as a user and as the admin, confirmation pages
included); a full-page screenshot of each page goes to ``.artifacts/`` (git-ignored).

Skipped loudly without chromium on a dev machine; fails under ``CI``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from ui_support import UiWorld, automation_body, build_world, run_in

from actwheel.actors.cdc import CdcEmitter
from actwheel.api.app import create_app
from actwheel.storage.records import NewDeadLetter, RunStatus

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _require_browser() -> Any:
    missing = None
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[test]')"
    if missing is None and not Path(CHROMIUM).exists():
        missing = f"no chromium at {CHROMIUM} (apt-get install chromium)"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    return async_playwright


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[tuple[UiWorld, str]]:
    world = await build_world(tmp_path)
    await world.engine.bus.start()  # the live stream's queue lives on the (in-memory) bus
    server = uvicorn.Server(uvicorn.Config(create_app(world.engine.control), log_level="warning", lifespan="off"))
    sock = socket.create_server(("127.0.0.1", 0))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield world, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        await world.engine.control.stream.close()
        server.should_exit = True
        await asyncio.wait_for(task, 5)
        await world.engine.bus.stop()
        await world.engine.store.stop()


@pytest.fixture
async def browser_page(site: tuple[UiWorld, str]) -> AsyncIterator[Any]:
    async_playwright = _require_browser()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.console_errors = errors
        try:
            yield page
        finally:
            await browser.close()


async def sign_in(page: Any, base: str, token: str) -> None:
    await page.goto(f"{base}/ui/automations")
    assert page.url.endswith("/ui/login")
    await page.fill("#api_key", token)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{base}/ui/")


async def axe_violations(page: Any) -> list[str]:
    from axe_playwright_python.async_playwright import Axe
    results = await Axe().run(page)
    return [f"{v['id']}: {v['help']}" for v in results.response["violations"]]


async def test_every_page_has_no_axe_violation_and_is_screenshotted(
        site: tuple[UiWorld, str], browser_page: Any) -> None:
    world, base = site
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body("nightly report",
                                                                                       labels={"team": "ops"}))
    await world.engine.control.automations.set_enabled(alice, automation.id, False)
    await world.engine.control.automations.set_enabled(alice, automation.id, True)
    run = await world.engine.control.automations.run_now(alice, automation.id)
    unknown = await run_in(world.engine, "alice", RunStatus.UNKNOWN, key="u", automation_id=automation.id)
    dead = await run_in(world.engine, "alice", RunStatus.DEAD, key="d", automation_id=automation.id)
    await run_in(world.engine, "alice", RunStatus.SKIPPED, key="s", automation_id=automation.id)
    async with world.engine.store.transaction() as tx:
        await tx.dead_letters.add(NewDeadLetter(source="run", reason="compensation_failed", ref_id=dead.id))
        await tx.dead_letters.add(NewDeadLetter(source="bus", reason="unroutable", ref_id="m1",
                                                payload={"body": "<b>not html</b>"}))
    await world.engine.control.stats.beat()
    page = browser_page
    ARTIFACTS.mkdir(exist_ok=True)
    await page.goto(f"{base}/ui/login")
    found = {"login": await axe_violations(page)}
    await page.screenshot(path=str(ARTIFACTS / "login.png"), full_page=True)

    async def check(name: str, path: str | None = None) -> None:
        if path is not None:
            await page.goto(base + path)
        found[name] = await axe_violations(page)
        await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    await sign_in(page, base, world.tokens["alice"])
    pages = {"overview": "/ui/", "automations": "/ui/automations", "automation": f"/ui/automations/{automation.id}",
             "runs": "/ui/runs", "run": f"/ui/runs/{run.id}", "run-unknown": f"/ui/runs/{unknown.id}",
             "run-dead": f"/ui/runs/{dead.id}", "attention": "/ui/attention", "system": "/ui/system"}
    for name, path in pages.items():
        await check(name, path)
    await page.goto(f"{base}/ui/automations")
    await page.select_option("select[name=scope]", "filter")
    await page.click("#bulk button[type=submit]")
    await check("bulk-confirm")
    await page.goto(f"{base}/ui/runs")
    await page.click("form.bulk button[type=submit]")
    await check("cancel-confirm")
    await page.click("text=Sign out")
    await sign_in(page, base, world.tokens["admin"])
    for name, path in {"admin-overview": "/ui/", "admin-runs": "/ui/runs?owner=*", "admin-attention": "/ui/attention",
                       "admin-system": "/ui/system"}.items():
        await check(name, path)
    assert {k: v for k, v in found.items() if v} == {}
    assert [e for e in page.console_errors if "Content Security Policy" in e] == []


async def test_filter_then_bulk_disable_by_label_with_its_dry_run_count(
        site: tuple[UiWorld, str], browser_page: Any) -> None:
    world, base = site
    alice = world.callers["alice"]
    for i in range(3):
        await world.engine.control.automations.create(alice, automation_body(f"ops-{i}", labels={"team": "ops"}))
    await world.engine.control.automations.create(alice, automation_body("web", labels={"team": "web"}))
    page = browser_page
    await sign_in(page, base, world.tokens["alice"])
    await page.goto(f"{base}/ui/automations")
    await page.fill("input[name=label]", "team=ops")
    await page.click("form.filters button[type=submit]")
    await page.wait_for_url("**/ui/automations?*label=team%3Dops*")
    assert await page.locator("table.list tbody tr").count() == 3
    await page.select_option("select[name=scope]", "filter")
    await page.select_option("select[name=op]", "disable")
    await page.click("#bulk button[type=submit]")
    assert await page.locator("[data-count]").get_attribute("data-count") == "3"
    await page.click("text=Yes, disable 3")
    await page.wait_for_url("**/ui/automations?*notice=*")
    states = {a.name: a.enabled for a in await world.engine.control.automations.query(alice)}
    assert states == {"ops-0": False, "ops-1": False, "ops-2": False, "web": True}


#: What a keyboard user hears of the focused element: its label (aria-label, else its text), as one line.
FOCUSED = ("(() => { const e = document.activeElement; if (!e) return '';"
           " return (e.getAttribute('aria-label') || e.textContent || '').replace(/\\s+/g, ' ').trim(); })()")


async def focused(page: Any) -> str:
    return str(await page.evaluate(FOCUSED))


async def tab_to(page: Any, label: str, *, key: str = "Tab", limit: int = 60) -> int:
    """Press ``key`` (Tab or Shift+Tab) until the focused element's label is ``label``; how many presses."""
    for presses in range(1, limit + 1):
        await page.keyboard.press(key)
        if await focused(page) == label:
            return presses
    raise AssertionError(f"{label!r} was not reached in {limit} presses of {key} (focus on {await focused(page)!r})")


async def test_run_now_with_confirmation_and_keyboard_only_navigation(
        site: tuple[UiWorld, str], browser_page: Any) -> None:
    """Only keys from sign-in to the new run: Tab and Shift+Tab to move, Enter to follow a link, Space to tick a
    box and press a button; each stop checked on ``document.activeElement``, and the pages axe-clean."""
    world, base = site
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body("by keyboard"))
    page = browser_page
    await sign_in(page, base, world.tokens["alice"])
    assert await tab_to(page, "Skip to content", limit=1) == 1  # the skip link comes first
    assert await tab_to(page, "Automations") == 2  # past "Overview"
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"{base}/ui/automations")
    await tab_to(page, "Skip to content", limit=1)
    await page.keyboard.press("Enter")  # the skip link moves the focus to the main content
    assert await page.evaluate("document.activeElement.id") == "main"
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.name") == "status"  # the first filter, past the header
    await tab_to(page, "Select by keyboard")
    await page.keyboard.press("Space")
    assert await page.evaluate("document.activeElement.checked") is True
    await tab_to(page, "Run now by keyboard")
    assert await tab_to(page, "Disable by keyboard", key="Shift+Tab", limit=1) == 1  # back one stop
    assert await tab_to(page, "Run now by keyboard", limit=1) == 1
    assert await axe_violations(page) == []
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"{base}/ui/automations/{automation.id}/run")
    assert await world.engine.control.runs.query(alice, automation_id=automation.id) == []
    # the confirm button has the focus (autofocus lands after the load: pressing before it did nothing)
    await page.wait_for_function("document.activeElement && document.activeElement.type === 'submit'")
    assert await focused(page) == "Yes, run now"
    assert await tab_to(page, "Cancel", limit=1) == 1
    assert await tab_to(page, "Yes, run now", key="Shift+Tab", limit=1) == 1
    assert await axe_violations(page) == []
    await page.keyboard.press("Space")
    await page.wait_for_url(f"{base}/ui/runs/*")
    runs = await world.engine.control.runs.query(alice, automation_id=automation.id)
    assert [r.status.value for r in runs] == ["PENDING"]
    assert page.url == f"{base}/ui/runs/{runs[0].id}"
    assert await axe_violations(page) == []


async def test_a_run_created_while_the_runs_page_is_open_appears_through_the_stream_without_reload(
        site: tuple[UiWorld, str], browser_page: Any) -> None:
    world, base = site
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body("live"))
    page = browser_page
    # A DOM marker, not a window flag polled with wait_for_function: Playwright evals its predicate in the
    # page on every poll, which the page's CSP (script-src 'self', no 'unsafe-eval') rightly refuses. The
    # init script itself is injected by the browser (not eval'd), and wait_for_selector needs no eval.
    await page.add_init_script(
        "document.addEventListener('htmx:sseOpen', () => {"
        " document.documentElement.setAttribute('data-sse-open', ''); });")
    await sign_in(page, base, world.tokens["alice"])
    await page.goto(f"{base}/ui/runs")
    # the stream is connected: the hub has our client
    await page.wait_for_selector("html[data-sse-open]", state="attached")
    await page.evaluate("window.sameDocument = true")
    assert await page.locator("#run-rows").inner_text() == "No run matches."
    run = await world.engine.control.automations.run_now(alice, automation.id)
    # a new PENDING run is announced to the router (run.ready), not to the stream: its first transition
    # is; the service's cancel writes it to the outbox, and the relay publishes it, as in the engine
    await world.engine.control.operations.cancel_run(alice, run.id, note="seen live")
    relay = CdcEmitter(store=world.engine.store, bus=world.engine.bus, clock=world.engine.clock)
    assert await relay.relay_until_empty() >= 2
    row = page.locator(f'#run-rows tr:has(a[href="/ui/runs/{run.id}"])')
    await row.wait_for()
    assert "CANCELED" in await row.inner_text()
    assert await page.evaluate("window.sameDocument") is True  # swapped in by htmx, not reloaded


async def test_a_stream_of_run_events_refetches_the_rows_at_most_twice_and_ends_on_the_final_state(
        site: tuple[UiWorld, str], browser_page: Any) -> None:
    """Five transitions 0.2 s apart: without a throttle each re-queried the database; now the first fetches at
    once and the last is caught 2 s after the stream goes quiet, so the table ends on the final state."""
    world, base = site
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body("busy"))
    waiting = [await run_in(world.engine, "alice", RunStatus.PENDING, key=f"w{i}", automation_id=automation.id)
               for i in range(5)]
    page = browser_page
    await page.add_init_script(
        "document.addEventListener('htmx:sseOpen', () => {"
        " document.documentElement.setAttribute('data-sse-open', ''); });")
    await sign_in(page, base, world.tokens["alice"])
    fetches: list[str] = []
    page.on("request", lambda r: fetches.append(r.url) if "/ui/runs/rows" in r.url else None)
    await page.goto(f"{base}/ui/runs")
    await page.wait_for_selector("html[data-sse-open]", state="attached")
    relay = CdcEmitter(store=world.engine.store, bus=world.engine.bus, clock=world.engine.clock)
    for run in waiting:
        await world.engine.control.operations.cancel_run(alice, run.id, note="one by one")
        assert await relay.relay_until_empty() >= 1
        await asyncio.sleep(0.2)
    rows = page.locator("#run-rows tr")
    for run in waiting:
        await page.locator(f'#run-rows tr:has(a[href="/ui/runs/{run.id}"]):has-text("CANCELED")').wait_for()
    await asyncio.sleep(2.5)  # nothing more is fetched once the stream is quiet
    assert await rows.count() == 5
    assert "PENDING" not in await page.locator("#run-rows").inner_text()
    assert 1 <= len(fetches) <= 2, fetches


async def test_resolving_an_unknown_run_with_a_note_in_the_browser(
        site: tuple[UiWorld, str], browser_page: Any) -> None:
    world, base = site
    run = await run_in(world.engine, "alice", RunStatus.UNKNOWN, key="u")
    page = browser_page
    await sign_in(page, base, world.tokens["alice"])
    await page.goto(f"{base}/ui/runs/{run.id}")
    await page.check("input[name=outcome][value=happened]")
    assert await page.locator("#note").evaluate("e => e.validity.valueMissing") is True  # the note is required
    await page.fill("#note", "the payment shows in the bank statement")
    await page.click("form.resolve button[type=submit]")
    await page.wait_for_url(f"{base}/ui/runs/{run.id}?notice=*")
    assert "resolved as SUCCEEDED" in await page.locator("p.notice").inner_text()
    assert "SUCCEEDED" in await page.locator("dl").first.inner_text()
    assert "the payment shows in the bank statement" in await page.locator("ol.timeline").inner_text()
    assert await page.locator("form.resolve").count() == 0
    found = await world.engine.control.runs.get(world.callers["alice"], run.id)
    assert (found.run.status, found.run.reason) == (RunStatus.SUCCEEDED, "resolved_manually")
    resolutions = [e for e in found.audit if e.phase == "MANUAL_RESOLVE"]
    assert [(e.actor, e.details["note"], e.details["outcome"]) for e in resolutions] == [
        ("alice", "the payment shows in the bank statement", "happened")]


async def test_bulk_cancel_by_filter_after_its_dry_run_count_in_the_browser(
        site: tuple[UiWorld, str], browser_page: Any) -> None:
    world, base = site
    alice = world.callers["alice"]
    nightly = await world.engine.control.automations.create(alice, automation_body("nightly"))
    other = await world.engine.control.automations.create(alice, automation_body("other"))
    waiting = [await run_in(world.engine, "alice", RunStatus.PENDING, key=f"n{i}", automation_id=nightly.id)
               for i in range(3)]
    done = await run_in(world.engine, "alice", RunStatus.SUCCEEDED, key="done", automation_id=nightly.id)
    kept = await run_in(world.engine, "alice", RunStatus.PENDING, key="o", automation_id=other.id)
    page = browser_page
    await sign_in(page, base, world.tokens["alice"])
    await page.goto(f"{base}/ui/runs")
    await page.fill("input[name=automation_id]", nightly.id)
    await page.click("form.filters button[type=submit]")
    await page.wait_for_url(f"**/ui/runs?*automation_id={nightly.id}*")
    assert await page.locator("#run-rows tr").count() == 4
    await page.click("form.bulk button[type=submit]")
    assert await page.locator("[data-count]").get_attribute("data-count") == "3"
    statuses = {r.id: r.status for r in await world.engine.control.runs.query(alice)}
    assert RunStatus.CANCELED not in statuses.values()  # the count wrote nothing
    await page.fill("#cancel-note", "nightly is paused for the migration")
    await page.click("text=Yes, cancel 3")
    await page.wait_for_url("**/ui/runs?*notice=canceled*")
    assert "canceled 3" in await page.locator("p.notice").inner_text()
    after = {r.id: r.status for r in await world.engine.control.runs.query(alice)}
    assert {after[r.id] for r in waiting} == {RunStatus.CANCELED}
    assert (after[done.id], after[kept.id]) == (RunStatus.SUCCEEDED, RunStatus.PENDING)
