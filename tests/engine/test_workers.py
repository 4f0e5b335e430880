"""``actwheel run --workers 2`` on PostgreSQL + RabbitMQ: two engine processes behind one socket, each
its own instance, sharing the work exactly once; a worker killed with SIGKILL is started again by the
parent, and SIGTERM to the parent drains both. SQLite and the in-process bus refuse more than one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest
from procs import EngineProcess, eventually, fresh_vhost
from services import isolated_postgres_url, rabbitmq_url

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.rabbitmq]

ACTION = {"type": "simple.op", "config": {"op": "set_variable", "name": "x", "value": 1}}


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return sorted(found)


async def test_two_workers_share_one_socket_and_the_work_and_a_killed_one_comes_back(tmp_path: Path) -> None:
    async with isolated_postgres_url() as database, fresh_vhost(rabbitmq_url()) as broker:
        parent = EngineProcess("pool", database=database, broker=broker, log_dir=tmp_path,
                               env={"ACTWHEEL_LEASE_S": "5"}, extra_args=["--workers", "2"])
        parent.start()
        conn = await asyncpg.connect(database)
        try:
            await parent.wait_ready(60)
            assert parent.pid is not None

            async def both_registered() -> set[str] | None:
                ids = {r["id"] for r in await conn.fetch("SELECT id FROM instances WHERE seen_at > now() - "
                                                         "interval '30 seconds'")}
                return ids if {"pool-w0", "pool-w1"} <= ids else None
            await eventually(both_registered, within=60, what="both workers in the instances table")

            start = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
            trigger = {"type": "repeat", "repeat": "CUSTOM", "interval": 1, "time_unit": "SECONDS",
                       "start_date_time": start.isoformat(),
                       "end_date_time": (start + timedelta(seconds=5)).isoformat()}
            async with httpx.AsyncClient(base_url=parent.url, timeout=10) as client:
                for i in range(20):  # through the shared socket: either worker answers
                    created = await client.post("/v1/automations", json={"name": f"w{i}", "trigger": trigger,
                                                                         "action": ACTION})
                    assert created.status_code == 201, created.text

            async def all_done() -> bool:
                left = await conn.fetchval("SELECT count(*) FROM automations WHERE status <> 'COMPLETED'")
                open_runs = await conn.fetchval("SELECT count(*) FROM runs WHERE finished_at IS NULL")
                return left == 0 and open_runs == 0
            await eventually(all_done, within=60, what="every automation COMPLETED, every run finished")

            rows = await conn.fetch("SELECT automation_id, scheduled_for, status FROM runs")
            per_instant = Counter((r["automation_id"], r["scheduled_for"]) for r in rows)
            assert len(per_instant) == 20 * 6, len(per_instant)
            assert set(per_instant.values()) == {1}
            assert {r["status"] for r in rows} == {"SUCCEEDED"}
            executed_by = {r["actor"] for r in await conn.fetch("SELECT DISTINCT actor FROM audit WHERE phase = "
                                                                "'PIPELINE'")}
            assert executed_by == {"pool-w0", "pool-w1"}, executed_by

            first = children_of(parent.pid)
            assert len(first) == 2, first
            os.kill(first[0], signal.SIGKILL)

            async def replaced() -> bool:
                now = children_of(parent.pid)
                return len(now) == 2 and first[0] not in now
            await eventually(replaced, within=30, what="the killed worker started again")
            await parent.wait_ready(60)

            # kill -USR1 on the parent: each worker writes its task dump (headed by its pid), nobody dies of
            # it; asked again until both answer, since the restarted one ignores it until its loop is up
            workers = set(children_of(parent.pid))

            async def both_dumped() -> bool:
                os.kill(parent.pid, signal.SIGUSR1)
                text = parent.log_path.read_text(errors="replace")
                return all(f"--- actwheel task dump: pid {pid}," in text for pid in workers)
            await eventually(both_dumped, within=30, every=1.0, what="a task dump from each worker")
            assert parent.alive
            assert set(children_of(parent.pid)) == workers  # the same two: none died of the signal
        finally:
            await conn.close()
            code = await parent.stop(within=60)
        assert code == 0, parent.tail()
        assert children_of(parent.pid) == []


@pytest.mark.parametrize(("options", "needs"), [
    (["--database", "sqlite:///x.db"], "needs PostgreSQL"),
    (["--database", "postgresql://nobody@127.0.0.1:1/x"], "needs RabbitMQ"),
])
def test_more_than_one_worker_on_sqlite_or_the_in_process_bus_is_refused(
        tmp_path: Path, options: list[str], needs: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTWHEEL_")}  # no broker from the environment
    done = subprocess.run([sys.executable, "-m", "actwheel", "run", "--workers", "2", *options],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 2
    assert needs in done.stderr, done.stderr
    assert not (tmp_path / "x.db").exists()  # refused before anything started
