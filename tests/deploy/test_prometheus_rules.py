"""deploy/prometheus/querylog-rules.yaml: ``promtool check rules`` finds nothing to say, ``promtool test rules`` runs
its unit tests (each alert fires on a leaking instance and stays silent on a safe one), and every series the rules
read is one the sidecar exports (issue 22 item 9)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sidecar.metrics import PipelineCollector

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "querylog-rules.yaml"
TESTS = ROOT / "deploy" / "prometheus" / "querylog-rules.test.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian prometheus) is not installed")


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    run = subprocess.run([str(PROMTOOL), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS: 5 rules found" in run.stdout


@needs_promtool
def test_promtool_runs_the_rules_unit_tests() -> None:
    run = subprocess.run([str(PROMTOOL), "test", "rules", str(TESTS)], capture_output=True, text=True, cwd=TESTS.parent)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_every_alert_has_a_unit_test() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert alerts == {
        "QuerylogIdentifierReleased",
        "QuerylogPairRecreated",
        "QuerylogLinkageAboveChance",
        "QuerylogBudgetExhausted",
        "QuerylogKAtCap",
    }
    tested = {a["alertname"] for t in yaml.safe_load(TESTS.read_text())["tests"] for a in t["alert_rule_test"]}
    assert tested == alerts


def _exported() -> set[str]:
    """The sample names /metrics gives for a chain of category_buffer and dp_replace with the live audit on."""
    audit = {
        "events": {"in": 1, "out": 1},
        "batches": {"in": 1, "out": 1},
        "recreated_pairs": 0,
        "window_pairs": 1,
        "scanned": {"in": 1, "out": 1},
        "identifiers": {"in": {"phone": 1}, "out": {"phone": 1}},
        "linkage": {"sampled": 1, "assessed": 1, "linked": 0, "share": 0.0, "users_seen": 1},
        "k": 5,
        "seconds": 0.0,
    }
    buffer = {"k_per_category": {"c": 5}, "max_k_per_category": {"c": 20}, "held_per_category": {"c": 1}}
    ledger = {"users": 1, "users_at_budget": 0, "spent_quantiles": {"0.5": 0.1}}
    filters: list[dict[str, Any]] = [
        {"name": "category_buffer", "events_in": 1, "events_out": 1, "held": 1, "counts": {}, **buffer},
        {"name": "dp_replace", "events_in": 1, "events_out": 1, "held": 0, "counts": {}, "epsilon": 1.0,
         "ledger": ledger},
    ]  # fmt: skip
    stats = {
        "events_in": 1,
        "events_out": 1,
        "events_dropped": 0,
        "events_dead_lettered": 0,
        "events_held": 1,
        "dead_letters": {},
        "filters": filters,
        "live_audit": audit,
    }
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(lambda: stats))
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {sample.name for family in families for sample in family.samples}


def test_the_rules_read_series_the_sidecar_exports() -> None:
    used = set(re.findall(r"\bquerylog_[a-z_]+", RULES.read_text()))
    assert used and used <= _exported()
