"""The NVML layer on fake machines, through the full ``pytest --gpucheck`` path.

The table is tests/scenarios/nvml/*.json: adding a case is adding a file. A scenario describes the
machine (``host``, ``libraries``, ``cuda``, ``gpus``, ``links``, ``nvml``; keys documented at the top of
tests/fakes/libnvidia-ml.c) and what the report must say (``expect``):

- ``root_cause``: the root cause on the machine the scenario models (a degraded machine's is its lowest degraded
  fault, DESIGN.md's report contract; null only for a healthy one). Real TensorFlow cannot drive a
  fake driver (no CUDA runtime here, no GPU behind libcuda), so on every fake machine the layers in
  ``FAKE_WORLD_LAYERS`` break too; the root cause is judged without their findings, and the report's
  own root cause must be the expected one wherever that lies below them.
- ``findings`` / ``absent`` / ``once`` (exactly one finding of the id: no duplicates across rules),
  ``subjects`` (the GPUs a finding is about), ``severity``, ``evidence`` (a subset), ``summary``
  (a glob), ``remedy`` (a glob), ``facts`` (dotted paths into the report's facts), ``checks`` (a check's outcome and the
  finding ids it recorded, by node name), ``output`` (terminal lines, globs), ``max_seconds``.

Each scenario is diagnosed twice, two contracts: through the full path with TensorFlow (``test_scenario``,
whose run is shared with the tests here that read the same machine) and as a node's GPU stack alone
(``test_scenario_gpu_stack_alone``, --gpucheck-framework=none, without TensorFlow's two processes).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun, SharedRuns
from gpucheck.layers import LAYERS
from gpucheck.model import catalog
from tests.contracts import assert_one_red_line, assert_tensorflow_checks_not_checked

SCENARIO_DIR = Path(__file__).parent / "scenarios" / "nvml"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.json"))

#: Every finding id of the NVML layers (gpu-count-mismatch is --gpucheck-expect-gpus's).
ISSUE_FINDINGS = (
    "nvml-missing",
    "driver-library-mismatch",
    "driver-not-loaded",
    "gpu-lost",
    "mig-unaddressable",
    "compute-mode-prohibited",
    "gpu-memory-exhausted",
    "ecc-errors",
    "clocks-throttled",
    "pcie-link-degraded",
    "p2p-unavailable",
    "gpu-count-mismatch",
)

#: Layers that no fake machine can make healthy: TensorFlow needs a CUDA runtime and a real GPU to
#: register one and place ops on it.
FAKE_WORLD_LAYERS = frozenset({"libraries", "framework", "placement"})
#: Faults read off NVML alone (resources, health): they need the driver and the GPUs' visibility, not TensorFlow.
NVML_READINGS = frozenset({"gpu-memory-exhausted", "ecc-errors", "clocks-throttled", "pcie-link-degraded", "p2p-unavailable"})


def load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def effective_root_cause(report: dict[str, Any]) -> dict[str, Any] | None:
    """The report's root cause, judged without the findings of the layers only the fake world breaks: the lowest
    blocker, else the lowest degraded finding (DESIGN.md: a degraded verdict names its root cause too)."""
    layers = [entry["layer"] for entry in report["layers"]]
    for severity in ("blocker", "degraded"):
        found = [f for f in report["findings"] if f["severity"] == severity and f["layer"] not in FAKE_WORLD_LAYERS]
        if found:
            return min(found, key=lambda f: layers.index(f["layer"]) if f["layer"] in layers else -1)
    return None


def dig(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def check_outcomes(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["nodeid"].split("::")[-1]: c for c in report["checks"]}


def scenario_run(gpucheck_shared: SharedRuns, scenario: dict[str, Any]) -> GpucheckRun:
    """A scenario's run through the full path, shared (``gpucheck_shared``): -rs for the skips, -v for a line
    per check (test_per_gpu_checks_fail_only_for_their_gpu reads gpu-fallen-off-the-bus's)."""
    return gpucheck_shared.run("-rs", "-v", *scenario.get("args", []), scenario=scenario)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path, gpucheck_shared: SharedRuns) -> None:
    scenario = load(path)
    assert scenario.get("_source"), "every scenario cites the machine or report it models"
    expect = scenario["expect"]
    run = scenario_run(gpucheck_shared, scenario)
    elapsed = run.result.duration
    out = run.result.stdout.str()
    assert run.result.ret in (0, 1), out
    report = run.report
    assert report.get("complete") is True, out

    # The root cause: of the machine modelled, and the report's own where it lies below the fake world.
    rc = effective_root_cause(report)
    assert (rc["id"] if rc else None) == expect["root_cause"], [(f["id"], f["layer"], f["severity"]) for f in report["findings"]]
    actual = report["root_cause"]
    if rc is not None:
        assert actual is not None
        assert actual["id"] == rc["id"] or actual["layer"] in FAKE_WORLD_LAYERS, actual
    elif actual is not None:
        assert actual["layer"] in FAKE_WORLD_LAYERS, actual
    if actual is not None:
        assert_one_red_line(report)
        # docs/how-it-works.md ("Checks"): NVML's memory and health readings do not need TensorFlow, so above a root cause
        # that only the fake world breaks (TensorFlow's side) they are marked independent of it in the JSON.
        for f in report["findings"]:
            if f["id"] in NVML_READINGS and f["severity"] != "info":
                assert f["independent_of_root_cause"] is (actual["layer"] in FAKE_WORLD_LAYERS), (f["id"], actual["id"])

    ids = run.finding_ids
    for fid in expect.get("findings", []):
        assert fid in ids, (fid, ids)
    for fid in expect.get("absent", []):
        assert fid not in ids, (fid, run.finding(fid))
    for fid in expect.get("once", []):
        assert ids.count(fid) == len(expect.get("subjects", {}).get(fid, [None])), (fid, ids)
    for fid, subjects in expect.get("subjects", {}).items():
        assert sorted(f.get("subject") for f in report["findings"] if f["id"] == fid) == sorted(subjects)
    for fid, severity in expect.get("severity", {}).items():
        assert {f["severity"] for f in report["findings"] if f["id"] == fid} == {severity}, fid
    for fid, fields in expect.get("evidence", {}).items():
        evidence = run.finding(fid)["evidence"]
        for key, value in fields.items():
            assert evidence.get(key) == value, (fid, key, evidence)
    for fid, pattern in expect.get("summary", {}).items():
        summaries = [f["summary"] for f in report["findings"] if f["id"] == fid]
        assert any(fnmatch.fnmatch(s, pattern) for s in summaries), (pattern, summaries)
    for fid, pattern in expect.get("remedy", {}).items():
        remedies = [f["remedy"] for f in report["findings"] if f["id"] == fid]
        assert any(fnmatch.fnmatch(s, pattern) for s in remedies), (pattern, remedies)
    for key, value in expect.get("facts", {}).items():
        assert dig(report["facts"], key) == value, key

    checks = check_outcomes(report)
    for name, want in expect.get("checks", {}).items():
        assert name in checks, (name, sorted(checks))
        want = {"outcome": want} if isinstance(want, str) else want
        for key, value in want.items():
            assert checks[name][key] == value, (name, checks[name])
    run.result.stdout.fnmatch_lines(expect.get("output", []))
    if "max_seconds" in expect:
        # A "did not hang" bound (the fake's hung call sleeps forever), wide enough for a loaded 2-core machine's
        # TensorFlow start; not a speed target. The run's own wall time, not this test's wait for a shared run.
        assert elapsed < expect["max_seconds"], elapsed


