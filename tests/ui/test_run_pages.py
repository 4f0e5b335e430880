"""The automations list's last run, and the run page as it reads a run that really ran: the timeline's offsets
and durations, a composite's steps, secrets masked in the result and in dead letters; and the runs page's
live re-fetches, throttled."""

from __future__ import annotations

import re
from typing import Any

from ui_support import LOG, UiWorld, automation_body, csrf_in, executed, run_in

from actwheel.storage.records import NewDeadLetter, NewRun, Origin, Run, RunOutcome, RunStatus

SECRETS = ("tok-live-4242", "hunter2", "stripe-live", "Bearer sk-9f8e")


def _row_of(html: str, name: str) -> str:
    """The automations table's row whose name link reads ``name``."""
    rows = re.findall(r"<tr>.*?</tr>", html, flags=re.S)
    found = [r for r in rows if f">{name}</a>" in r]
    assert len(found) == 1, f"one row for {name!r}"
    return found[0]


async def _finished(world: UiWorld, owner: str, status: RunStatus, *, automation_id: str | None = None,
                    key: str = "k", result: dict[str, Any] | None = None) -> Run:
    """A run brought to ``status`` through the store, with ``result`` as its finish recorded it."""
    async with world.engine.store.transaction() as tx:
        inserted = await tx.runs.insert(NewRun(
            automation_id=automation_id, dedupe_key=key, owner_id=owner, action_type="simple.op",
            action_config=LOG["config"], origin=Origin.REQUEST, scheduled_for=await tx.now()))
        claimed = await tx.runs.claim(inserted.run.id, "worker", 30)
        assert claimed is not None
        assert await tx.runs.finish(RunOutcome(run_id=claimed.id, owner="worker", epoch=claimed.lease_epoch,
                                               status=status, result=result))
        return await tx.runs.get(claimed.id)


# --- 1. the automations list: each automation's last run -------------------------------------------------------------


async def test_the_automations_list_shows_each_automations_last_run_status_and_time(world: UiWorld) -> None:
    alice, bob = world.callers["alice"], world.callers["bob"]
    busy = await world.engine.control.automations.create(alice, automation_body("busy"))
    idle = await world.engine.control.automations.create(alice, automation_body("idle"))
    older = await run_in(world.engine, "alice", RunStatus.SUCCEEDED, key="old", automation_id=busy.id)
    world.engine.clock.advance(90)
    newest = await run_in(world.engine, "alice", RunStatus.FAILED, key="new", automation_id=busy.id)
    world.engine.clock.advance(60)
    http, _ = await world.signed_in("alice")
    listing = await http.get("/ui/automations")
    await http.aclose()
    assert listing.status_code == 200
    assert '<th scope="col">Last run</th>' in listing.text
    busy_row, idle_row = _row_of(listing.text, "busy"), _row_of(listing.text, "idle")
    # the newest run's status as text and icon (never colour alone), its time relative and absolute, a link
    assert '<span class="status status-failed"><span aria-hidden="true">✗</span> FAILED' in busy_row
    assert f'href="/ui/runs/{newest.id}"' in busy_row
    assert older.id not in busy_row
    assert "1 min ago" in busy_row  # created 60 s before the page, the older one 150 s
    assert newest.created_at.isoformat(timespec="seconds") in busy_row
    assert "<td>never</td>" in idle_row
    assert idle_row.count('class="status ') == 1  # the automation's own status; no run, no badge
    # the service reads them in one statement, the caller's own only; an admin may name another owner
    assert {k: r.id for k, r in (await world.engine.control.runs.latest_of(alice, [busy.id, idle.id])).items()} == {
        busy.id: newest.id}
    assert await world.engine.control.runs.latest_of(bob, [busy.id]) == {}
    assert set(await world.engine.control.runs.latest_of(world.admin, [busy.id], owner_id="alice")) == {busy.id}


