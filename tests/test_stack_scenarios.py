"""The lower stack (hardware, kernel, driver, visibility) on fake machines, through the full
``pytest --gpucheck`` path. The table is tests/scenarios/stack/*.json: adding a case is adding a file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.blocking import layers_needed as requires
from tests.contracts import assert_one_red_line

SCENARIO_DIR = Path(__file__).parent / "scenarios" / "stack"
SHADOW_DIR = Path(__file__).parent / "shadow"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.json"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(
    path: Path,
    fake_machine: Callable[[dict[str, Any]], Path],
    run_gpucheck: Callable[..., GpucheckRun],
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = json.loads(path.read_text())
    assert scenario.get("_source"), "every scenario cites the machine or report it models"
    expect = scenario["expect"]
    fake_machine(scenario)
    for name, text in scenario.get("cwd_files", {}).items():
        (pytester.path / name).write_text(text)
    if "pythonpath" in scenario:
        monkeypatch.setenv("PYTHONPATH", str(SHADOW_DIR / scenario["pythonpath"]))
    run = run_gpucheck("-rs", *scenario.get("args", []))
    assert run.result.ret == expect["exit"], run.result.stdout.str()
    assert run.report["verdict"] == "not-accelerated"
    assert run.root_cause == expect["root_cause"]
    for fid in expect.get("findings", []):
        assert fid in run.finding_ids
    for fid in expect.get("absent", []):
        assert fid not in run.finding_ids
    for fid in expect.get("once", []):
        assert run.finding_ids.count(fid) == 1, (fid, run.finding_ids)
    for fid, fields in expect.get("evidence", {}).items():
        evidence = run.finding(fid)["evidence"]
        for key, value in fields.items():
            assert evidence.get(key) == value, (fid, key, evidence)
    run.result.stdout.fnmatch_lines(expect.get("output", []))
    # One red line: only the checks of the root cause's own question fail; every layer that needs the root
    # cause's layer is blocked (the needs graph: NVML's resources and health do not need TensorFlow).
    assert_one_red_line(run.report)
    rc_layer = run.report["root_cause"]["layer"]
    for entry in run.report["layers"]:
        if rc_layer in requires(entry["layer"]) and entry["state"] != "not checked":
            assert entry["state"] == "blocked", entry