def test_the_table_covers_every_finding_of_the_issue() -> None:
    """Every finding id of the NVML layers is expected from at least one scenario (each of which the run above
    proves), and every healthy scenario (one expecting no finding) proves them all absent."""
    scenarios = {p.stem: load(p)["expect"] for p in SCENARIOS}
    produced = {fid for e in scenarios.values() for fid in e.get("findings", [])}
    assert set(ISSUE_FINDINGS) <= produced, set(ISSUE_FINDINGS) - produced
    healthy = [name for name, e in scenarios.items() if not e.get("findings")]
    assert len(healthy) >= 4, healthy
    for name in healthy:
        assert set(ISSUE_FINDINGS) <= set(scenarios[name].get("absent", [])), name


def test_per_gpu_checks_fail_only_for_their_gpu(gpucheck_shared: SharedRuns) -> None:
    """A lost GPU fails test_gpu_reachable[GPU-2] alone; every per-GPU question is one item per GPU (the
    scenario's run of test_scenario, which has -v)."""
    run = scenario_run(gpucheck_shared, load(SCENARIO_DIR / "gpu-fallen-off-the-bus.json"))
    checks = check_outcomes(run.report)
    for question in ("test_gpu_reachable", "test_mig_addressable", "test_compute_mode_allows_work",
                     "test_memory_headroom", "test_memory_healthy", "test_clocks_not_throttled", "test_pcie_link_at_max"):
        assert {n for n in checks if n.startswith(question + "[")} == {f"{question}[GPU-{i}]" for i in range(4)}
    reachable = {n: c["outcome"] for n, c in checks.items() if n.startswith("test_gpu_reachable[")}
    assert reachable == {
        "test_gpu_reachable[GPU-0]": "passed",
        "test_gpu_reachable[GPU-1]": "passed",
        "test_gpu_reachable[GPU-2]": "failed",
        "test_gpu_reachable[GPU-3]": "passed",
    }
    # The other questions about the lost GPU are blocked by its loss; about the others, they are answered.
    assert checks["test_mig_addressable[GPU-2]"]["outcome"] == "skipped"
    assert checks["test_mig_addressable[GPU-1]"]["outcome"] == "passed"
    run.result.stdout.fnmatch_lines(["*::test_gpu_reachable[[]GPU-2[]] FAILED*"])