async def test_a_key_without_run_read_lists_automations_without_the_last_run_column(world: UiWorld) -> None:
    alice = world.callers["alice"]
    busy = await world.engine.control.automations.create(alice, automation_body("busy"))
    await run_in(world.engine, "alice", RunStatus.FAILED, key="f", automation_id=busy.id)
    minted = await world.engine.control.keys.create(alice, {"name": "ro", "scopes": ["automation:read"]})
    async with world.client() as http:
        form = await http.get("/ui/login")
        await http.post("/ui/login", data={"csrf": csrf_in(form.text), "api_key": minted.token})
        listing = await http.get("/ui/automations")
    assert listing.status_code == 200
    assert ">busy</a>" in listing.text
    assert "Last run" not in listing.text
    assert "FAILED" not in listing.text


# --- 2, 3. the run page of a run that really ran ---------------------------------------------------------------------


async def test_a_run_that_ran_shows_each_phases_offset_from_scheduled_for_and_its_duration(world: UiWorld) -> None:
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body("timed"))
    run = await world.engine.control.automations.run_now(alice, automation.id)
    world.engine.clock.advance(1.5)  # it starts 1.5 s after the time it was for
    done = await executed(world.engine, run.id)
    assert done.status is RunStatus.SUCCEEDED
    trail = (await world.engine.control.runs.get(alice, run.id)).audit
    measured = [e.details["duration_s"] for e in trail if e.phase == "EXECUTE" and "duration_s" in e.details]
    assert len(measured) == 1
    http, _ = await world.signed_in("alice")
    page = (await http.get(f"/ui/runs/{run.id}")).text
    await http.aclose()
    timeline = page.split('<ol class="timeline">')[1].split("</ol>")[0]
    phases = re.findall(r"<li><strong>(.*?)</strong>(.*?)</li>", timeline, flags=re.S)
    names = [name for name, _ in phases]
    assert names[:5] == ["DISPATCH", "PERMISSION", "VALIDATE", "EXECUTE started", "EXECUTE completed"]
    assert all('<span class="offset">+1.500 s</span>' in rest for _, rest in phases)
    executed_for = dict(phases)["EXECUTE completed"]
    assert f'<span class="duration">took {measured[0] * 1000:.1f} ms</span>' in executed_for
    # the other phases of the attempt last until the next one (the virtual clock stood still)
    assert '<span class="duration">took 0.0 ms</span>' in dict(phases)["DISPATCH"]


COMPOSITE = {"type": "composite", "config": {"mode": "sequential", "steps": [
    {"name": "greet", "type": "simple.op", "config": {"op": "log", "message": "hello"}},
    {"name": "check", "type": "simple.op", "config": {"op": "assert", "condition": "1 == 2"}},
    {"name": "report", "type": "simple.op", "config": {"op": "log", "message": "never"}}]}}


def _steps_on(page: str) -> list[tuple[str, str]]:
    section = page.split('<h2 id="steps-h">Steps</h2>')[1].split("</section>")[0]
    step = r'<li><strong>(.*?)</strong> \(<code>simple\.op</code>\): <span class="step-state">(.*?)</span>'
    return re.findall(step, section)


async def test_a_composite_run_shows_its_steps_and_their_states(world: UiWorld) -> None:
    alice = world.callers["alice"]
    automation = await world.engine.control.automations.create(alice, automation_body(
        "steps", action=COMPOSITE, policy={"retry": {"max_attempts": 1}}))
    run = await world.engine.control.automations.run_now(alice, automation.id)
    http, _ = await world.signed_in("alice")
    waiting = (await http.get(f"/ui/runs/{run.id}")).text
    done = await executed(world.engine, run.id)
    finished = (await http.get(f"/ui/runs/{run.id}")).text
    await http.aclose()
    assert done.status is RunStatus.FAILED
    assert _steps_on(waiting) == [("greet", "not finished yet"), ("check", "not finished yet"),
                                  ("report", "not finished yet")]
    assert _steps_on(finished) == [("greet", "completed"), ("check", "failed"), ("report", "skipped")]


