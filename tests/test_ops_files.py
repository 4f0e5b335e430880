"""The ops files: alert rules and dashboard only name metrics the engine really exports; ops/dev-services
gives each checkout its own ports, node name and a data folder its service users can reach."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
import services

from actwheel.metrics import Metrics

OPS = Path(__file__).resolve().parent.parent / "ops"
METRIC = re.compile(r"\b((?:action|actwheel)_[a-z_]+)")


def exported_sample_names() -> set[str]:
    metrics = Metrics()
    metrics.fire_lateness.observe(0.1)  # histograms export their samples once observed
    names: set[str] = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names | {f"{n}_bucket" for n in names} | {f"{n}_total" for n in names}


@pytest.mark.parametrize("name", ["alerts.yml", "grafana-dashboard.json", "prometheus.yml"])
def test_ops_files_name_only_exported_metrics(name: str) -> None:
    text = (OPS / name).read_text()
    used = set(METRIC.findall(text))
    missing = used - exported_sample_names()
    assert not missing, f"{name} names metrics the engine does not export: {sorted(missing)}"


def test_dashboard_is_valid_json_with_panels() -> None:
    dashboard = json.loads((OPS / "grafana-dashboard.json").read_text())
    assert dashboard["panels"]
    assert all(p["targets"] for p in dashboard["panels"])


def test_alerts_cover_the_seed_metrics() -> None:
    text = (OPS / "alerts.yml").read_text()
    for metric in ("action_dispatched_total", "action_dead_letter_total", "actwheel_fire_lateness_seconds"):
        assert metric in text


# --- ops/dev-services: per-checkout ports and data (issue 14) --------------------------------------------

DEV_SERVICES = OPS / "dev-services"


def _dev_services_env(devdata: Path) -> dict[str, str]:
    env = {**os.environ, "ACTWHEEL_DEVDATA": str(devdata)}
    done = subprocess.run([str(DEV_SERVICES), "env"], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if not line.startswith("dev-services:"))


def test_dev_services_is_valid_bash() -> None:
    done = subprocess.run(["bash", "-n", str(DEV_SERVICES)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _port_busy(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_another_checkout_gets_its_own_ports_and_node_and_env_writes_nothing(tmp_path: Path) -> None:
    devdata = tmp_path / "other" / ".devdata"
    devdata.mkdir(parents=True)
    tmp_path.chmod(0o755)
    chosen = _dev_services_env(devdata)
    checkout_id = hashlib.sha256(str(devdata.resolve()).encode()).hexdigest()[:8]
    offset = int(checkout_id[:4], 16) % 500 + 1
    if _port_busy(54329):  # another checkout's PostgreSQL (this test's .devdata has none)
        assert chosen["PG_PORT"] == str(54329 + offset)
    else:
        assert chosen["PG_PORT"] == "54329"
    if _port_busy(56720) or _port_busy(25680):
        assert (chosen["RMQ_PORT"], chosen["RMQ_DIST_PORT"], chosen["RMQ_NODE"]) == (
            str(56720 + offset), str(25680 + offset), f"actwheel-{checkout_id}@localhost")
    else:
        assert (chosen["RMQ_PORT"], chosen["RMQ_NODE"]) == ("56720", "actwheel@localhost")
    assert _dev_services_env(devdata) == chosen, "the choice is stable for one checkout"
    assert not (devdata / "services.env").exists(), "only start records the choice"


def test_the_recorded_choice_wins_and_the_tests_read_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    devdata = tmp_path / ".devdata"
    devdata.mkdir()
    (devdata / "services.env").write_text(
        "# written by ops/dev-services\nPG_PORT=55001\nRMQ_PORT=57001\nRMQ_DIST_PORT=26001\n"
        "RMQ_NODE=actwheel-x@localhost\nSERVICE_DATA=" + str(devdata) + "\n"
        "ACTWHEEL_TEST_DATABASE_URL=postgresql://actwheel:actwheel@127.0.0.1:55001/actwheel\n"
        "ACTWHEEL_TEST_BROKER_URL=amqp://actwheel:actwheel@127.0.0.1:57001/\n")
    chosen = _dev_services_env(devdata)
    assert (chosen["PG_PORT"], chosen["RMQ_PORT"], chosen["RMQ_NODE"]) == ("55001", "57001", "actwheel-x@localhost")
    monkeypatch.setenv("ACTWHEEL_DEVDATA", str(devdata))
    monkeypatch.delenv("ACTWHEEL_TEST_DATABASE_URL", raising=False)
    monkeypatch.delenv("ACTWHEEL_TEST_BROKER_URL", raising=False)
    assert services._url("ACTWHEEL_TEST_DATABASE_URL", "default") == \
        "postgresql://actwheel:actwheel@127.0.0.1:55001/actwheel"
    assert services._url("ACTWHEEL_TEST_BROKER_URL", "default") == "amqp://actwheel:actwheel@127.0.0.1:57001/"
    monkeypatch.setenv("ACTWHEEL_TEST_BROKER_URL", "amqp://elsewhere/")
    assert services._url("ACTWHEEL_TEST_BROKER_URL", "default") == "amqp://elsewhere/", "the environment wins"
    assert services.services_env(tmp_path / "nowhere") == {}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the servers as other OS users")
def test_as_root_a_checkout_the_service_users_cannot_reach_keeps_service_data_in_var_tmp(tmp_path: Path) -> None:
    hidden = tmp_path / "private"
    devdata = hidden / "co" / ".devdata"
    devdata.mkdir(parents=True)
    hidden.chmod(0o700)  # like a clone under /root or inside `mktemp -d`
    checkout_id = hashlib.sha256(str(devdata.resolve()).encode()).hexdigest()[:8]
    assert _dev_services_env(devdata)["SERVICE_DATA"] == f"/var/tmp/actwheel-{checkout_id}"
    assert not Path(f"/var/tmp/actwheel-{checkout_id}").exists(), "only start creates it"
