"""Issue 4 through the full ``pytest --gpucheck`` path: the CUDA driver's devices, the compatibility
layer and the libraries layer on fake machines, with the real TensorFlow 2.21 wheel in the probe child.

The table is tests/scenarios/cuda/*.json (each cites the report it models). Fake libcuda, libcudart,
libcudnn and the CUDA math libraries (tests/fakes/) are on LD_LIBRARY_PATH of the child, so our ctypes
code and TensorFlow itself load them.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun, SharedRuns, tensorflow_facts
from gpucheck.blocking import layers_needed as requires
from tests.contracts import assert_one_red_line

SCENARIO_DIR = Path(__file__).parent / "scenarios" / "cuda"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.json"))


def _framework_log(run: GpucheckRun) -> list[str]:
    framework = run.report["facts"].get("framework") or {}
    return list((framework.get("exit") or {}).get("stderr_tail") or [])


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path, gpucheck_shared: SharedRuns) -> None:
    """A scenario's run is shared (``gpucheck_shared``): tests/test_healthy_h100.py and tests/test_placement.py
    read the runs of h100-80gb-healthy, gpu-outputs-stay-zero and cuda-malloc-async-without-memory-pools too."""
    scenario = json.loads(path.read_text())
    assert scenario.get("_source"), "every scenario cites the machine or report it models"
    expect = scenario["expect"]
    run = gpucheck_shared.run("-rs", scenario=scenario)
    out = run.result.stdout.str()
    assert run.result.ret == expect["exit"], out
    assert run.report["verdict"] == expect["verdict"], out
    assert run.root_cause == expect["root_cause"], (run.finding_ids, out)
    for fid in expect.get("findings", []):
        assert fid in run.finding_ids, (fid, run.finding_ids)
    for fid in expect.get("absent", []):
        assert fid not in run.finding_ids, (fid, run.finding(fid))
    for fid, severity in expect.get("severity", {}).items():
        assert run.finding(fid)["severity"] == severity
    for fid, fields in expect.get("evidence", {}).items():
        evidence = run.finding(fid)["evidence"]
        for key, value in fields.items():
            assert evidence.get(key) == value, (fid, key, evidence)
    for fid, pattern in expect.get("summary", {}).items():
        assert fnmatch.fnmatch(run.finding(fid)["summary"], pattern), (pattern, run.finding(fid)["summary"])
    # Which of the things a finding looked for were found (its evidence names each with "found": a path or null).
    for fid, found in expect.get("evidence_found", {}).items():
        evidence = run.finding(fid)["evidence"]
        assert {name: evidence[name]["found"] is not None for name in found} == found, evidence
    for fid, fields in expect.get("evidence_contains", {}).items():
        evidence = run.finding(fid)["evidence"]
        for key, values in fields.items():
            assert set(values) <= set(evidence.get(key) or []), (fid, key, evidence)
    if "created_devices" in expect:
        # TensorFlow's own "Created device .../device:GPU:N ... pci bus id: X" lines, as the placement step read them.
        tf = tensorflow_facts(run.report)
        assert [list(d) for d in tf["created_devices"]] == expect["created_devices"], tf["created_devices"]
    log = _framework_log(run)
    for pattern in expect.get("tensorflow_log", []):
        assert any(fnmatch.fnmatch(line, pattern) for line in log), (pattern, log)
    # The TensorFlow child's own stderr went through the classifier `gpucheck explain` uses.
    if expect.get("log_means"):
        means = {m["means"] for m in run.finding("framework-gpu-init-failed")["evidence"]["tensorflow_log_means"]}
        assert set(expect["log_means"]) <= means, means
        assert "harmless" in means  # the oneDNN / cpu_feature_guard notices, recognised and left alone
    failed = {c["nodeid"].rsplit("::", 1)[-1] for c in run.report["checks"] if c["outcome"] == "failed"}
    for name in expect.get("failed_checks", []):
        assert name in failed, (name, failed)
    run.result.stdout.fnmatch_lines(expect.get("output", []))
    for pattern in expect.get("output_absent", []):
        run.result.stdout.no_fnmatch_line(pattern)
    if run.report["verdict"] == "not-accelerated":
        assert_one_red_line(run.report)
    # The root cause's layer is the lowest broken one; checked layers that need it are blocked (the needs
    # graph: NVML's resources and health readings do not need TensorFlow).
    rc_layer = run.report["root_cause"]["layer"]
    for entry in run.report["layers"]:
        if rc_layer in requires(entry["layer"]) and entry["state"] != "not checked":
            assert entry["state"] == "blocked", entry


def test_cuda_probe_reports_every_device(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """Per-device facts from the CUDA driver API: name, compute capability (cuDeviceGetAttribute 75/76),
    total memory, PCI bus id, UUID, and free memory seen from a context; a context that cannot be made
    is a fact (its call and code), not a crash."""
    fake_machine(
        {
            "host": {
                "pci": [
                    {"bus_id": "0000:3b:00.0", "device": "0x20b0", "driver": "nvidia"},
                    {"bus_id": "0000:d8:00.0", "device": "0x20b0", "driver": "nvidia"},
                ],
                "module_version": "555.42.06",
                "dev": ["nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"],
            },
            "driver_version": "555.42.06",
            "libraries": ["libcuda"],
            "cuda": {"driver_version": 12050},
            "gpus": [
                {"name": "NVIDIA A100-SXM4-40GB", "cc_major": 8, "cc_minor": 0, "memory_total": 42949672960,
                 "memory_used": 4294967296, "pci_bus_id": "00000000:3B:00.0",
                 "uuid": "GPU-2c4e5f6a-7b8c-9d0e-1f2a-3b4c5d6e7f80"},
                {"name": "NVIDIA A100-SXM4-40GB", "cc_major": 8, "cc_minor": 0, "memory_total": 42949672960,
                 "pci_bus_id": "00000000:D8:00.0", "uuid": "GPU-9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4", "ctx": 2},
            ],
        }
    )
    run = run_gpucheck()
    cuda = run.report["facts"]["cuda"]["facts"]
    first, second = cuda["devices"]
    assert (first["name"], first["cc_major"], first["cc_minor"]) == ("NVIDIA A100-SXM4-40GB", 8, 0)
    assert first["memory_total"] == 42949672960 and first["memory_free"] == 42949672960 - 4294967296
    assert first["pci_bus_id"] == "00000000:3B:00.0"
    assert first["uuid"] == "GPU-2c4e5f6a-7b8c-9d0e-1f2a-3b4c5d6e7f80"
    assert second["memory_free"] is None
    assert second["context_error"]["function"] == "cuDevicePrimaryCtxRetain"
    assert second["context_error"]["name"] == "CUDA_ERROR_OUT_OF_MEMORY"
    assert "gpu-arch-unsupported" not in run.finding_ids and "ptx-jit-compilation" not in run.finding_ids
