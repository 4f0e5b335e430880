"""The ops files (alert rules, dashboard) only name metrics the engine really exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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
