"""Issue 35, point 3: every verdict below accelerated names a root cause (DESIGN.md, "Contract: the report JSON"):
the schema says so with ``if``/``then``, JUnit's suite properties and ``gpucheck merge`` name the degraded verdict's
lowest degraded finding as the report does, and merge names it too for a report of a gpucheck that named none."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun, report_validator
from tests.test_driver_probe import doctor_on

NVML = Path(__file__).parent / "scenarios" / "nvml"


def _errors(report: dict[str, Any]) -> list[str]:
    return [e.message for e in report_validator().iter_errors(report)]


@pytest.fixture
def degraded(fake_machine: Callable[[dict[str, Any]], Path], tmp_path: Path) -> dict[str, Any]:
    """The report of the cards whose PCIe links trained below their maximum (degraded), by gpucheck doctor."""
    fake_machine(json.loads((NVML / "gen4-x16-card-trained-at-x8.json").read_text()))
    report, _lines = doctor_on(tmp_path)
    assert report["verdict"] == "degraded" and report["root_cause"]["id"] == "pcie-link-degraded"
    return report


def test_the_schema_holds_root_cause_null_exactly_when_accelerated(degraded: dict[str, Any]) -> None:
    assert _errors(degraded) == []
    assert degraded["root_cause"]["severity"] == "degraded" and degraded["root_cause"]["subject"] == "GPU-0"
    nameless = {**degraded, "root_cause": None}
    assert _errors(nameless), "a degraded verdict without a root cause breaks the contract"
    accelerated = {**degraded, "verdict": "accelerated"}
    assert _errors(accelerated), "an accelerated verdict with a root cause breaks the contract"
    blocker = {**degraded, "verdict": "not-accelerated"}
    assert _errors(blocker), "a not-accelerated verdict's root cause is a blocker"
    assert _errors({**accelerated, "root_cause": None}) == []


def test_merge_names_the_degraded_root_cause_also_for_an_older_report(degraded: dict[str, Any], tmp_path: Path) -> None:
    """The report as written, and the same report as a gpucheck before issue 35 wrote it (root_cause null): merge
    groups both under the lowest degraded finding."""
    new, old = tmp_path / "node-01.json", tmp_path / "node-02.json"
    older = copy.deepcopy(degraded)
    older["root_cause"] = None
    older["environment"]["host"] = "node-02"
    new.write_text(json.dumps({**degraded, "environment": {**degraded["environment"], "host": "node-01"}}))
    old.write_text(json.dumps(older))
    done = subprocess.run([sys.executable, "-m", "gpucheck.cli", "merge", str(new), str(old), "--json", "-"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    fleet = json.loads(done.stdout)
    assert [h["root_cause"] for h in fleet["hosts"]] == ["pcie-link-degraded", "pcie-link-degraded"]
    assert fleet["groups"] == [{"cause": "pcie-link-degraded", "hosts": ["node-01", "node-02"]}]


def test_junit_names_the_degraded_root_cause(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun], tmp_path: Path
) -> None:
    fake_machine(json.loads((NVML / "gen4-x16-card-trained-at-x8.json").read_text()))
    junit = tmp_path / "junit.xml"
    run = run_gpucheck("--gpucheck-framework=none", f"--junitxml={junit}")
    assert run.report["verdict"] == "degraded"
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["gpucheck.verdict"] == "degraded" and props["gpucheck.root_cause"] == "pcie-link-degraded"
    assert props["gpucheck.root_cause.layer"] == "health" and props["gpucheck.root_cause.action"] == "service-hardware"
    run.result.stdout.fnmatch_lines(["root cause: pcie-link-degraded (health): GPU 0 *",
                                     "also, not caused by the root cause: pcie-link-degraded (health, degraded): GPU 1 *"])
