"""Issue 36, acceptance point 1, for real: in an environment with the torch CPU wheel and no TensorFlow, a plain
`pytest --gpucheck` on this host (no GPU, no driver) diagnoses PyTorch by default, names the root cause
`no-nvidia-gpu`, says in its header that PyTorch 2.13.0 is a CPU-only build, reports PyTorch's facts and layer states,
and has no TensorFlow `framework-missing`.

The environment (``torch_python``) is a venv of its own with torch and gpucheck's own requirements, made once per
interpreter and requirements under ``$XDG_CACHE_HOME/pytest-gpucheck`` (as tests/test_neighbours.py makes the
neighbours'), never this one: installed here, torch would make every `pytest --gpucheck` of the suite diagnose two
frameworks (the default is every installed framework). gpucheck itself comes from this checkout, as an installed
distribution would bring it: the checkout on ``PYTHONPATH`` and a ``.dist-info`` there naming its pytest11 entry point.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The CPU wheel (the local package registry serves 2.13.0+cpu), with what gpucheck needs to run (pyproject.toml's
#: dependencies, which a test below holds equal).
TORCH = "torch==2.13.0"
REQUIREMENTS = ("pytest>=8", "pytest-benchmark>=4", "nvidia-ml-py>=12")
INSTALL_TIMEOUT_S = 900
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def torch_python() -> Path:
    """The interpreter of a venv with the torch CPU wheel and gpucheck's requirements, without TensorFlow: made once
    per requirements and interpreter, in a folder of its own renamed into place when complete."""
    wanted = "\n".join((TORCH, *REQUIREMENTS))
    digest = hashlib.sha256((wanted + sys.version).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-gpucheck"
    home = cache / f"torch-{digest}"
    if (home / "complete").exists():
        return home / "bin" / "python"
    cache.mkdir(parents=True, exist_ok=True)
    building = cache / f".torch-{digest}-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    venv.EnvBuilder(with_pip=True).create(building)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET")}
    done = subprocess.run(
        [str(building / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", TORCH,
         *REQUIREMENTS],
        capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False, env=env,
    )
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        pytest.fail(f"installing {TORCH} for the PyTorch session failed (pip needs its index):\n"
                    f"{(done.stdout + done.stderr)[-3000:]}", pytrace=False)
    (building / "complete").write_text(wanted + "\n")
    try:
        building.rename(home)
    except OSError:  # another process completed it first
        shutil.rmtree(building, ignore_errors=True)
    return home / "bin" / "python"


def _this_checkout(site: Path) -> Path:
    """This checkout as an installed pytest-gpucheck: a ``.dist-info`` whose pytest11 entry point names the plugin,
    beside the checkout on ``PYTHONPATH``."""
    info = site / "pytest_gpucheck-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-gpucheck\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\npytest_gpucheck = pytest_gpucheck\n")
    return site


def test_the_requirements_are_the_projects() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(REQUIREMENTS) == set(project["dependencies"])


def test_pytest_gpucheck_with_only_the_torch_cpu_wheel(torch_python: Path, tmp_path: Path) -> None:
    site = _this_checkout(tmp_path / "site")
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GPUCHECK_", "COV_"))}
    env.update(PYTHONPATH=os.pathsep.join((str(site), str(ROOT))), PYTHONDONTWRITEBYTECODE="1")
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