# --- 4. masking ------------------------------------------------------------------------------------------------------


async def test_a_secret_in_a_result_or_a_dead_letter_payload_is_never_rendered(world: UiWorld) -> None:
    result = {"status": "succeeded", "summary": "charged", "data": {
        "api_token": SECRETS[0], "login": {"user": "svc", "password": SECRETS[1]},
        "key": {"$secret": SECRETS[2]}}}
    run = await _finished(world, "alice", RunStatus.SUCCEEDED, result=result)
    async with world.engine.store.transaction() as tx:
        await tx.dead_letters.add(NewDeadLetter(source="bus", reason="unroutable", ref_id="m1", payload={
            "headers": {"Authorization": SECRETS[3]}, "result": result}))
    alice, _ = await world.signed_in("alice")
    run_page = (await alice.get(f"/ui/runs/{run.id}")).text
    await alice.aclose()
    admin, _ = await world.signed_in("admin")
    attention = (await admin.get("/ui/attention")).text
    await admin.aclose()
    result_card = run_page.split('<h2 id="res-h">')[1].split("</section>")[0]
    assert "charged" in result_card  # the result is shown, its secrets are not
    assert "••••••" in result_card
    assert "unroutable" in attention
    for secret in SECRETS:
        assert secret not in run_page
        assert secret not in attention


# --- 5. the runs page's live updates ---------------------------------------------------------------------------------


async def test_live_run_events_refetch_the_runs_throttled_and_a_resync_at_once(world: UiWorld) -> None:
    http, _ = await world.signed_in("alice")
    page = (await http.get("/ui/runs", params={"status": "FAILED"})).text
    await http.aclose()
    live = page.split('sse-connect="/v1/stream">')[1].split("</table>")[0]
    triggers = re.findall(r'hx-trigger="([^"]*)"', live)
    assert sorted(triggers) == ["sse:resync", "sse:run delay:2s", "sse:run throttle:2s"]
    body = re.search(r'<tbody id="run-rows"[^>]*>', live)
    assert body is not None
    assert 'hx-trigger="sse:resync"' in body.group(0)  # alone: a throttle on this element would swallow it
    assert 'hx-get="/ui/runs/rows?status=FAILED"' in body.group(0)
    for requester in re.findall(r"<span hidden [^>]*>", live):
        assert 'hx-get="/ui/runs/rows?status=FAILED"' in requester
        assert 'hx-target="#run-rows"' in requester
        assert 'hx-sync="#run-rows:queue last"' in requester


async def test_an_agent_bound_key_reads_the_last_runs_of_its_agents_automations_only(world: UiWorld) -> None:
    alice = world.callers["alice"]
    await world.engine.control.principals.create(world.admin, {
        "id": "alice-bot", "kind": "agent", "parent_id": "alice", "scopes": ["automation:*", "run:read"]})
    minted = await world.engine.control.keys.create(world.admin, {
        "name": "bot", "principal_id": "alice", "agent_id": "alice-bot", "scopes": ["automation:*", "run:read"]})
    bot = await world.engine.control.authenticator.authenticate(minted.token)
    the_bots = await world.engine.control.automations.create(bot, automation_body("the bot's"))
    alices = await world.engine.control.automations.create(alice, automation_body("alice's"))
    bots_run = await run_in(world.engine, "alice", RunStatus.SUCCEEDED, key="b", automation_id=the_bots.id)
    await run_in(world.engine, "alice", RunStatus.SUCCEEDED, key="a", automation_id=alices.id)
    found = await world.engine.control.runs.latest_of(bot, [the_bots.id, alices.id])
    assert {k: r.id for k, r in found.items()} == {the_bots.id: bots_run.id}
    assert set(await world.engine.control.runs.latest_of(alice, [the_bots.id, alices.id])) == {
        the_bots.id, alices.id}
