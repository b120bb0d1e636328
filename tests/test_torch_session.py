"""Issue 36, acceptance point 1, for real: in an environment with the torch CPU wheel and no TensorFlow, a plain
`pytest --gpucheck` on this host (no GPU, no driver) diagnoses PyTorch by default, names the root cause
`no-nvidia-gpu`, says in its header that PyTorch 2.13.0 is a CPU-only build, reports PyTorch's facts and layer states,
and has no TensorFlow `framework-missing`.

The environment (conftest.py's ``torch_python``, tests/torchenv.py) is a venv of its own with torch and gpucheck's own
requirements, made once per cache, never this one; gpucheck itself comes from this checkout.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.torchenv import REQUIREMENTS, ROOT, checkout_environment

RUN_TIMEOUT_S = 300


def test_the_requirements_are_the_projects() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(REQUIREMENTS) == set(project["dependencies"])


def test_pytest_gpucheck_with_only_the_torch_cpu_wheel(torch_python: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = checkout_environment(tmp_path / "site")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [str(torch_python), "-m", "pytest", "--gpucheck", f"--gpucheck-json={report}", "-p", "no:cacheprovider",
         "-rs"],
        cwd=project, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1 and report.exists(), out[-4000:]
    headers = [line for line in out.splitlines() if line.startswith("gpucheck: ")]
    assert headers[0].endswith("; PyTorch 2.13.0+cpu (CPU-only build) sees 0 GPU(s)"), headers
    assert "TensorFlow" not in headers[0] and "gpucheck verdict: not-accelerated (root cause: no-nvidia-gpu)" in out
    data = json.loads(report.read_text())
    # Diagnosed by default, alone.
    assert data["settings"]["framework"] == {"value": "torch", "source": "default"}
    assert list(data["frameworks"]) == ["torch"]
    assert data["verdict"] == "not-accelerated" and data["root_cause"]["id"] == "no-nvidia-gpu"
    # PyTorch's facts, read by its child from the real wheel.
    child = data["facts"]["torch"]
    assert child["exit"]["status"] == "ok", child
    torch = child["facts"]
    assert torch["importable"] and torch["version"] == "2.13.0+cpu" and torch["cuda"] is None, torch
    assert torch["available"] is False and torch["device_count"] == 0 and torch["arch_list"] == []
    assert any(path.endswith("/libtorch_cpu.so") for path in torch["libraries"]), torch["libraries"]
    # Its layer states: the CPU-only wheel is the framework layer's fault, blocked below by the missing GPU.
    layers = {entry["layer"]: entry for entry in data["frameworks"]["torch"]["layers"]}
    assert layers["hardware"]["state"] == "broken" and layers["framework"]["state"] == "blocked"
    assert layers["framework"]["finding_ids"] == ["framework-cpu-only"]
    assert data["frameworks"]["torch"]["root_cause"] == "no-nvidia-gpu"
    # No word of TensorFlow's.
    assert {(f["id"], f.get("framework")) for f in data["findings"] if f.get("framework")} == {("framework-cpu-only", "torch")}
    assert "framework-missing" not in {f["id"] for f in data["findings"]}
    assert data["facts"]["framework"] is None and data["facts"]["not_run"]["framework"] == "--gpucheck-framework=torch"
    torch_checks = {c["nodeid"].split("::")[1]: c["outcome"] for c in data["checks"] if "checks_torch.py" in c["nodeid"]}
    assert torch_checks == dict.fromkeys(
        ("test_torch_build_runs_on_this_driver_and_gpus", "test_torch_importable", "test_torch_is_cuda_build",
         "test_torch_sees_gpus"), "skipped"), torch_checks
