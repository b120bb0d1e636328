"""One id, one cause, at one severity (DESIGN.md), through the real command
line on fake machines: a note about a machine that works has an id of its own, never the id of the
fault it is not, since fleets count ids.

- Defect 7: a 550 driver (CUDA 12.4) runs TensorFlow 2.21's CUDA 12.5.1 under minor version
  compatibility: ``driver-minor-version-compat`` (info), never ``driver-too-old``.
- Defect 8: two GPUs TensorFlow uses without peer-to-peer access are named with what it costs
  (``p2p-unavailable-note``, info) even when nothing says they must cooperate; ``p2p-unavailable``
  (degraded) stays the fault of GPUs meant to work together.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.causepage import literal_severities
from gpucheck.model import catalog

SCENARIOS = Path(__file__).parent / "scenarios"


def load(name: str) -> dict[str, Any]:
    data = json.loads((SCENARIOS / name).read_text())
    assert isinstance(data, dict)
    return data


def severities(run: GpucheckRun, finding_id: str) -> set[str]:
    return {f["severity"] for f in run.report["findings"] if f["id"] == finding_id}


def test_two_geforce_cards_without_p2p_get_the_note(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    fake_machine(load("nvml/rtx4090-workstation.json"))
    run = run_gpucheck("--gpucheck-framework=none")
    assert run.result.ret == 0, run.result.stdout.str()
    assert run.report["verdict"] == "accelerated"
    assert "p2p-unavailable" not in run.finding_ids
    note = run.finding("p2p-unavailable-note")
    assert note["severity"] == "info" and note["layer"] == "health"
    assert "every all-reduce of MirroredStrategy" in note["summary"] and "host memory" in note["summary"]
    assert note["evidence"]["gpus_used"] == [0, 1]
    assert note["evidence"]["pairs"][0]["p2p_read"] == "GPU not supported"


def test_one_visible_gpu_needs_no_p2p(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    scenario = load("nvml/rtx4090-workstation.json")
    scenario.setdefault("env", {})["CUDA_VISIBLE_DEVICES"] = "1"
    fake_machine(scenario)
    run = run_gpucheck("--gpucheck-framework=none")
    assert "p2p-unavailable-note" not in run.finding_ids and "p2p-unavailable" not in run.finding_ids


def test_gpus_meant_to_cooperate_get_the_fault_not_the_note(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    fake_machine(load("nvml/rtx4090-workstation.json"))
    run = run_gpucheck("--gpucheck-framework=none", "--gpucheck-expect-gpus=2")
    assert severities(run, "p2p-unavailable") == {"degraded"}
    assert "p2p-unavailable-note" not in run.finding_ids
    assert run.report["verdict"] == "degraded"


def test_driver_under_minor_version_compatibility_is_not_driver_too_old(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """The T4 cloud VM on driver 550.54.15 (CUDA 12.4) under TensorFlow 2.21 (CUDA 12.5.1)."""
    scenario = load("nvml/t4-cloud-vm.json")
    assert scenario.get("driver_version", "550.54.15") == "550.54.15"
    fake_machine(scenario)
    run = run_gpucheck()
    assert "driver-too-old" not in run.finding_ids, run.finding("driver-too-old")
    note = run.finding("driver-minor-version-compat")
    assert note["severity"] == "info" and note["layer"] == "compatibility"
    assert "minor version compatibility" in note["summary"]


@pytest.mark.parametrize("finding_id", ["driver-minor-version-compat", "p2p-unavailable-note"])
def test_the_notes_are_in_the_catalog_as_notes(finding_id: str) -> None:
    cause = catalog().causes[finding_id]
    assert cause.meaning.startswith("note (info): ")


# --- every info finding the rules emit (static: the calls of gpucheck.model.finding) ----------------

GPUCHECK = Path(__file__).parent.parent / "gpucheck"

#: Ids emitted both as a note and as a fault that this change could not split, with why. Fixing one
#: means deleting its line here.
KNOWN: dict[str, set[str]] = {}


def emitted_severities() -> dict[str, set[str]]:
    """id -> the severities the code and the log patterns give it, where they are written out."""
    out: dict[str, set[str]] = {}
    for path in sorted(GPUCHECK.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "finding"):
                continue
            if len(node.args) < 2 or not isinstance(node.args[0], ast.Constant):
                continue
            severities = literal_severities(node.args[1])
            if severities is not None:
                out.setdefault(str(node.args[0].value), set()).update(severities)
    patterns = json.loads((GPUCHECK / "data" / "log_patterns.json").read_text())
    for p in patterns["patterns"] if isinstance(patterns, dict) else patterns:
        if p.get("finding"):
            out.setdefault(p["finding"], set()).add(p["severity"])
    return out


def test_no_note_uses_the_id_of_a_fault() -> None:
    """Issue 12, defect 7, for every rule module: an id emitted as info is never emitted as a fault."""
    seen = emitted_severities()
    assert seen["driver-minor-version-compat"] == {"info"} and seen["driver-too-old"] == {"blocker"}
    assert seen["p2p-unavailable-note"] == {"info"} and seen["p2p-unavailable"] == {"degraded"}
    mixed = {fid: sev for fid, sev in seen.items() if "info" in sev and sev != {"info"}}
    assert mixed == KNOWN
