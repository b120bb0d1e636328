"""Issue 24, point 4: a recommended action on every finding. The catalog gives each cause its default, a
finding's evidence (``recovery_action``: the driver's Xid 154, NVML's recovery-action field) may raise it and
never lowers it, and the action reaches the JSON report (each finding's and the most severe at the top), the
terminal failure text and JUnit."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.model import (
    ACTIONS,
    NVML_RECOVERY_ACTIONS,
    Severity,
    catalog,
    finding,
    most_severe,
    raised_action,
    recovery_action,
)
from gpucheck.report import failure_text, report_schema

NVML_SCENARIOS = Path(__file__).parent / "scenarios" / "nvml"

#: Xid 154 as the driver writes it (the issue quotes it; NVIDIA's Xid catalog: "GPU recovery action changed").
XID_154 = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"


def _raw_catalog() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(resources.files("gpucheck").joinpath("data/catalog.json").read_text("utf-8"))
    return raw


def test_every_cause_of_the_catalog_names_a_valid_action() -> None:
    causes = _raw_catalog()["causes"]
    without = [cid for cid, c in causes.items() if "action" not in c]
    assert without == [], f"catalog causes without an action: {without}"
    invalid = {cid: c["action"] for cid, c in causes.items() if c["action"] not in ACTIONS}
    assert invalid == {}, f"actions not among {ACTIONS}: {invalid}"
    # The loader keeps them (a cause read without its action would silently be "none").
    assert {cid: c.action for cid, c in catalog().causes.items()} == {cid: c["action"] for cid, c in causes.items()}


def test_the_schema_and_the_code_agree_on_the_actions() -> None:
    schema = report_schema()
    assert tuple(schema["$defs"]["action"]["enum"]) == ACTIONS
    assert "action" in schema["required"]
    assert "action" in schema["$defs"]["finding"]["required"]


@pytest.mark.parametrize(
    ("cause", "action"),
    [
        # The cases the issue names, each as NVIDIA's guidance has it.
        ("driver-not-loaded", "reconfigure"),
        ("gpu-lost", "reboot"),  # Xid 79: RESTART_BM first, support when it recurs
        ("ecc-errors", "reset-gpu"),  # Xid 48 / 63: a reset retires the page or remaps the row
        ("gpu-memory-exhausted", "stop-processes"),
        ("driver-library-mismatch", "reboot"),
        ("driver-minor-version-compat", "none"),  # a note that something works
    ],
)
def test_defaults_of_named_causes(cause: str, action: str) -> None:
    f = finding(cause, Severity.BLOCKER, summary="s", cause="c", remedy="r")
    assert f.action == action
    assert f.to_json()["action"] == action


def test_notes_recommend_nothing() -> None:
    """A cause whose meaning says it is a note or advice (info) asks automation for nothing."""
    notes = [c for c in catalog().causes.values() if c.meaning.startswith(("note", "info", "advice"))]
    assert len(notes) >= 5
    assert {c.id: c.action for c in notes if c.action != "none"} == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (XID_154, "reboot"),
        ("0x1 (GPU Reset Required)", "reset-gpu"),
        ("GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)", "none"),
        ("Drain P2P", "stop-processes"),
        ("Drain and Reset", "reset-gpu"),
        ("service-hardware", "service-hardware"),
        (2, "reboot"),
        (4, "reset-gpu"),
        ("7", "reboot"),
        ([1, 2, 0], "reboot"),
        ({"code": 1}, "reset-gpu"),
        ("something else", None),
        (99, None),
        (True, None),
        (None, None),
    ],
)
def test_recovery_action_as_the_driver_and_nvml_give_it(value: Any, expected: str | None) -> None:
    assert recovery_action(value) == expected


def test_nvml_numbers_are_actions() -> None:
    assert set(NVML_RECOVERY_ACTIONS.values()) <= set(ACTIONS)


def test_evidence_raises_the_action_and_never_lowers_it() -> None:
    raised = finding("gpu-lost", Severity.BLOCKER, summary="s", cause="c", remedy="r",
                     evidence={"recovery_action": "service-hardware"})
    assert raised.action == "service-hardware"
    xid = finding("ecc-errors", Severity.DEGRADED, summary="s", cause="c", remedy="r",
                  evidence={"recovery_action": XID_154})
    assert xid.action == "reboot"
    # NVML saying "none" (0) does not lower the catalog's reset for an uncorrectable ECC error.
    assert finding("ecc-errors", Severity.DEGRADED, summary="s", cause="c", remedy="r",
                   evidence={"recovery_action": 0}).action == "reset-gpu"
    assert raised_action("reboot", {"recovery_action": "0x1 (GPU Reset Required)"}) == "reboot"
    assert raised_action("none", {}) == "none"


def test_most_severe_follows_the_order() -> None:
    assert most_severe([]) == "none"
    assert most_severe(["reboot", "reconfigure", "reset-gpu"]) == "reboot"
    for lower, higher in itertools.pairwise(ACTIONS):
        assert most_severe([higher, lower]) == higher


def test_failure_text_names_the_action() -> None:
    f = finding("gpu-memory-exhausted", Severity.BLOCKER, summary="s", cause="c", remedy="stop them")
    lines = failure_text(f).splitlines()
    assert lines[-2:] == ["  remedy: stop them", "  action: stop-processes"]


def _scenario(name: str) -> dict[str, Any]:
    scenario: dict[str, Any] = json.loads((NVML_SCENARIOS / f"{name}.json").read_text())
    return scenario


def test_report_terminal_and_junit_carry_the_action(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun], pytester: pytest.Pytester
) -> None:
    """Another process holds 75 of 80 GB: gpu-memory-exhausted, whose action is to stop processes, in the report
    (which run_gpucheck validates against the schema), at the top of it, on the terminal and in JUnit."""
    scenario = _scenario("another-process-holds-75gb")
    fake_machine(scenario)
    xml = pytester.path / "junit.xml"
    run = run_gpucheck("--gpucheck-framework=none", f"--junitxml={xml}", *scenario.get("args", []))
    exhausted = run.finding("gpu-memory-exhausted")
    assert exhausted["action"] == "stop-processes"
    assert all(f["action"] in ACTIONS for f in run.report["findings"])
    assert run.report["action"] == most_severe(f["action"] for f in run.report["findings"])
    assert run.report["action"] == "stop-processes"
    run.result.stdout.fnmatch_lines(["*remedy:*", "*action: stop-processes*", "recommended action: stop-processes"])
    root = ET.parse(xml).getroot()
    suite_props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert suite_props["gpucheck.action"] == "stop-processes"
    failing = [tc for tc in root.iter("testcase") if tc.find("failure") is not None]
    props = [{p.get("name"): p.get("value") for p in tc.iter("property")} for tc in failing]
    assert {"gpucheck.finding": "gpu-memory-exhausted", "gpucheck.action": "stop-processes"}.items() <= next(
        p for p in props if p.get("gpucheck.finding") == "gpu-memory-exhausted"
    ).items()


def test_a_healthy_node_recommends_nothing(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    scenario = _scenario("h100-sxm-8gpu-node")
    fake_machine(scenario)
    run = run_gpucheck("--gpucheck-framework=none", *scenario.get("args", []))
    assert run.report["verdict"] == "accelerated", run.finding_ids
    assert run.report["action"] == "none"
    assert "recommended action" not in run.result.stdout.str()
