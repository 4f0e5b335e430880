"""The dashboard in a real browser (Playwright + the Debian chromium): sign in, filter, bulk disable by
label with its dry-run count, run now with confirmation, keyboard-only navigation; axe-core finds no
violation on any page; a full-page screenshot of each page goes to ``.artifacts/`` (git-ignored).

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
from ui_support import UiWorld, automation_body, build_world

from actwheel.api.app import create_app

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
    server = uvicorn.Server(uvicorn.Config(create_app(world.engine.control), log_level="warning", lifespan="off"))
    sock = socket.create_server(("127.0.0.1", 0))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield world, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        await world.engine.control.stream.close()
        server.should_exit = True
        await asyncio.wait_for(task, 5)
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
    run = await world.engine.control.automations.run_now(alice, automation.id)
    page = browser_page
    ARTIFACTS.mkdir(exist_ok=True)
    await page.goto(f"{base}/ui/login")
    found = {"login": await axe_violations(page)}
    await page.screenshot(path=str(ARTIFACTS / "login.png"), full_page=True)
    await sign_in(page, base, world.tokens["alice"])
    pages = {"overview": "/ui/", "automations": "/ui/automations", "automation": f"/ui/automations/{automation.id}",
             "runs": "/ui/runs", "run": f"/ui/runs/{run.id}", "attention": "/ui/attention", "system": "/ui/system"}
    for name, path in pages.items():
        await page.goto(base + path)
        found[name] = await axe_violations(page)
        await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
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


async def test_run_now_with_confirmation_and_keyboard_only_navigation(
        site: tuple[UiWorld, str], browser_page: Any) -> None:
    world, base = site
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body("by keyboard"))
    page = browser_page
    await sign_in(page, base, world.tokens["alice"])
    await page.keyboard.press("Tab")  # the skip link comes first
    assert await page.evaluate("document.activeElement.textContent") == "Skip to content"
    for _ in range(2):
        await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Automations"
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"{base}/ui/automations")
    await page.focus("text=Run now")
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"{base}/ui/automations/{automation.id}/run")
    assert await world.engine.control.runs.query(alice, automation_id=automation.id) == []
    await page.keyboard.press("Enter")  # the confirm button has the focus
    await page.wait_for_url(f"{base}/ui/runs/*")
    runs = await world.engine.control.runs.query(alice, automation_id=automation.id)
    assert [r.status.value for r in runs] == ["PENDING"]