def test_min_free_memory_absolute_threshold(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """3.4 GiB free is short of the default 10% of 80 GiB, but enough when 2GiB is asked for; 20GiB
    asked for is 20 GiB required, and the finding names where the setting came from."""
    fake_machine(load(SCENARIO_DIR / "another-process-holds-75gb.json"))
    low = run_gpucheck("--gpucheck-min-free-memory=2GiB")
    assert "gpu-memory-exhausted" not in low.finding_ids
    high = run_gpucheck("--gpucheck-min-free-memory=20GiB")
    f = high.finding("gpu-memory-exhausted")
    assert f["evidence"]["required_free"] == 20 * 1024**3
    assert f["evidence"]["setting_from"] == "--gpucheck-min-free-memory"


@pytest.mark.parametrize(
    ("args", "env", "names"),
    [
        (["--gpucheck-min-free-memory=lots"], {}, ["--gpucheck-min-free-memory", "'lots'"]),
        (["--gpucheck-expect-gpus=-2"], {}, ["--gpucheck-expect-gpus", "'-2'"]),
        ([], {"GPUCHECK_MIN_FREE_MEMORY": "0%"}, ["--gpucheck-min-free-memory", "GPUCHECK_MIN_FREE_MEMORY"]),
        ([], {"GPUCHECK_EXPECT_GPUS": "eight"}, ["--gpucheck-expect-gpus", "GPUCHECK_EXPECT_GPUS"]),
    ],
    ids=["memory-lots", "gpus-negative", "memory-env-zero", "gpus-env-word"],
)
def test_bad_option_values_are_usage_errors(
    args: list[str],
    env: dict[str, str],
    names: list[str],
    run_gpucheck: Callable[..., GpucheckRun],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    run = run_gpucheck(*args)
    assert run.result.ret == pytest.ExitCode.USAGE_ERROR
    err = run.result.stderr.str()
    for name in names:
        assert name in err, err


def test_without_bindings_the_ctypes_probe_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """A broken nvidia-ml-py install (here: a `pynvml` module that fails to import, first on the path)
    still gives the driver version and the GPU count through our own ctypes calls, and says why."""
    import subprocess
    import sys

    fake_machine(load(SCENARIO_DIR / "t4-cloud-vm.json"))
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pynvml.py").write_text("raise ImportError('broken install')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    out = tmp_path / "facts.json"
    subprocess.run(
        [sys.executable, "-m", "gpucheck.probes.child", "gpucheck.probes.nvml:probe_nvml", str(out)], check=True, timeout=60
    )
    facts = json.loads(out.read_text())
    assert facts["bindings"] == "nvidia-ml-py cannot be imported: ImportError: broken install"
    assert facts["init"]["code"] == 0 and facts["device_count"] == 1
    assert facts["driver_version"] and facts["gpus"] == []


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_gpu_stack_alone(
    path: Path,
    fake_machine: Callable[[dict[str, Any]], Path],
    run_gpucheck: Callable[..., GpucheckRun],
    tmp_path: Path,
) -> None:
    """With --gpucheck-framework=none (a node's health without TensorFlow) nothing of the fake world is
    left to set aside: the report's own root cause is the one of the machine modelled, exactly."""
    scenario = load(path)
    expect = scenario["expect"]
    fake_machine(scenario)
    junit = tmp_path / "junit.xml"
    run = run_gpucheck("--gpucheck-framework=none", f"--junitxml={junit}", *scenario.get("args", []))
    report = run.report
    assert report.get("complete") is True, run.result.stdout.str()
    # A cause only the framework's build can show (driver-too-old for TensorFlow's CUDA) is not looked for.
    wanted = expect["root_cause"]
    if wanted is not None and catalog().causes[wanted].layer in {layer.name for layer in LAYERS if layer.framework}:
        wanted = None
        assert expect["root_cause"] not in run.finding_ids
    assert run.root_cause == wanted, [(f["id"], f["layer"]) for f in report["findings"]]
    assert run.result.ret == (1 if any(c["outcome"] == "failed" for c in report["checks"]) else 0)
    assert (run.result.ret == 1) == (wanted is not None or any(f["severity"] == "degraded" for f in report["findings"]))
    for fid in expect.get("findings", []):
        assert fid in run.finding_ids, (fid, run.finding_ids)
    for fid in expect.get("absent", []):
        assert fid not in run.finding_ids, fid
    assert report["facts"]["framework"] is None and report["facts"]["placement"] is None
    # No TensorFlow process at all: memory growth is a framework question too.
    assert report["facts"]["memory_growth"] is None and report["facts"]["cuda_malloc_async"] is None
    assert report["facts"]["not_run"]["memory-growth"] == "--gpucheck-framework=none"
    states = {entry["layer"]: entry["state"] for entry in report["layers"]}
    assert {states[layer] for layer in ("compatibility", "libraries", "framework", "placement")} == {"not checked"}
    # "Not checked" is never "passed": every check whose question needs TensorFlow is skipped, saying why.
    tensorflow_checks = assert_tensorflow_checks_not_checked(report, junit)
    assert {"test_tensorflow_registers_gpus", "test_cudnn_loads", "test_xla_toolchain_found"} <= set(tensorflow_checks)
    if wanted is not None:
        assert_one_red_line(report)
