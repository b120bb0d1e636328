"""Issue 36, acceptance point 1, for real: in an environment with the torch CPU wheel and no TensorFlow, a plain
`pytest --gpucheck` on this host (no GPU, no driver) diagnoses PyTorch by default, names the root cause
`no-nvidia-gpu`, says in its header that PyTorch 2.13.0 is a CPU-only build, reports PyTorch's facts and layer states,
and has no TensorFlow `framework-missing`.

The environment (``torch_python``, conftest.py, made by ``tests/pyenvs.py``) is a venv of its own with torch and
gpucheck's own requirements, made once per cache, never this one: installed here, torch would make every
`pytest --gpucheck` of the suite diagnose two frameworks (the default is every installed framework). gpucheck itself
comes from this checkout, as an installed distribution would bring it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.pyenvs import REQUIREMENTS, ROOT, checkout_environment

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


#: One benchmark of each kind PyTorch measures on the CPU, and the kinds it does not measure (one skipped item each).
TORCH_BENCHMARKS = {
    "test_matmul[CPU:0-float32]": "matmul",
    "test_copy[CPU:0-host]": "copy",
    "test_conv[CPU:0-float32]": "conv",
    "test_launch[CPU:0-eager]": "launch",
    "test_allreduce[CPU-x2]": "allreduce",
}


def test_pytorch_benchmarks_on_the_cpu(torch_python: Path, tmp_path: Path) -> None:
    """Issue 36 point 4: `pytest --gpucheck --gpucheck-framework=torch --gpucheck-benchmarks`, one benchmark of each
    kind, measured for real by torch's benchmark child on this host's CPU (the all-reduce across two gloo processes),
    each with its real rounds; ``machine_info["gpucheck"]`` names torch, its CUDA and its cuDNN (none: the CPU wheel)."""
    project = tmp_path / "project"
    project.mkdir()
    bench = tmp_path / "bench.json"
    report = tmp_path / "report.json"
    select = "(CPU:0-float32 and (test_matmul or test_conv)) or CPU:0-host or CPU:0-eager or CPU-x2 or not-measured"
    done = subprocess.run(
        [str(torch_python), "-m", "pytest", "--gpucheck", "--gpucheck-framework=torch", "--gpucheck-benchmarks",
         f"--gpucheck-json={report}", f"--benchmark-json={bench}", "-p", "no:cacheprovider", "-rs", "-k", select],
        cwd=project, env=checkout_environment(tmp_path / "site"), capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1 and bench.exists(), out[-4000:]  # 1: the host's verdict, not-accelerated
    got = {b["name"]: b for b in json.loads(bench.read_text())["benchmarks"]}
    assert set(got) == set(TORCH_BENCHMARKS), (sorted(got), out[-3000:])
    for name, b in got.items():
        # Real per-round times: as many rounds as measured, all positive, not all equal.
        stats = b["stats"]
        assert stats["rounds"] >= 5 and stats["min"] > 0 and stats["max"] > stats["min"], (name, stats)
        assert b["extra_info"]["device"].startswith("cpu"), (name, b["extra_info"])
    machine = json.loads(bench.read_text())["machine_info"]["gpucheck"]
    assert machine["torch"] == "2.13.0+cpu" and machine["tensorflow"] is None, machine
    assert "torch_cuda_build" in machine and machine["torch_cuda_build"] is None and machine["torch_cudnn"] is None
    assert got["test_matmul[CPU:0-float32]"]["extra_info"]["shape"] == [1024, 1024, 1024]
    assert got["test_conv[CPU:0-float32]"]["extra_info"]["layout"] == "NCHW"
    allreduce = got["test_allreduce[CPU-x2]"]["extra_info"]
    assert allreduce["backend"] == "gloo" and allreduce["processes"] == 2 and allreduce["busbw_gbps"] > 0, allreduce
    # Measured by torch's child, and said so; the kinds it does not measure are skipped, each with why.
    perf = json.loads(report.read_text())["facts"]["performance"]
    assert perf["exit"]["status"] == "ok" and perf["facts"]["framework"] == "torch", perf["exit"]
    assert perf["facts"]["version"] == "2.13.0+cpu" and perf["facts"]["tensorflow"] is None
    for kind in ("matpow", "matpow_fallback", "scaling"):
        assert f"not measured: PyTorch's benchmarks do not include {kind}" in out, out[-3000:]
