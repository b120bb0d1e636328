"""The environment the suite runs real PyTorch in: a venv of its own with the torch CPU wheel, gpucheck's requirements
and pytest-xdist, without TensorFlow, made once per interpreter and requirements under
``$XDG_CACHE_HOME/pytest-gpucheck`` (as tests/test_neighbours.py makes the neighbours'), never the suite's own:
installed there, torch would make every `pytest --gpucheck` of the suite diagnose two frameworks (the default is every
installed framework). gpucheck itself comes from this checkout, as an installed distribution would bring it: the
checkout on ``PYTHONPATH`` and a ``.dist-info`` there naming its pytest11 entry point (``checkout_environment``).

conftest.py's session fixture ``torch_python`` is :func:`torch_python`; the tests that use it
(tests/test_torch_session.py, tests/test_own_suites.py, tests/test_merge.py) are slow by that fixture.
tests/test_torch_cuda_scenarios.py makes its CUDA build's venv the same way (:func:`cached_venv`, :func:`build_venv`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The CPU wheel (the local package registry serves 2.13.0+cpu), with what gpucheck needs to run (pyproject.toml's
#: dependencies, which tests/test_torch_session.py holds equal) and what the sample project's run needs (xdist).
TORCH = "torch==2.13.0"
REQUIREMENTS = ("pytest>=8", "pytest-benchmark>=4", "nvidia-ml-py>=12")
TEST_TOOLS = ("pytest-xdist>=3",)
INSTALL_TIMEOUT_S = 900


def torch_python() -> Path:
    """The interpreter of a venv with the torch CPU wheel, gpucheck's requirements and ``TEST_TOOLS``, without
    TensorFlow: made once per requirements and interpreter (:func:`build_venv`)."""
    packages = (TORCH, *REQUIREMENTS, *TEST_TOOLS)
    return build_venv(cached_venv("torch", packages), packages)


def cached_venv(name: str, packages: tuple[str, ...]) -> Path:
    """Where the venv ``name`` with ``packages`` lives, per packages and interpreter (complete once it holds a file
    ``complete``)."""
    digest = hashlib.sha256(("\n".join(packages) + sys.version).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-gpucheck"
    return cache / f"{name}-{digest}"


def build_venv(home: Path, packages: tuple[str, ...], timeout: float = INSTALL_TIMEOUT_S) -> Path:
    """``home``'s interpreter, installed first with ``packages`` where it is not complete: in a folder of its own
    renamed into place when complete; a failed install fails the test."""
    if (home / "complete").exists():
        return home / "bin" / "python"
    home.parent.mkdir(parents=True, exist_ok=True)
    building = home.with_name(f".{home.name}-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    venv.EnvBuilder(with_pip=True).create(building)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET")}
    done = subprocess.run(
        [str(building / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        pytest.fail(f"installing {packages[0]} for the PyTorch tests failed (pip needs its index):\n"
                    f"{(done.stdout + done.stderr)[-3000:]}", pytrace=False)
    (building / "complete").write_text("\n".join(packages) + "\n")
    try:
        building.rename(home)
    except OSError:  # another process completed it first
        shutil.rmtree(building, ignore_errors=True)
    return home / "bin" / "python"


def this_checkout(site: Path) -> Path:
    """This checkout as an installed pytest-gpucheck: a ``.dist-info`` whose pytest11 entry point names the plugin,
    beside the checkout on ``PYTHONPATH``."""
    info = site / "pytest_gpucheck-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-gpucheck\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\npytest_gpucheck = pytest_gpucheck\n")
    return site


def checkout_environment(site: Path, *first: Path) -> dict[str, str]:
    """This process's environment without pytest's, gpucheck's and coverage's variables, with this checkout
    installed from ``site`` (:func:`this_checkout`), after the folders ``first`` on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GPUCHECK_", "COV_"))}
    env.update(PYTHONPATH=os.pathsep.join(str(p) for p in (*first, this_checkout(site), ROOT)), PYTHONDONTWRITEBYTECODE="1")
    return env
