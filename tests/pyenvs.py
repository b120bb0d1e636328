"""Environments of their own for the frameworks this suite's venv must not hold: a venv with the torch CPU wheel and no
TensorFlow (``torch_python``), and one with both (``torch_tf_python``, for the time to verdict with both installed,
only in the benchmark run); and the neighbours' (``neighbours_python``: other projects' requirements, for their own
suites beside gpucheck in tests/test_neighbours.py). Installed here, torch would make every `pytest --gpucheck` of the
suite diagnose two frameworks (the default is every installed framework).

Each is made once per interpreter and requirements under ``$XDG_CACHE_HOME/pytest-gpucheck``, in a folder of its own
renamed into place when complete. gpucheck itself comes from this checkout, as an installed distribution would bring
it: the checkout on ``PYTHONPATH`` and a ``.dist-info`` there naming its pytest11 entry point (``this_checkout``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import venv
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The CPU wheel (the local package registry serves 2.13.0+cpu), with what gpucheck needs to run (pyproject.toml's
#: dependencies, which tests/test_torch_session.py holds equal).
TORCH = "torch==2.13.0"
#: torch's CUDA build the local package registry serves, with its nvidia-*-cu13 wheels (pip brings them as its
#: dependencies): about 5.4 GB, for tests/test_torch_cuda_scenarios.py.
TORCH_CUDA = "torch==2.14.1"
#: The TensorFlow of this suite's own venv (pyproject.toml's ``tensorflow`` extra, the version the suite runs).
TENSORFLOW = "tensorflow==2.21.0"
REQUIREMENTS = ("pytest>=8", "pytest-benchmark>=4", "nvidia-ml-py>=12")
#: What the suite's runs in the torch venv need beyond gpucheck (the PyTorch sample project runs under ``-n 2``).
TEST_TOOLS = ("pytest-xdist>=3",)
INSTALL_TIMEOUT_S = 1800


def cached_venv(tag: str, packages: tuple[str, ...]) -> Path:
    """The interpreter of a venv with ``packages`` and gpucheck's requirements: made once per requirements and
    interpreter (``<tag>-<digest>``), its install time and size written beside it (``complete``)."""
    wanted = "\n".join((*packages, *REQUIREMENTS))
    digest = hashlib.sha256((wanted + sys.version).encode()).hexdigest()[:12]
    return _made_once(
        f"{tag}-{digest}", [*packages, *REQUIREMENTS], f"installing {' '.join(packages)} for a venv of its own", f"{wanted}\n"
    )


def _made_once(
    name: str, pip_args: list[str], what: str, record: str, prepare: Callable[[Path], None] | None = None
) -> Path:
    """The interpreter of the venv ``name`` under ``$XDG_CACHE_HOME/pytest-gpucheck`` (``~/.cache``): made once, in a
    folder of its own renamed into place when complete (``prepare(folder)`` after the venv, then ``pip install
    pip_args``), with ``record``, its install time and size written beside it (``complete``). ``what``: the install, in
    the sentence of a failure."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-gpucheck"
    home = cache / name
    if (home / "complete").exists():
        return home / "bin" / "python"
    cache.mkdir(parents=True, exist_ok=True)
    building = cache / f".{name}-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    began = time.monotonic()
    venv.EnvBuilder(with_pip=True).create(building)
    if prepare is not None:
        prepare(building)
    done = subprocess.run(
        [str(building / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pip_args],
        capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False, env=_pip_environment(),
    )
    if done.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        pytest.fail(f"{what} failed (pip needs its index):\n{(done.stdout + done.stderr)[-3000:]}", pytrace=False)
    size = sum(p.stat().st_size for p in building.rglob("*") if p.is_file() and not p.is_symlink())
    (building / "complete").write_text(f"{record}# installed in {time.monotonic() - began:.0f} s, {size / 2**20:.0f} MiB\n")
    try:
        building.rename(home)
    except OSError:  # another process completed it first
        shutil.rmtree(building, ignore_errors=True)
    return home / "bin" / "python"


#: The requirements of the other projects whose own suites tests/test_neighbours.py runs beside gpucheck.
NEIGHBOURS_REQUIREMENTS = ROOT / "tests" / "neighbours" / "requirements.txt"


def neighbours_python() -> Path:
    """The interpreter of the neighbours' environment (tests/test_neighbours.py): a venv whose site-packages hold the
    projects' requirements and then, through a ``.pth`` line, this environment's (pytest, pytest-gpucheck as installed,
    TensorFlow...). Made once per requirements file and this environment (its site-packages' path is in the digest),
    under ``$XDG_CACHE_HOME/pytest-gpucheck`` (``~/.cache``), in a folder of its own renamed into place when complete;
    by the README's install step (``python -m tests.pyenvs``), so that the test command does not pay pip's time."""
    ours = sysconfig.get_paths()["purelib"]
    requirements = NEIGHBOURS_REQUIREMENTS.read_bytes()
    digest = hashlib.sha256(requirements + ours.encode() + sys.version.encode()).hexdigest()[:12]

    def after_ours(building: Path) -> None:
        # After the venv's own site-packages: what the projects need comes from there, the rest from this environment.
        [site] = (building / "lib").glob("python*/site-packages")
        (site / "zz-gpucheck-project.pth").write_text(f"import site; site.addsitedir({ours!r})\n")

    return _made_once(
        f"neighbours-{digest}", ["-r", str(NEIGHBOURS_REQUIREMENTS)],
        f"installing {NEIGHBOURS_REQUIREMENTS.name} for the neighbours' suites", requirements.decode(), after_ours,
    )


def _pip_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET")}


def this_checkout(site: Path) -> Path:
    """This checkout as an installed pytest-gpucheck: a ``.dist-info`` whose pytest11 entry point names the plugin,
    beside the checkout on ``PYTHONPATH``."""
    info = site / "pytest_gpucheck-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-gpucheck\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\npytest_gpucheck = pytest_gpucheck\n")
    return site


def checkout_environment(site: Path, *first: Path) -> dict[str, str]:
    """The environment of a run of this checkout's gpucheck in a venv of its own: this session's, without pytest's,
    gpucheck's or coverage's variables, with the folders ``first``, then ``this_checkout(site)`` and the checkout on
    ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GPUCHECK_", "COV_"))}
    env.update(PYTHONPATH=os.pathsep.join(str(p) for p in (*first, this_checkout(site), ROOT)), PYTHONDONTWRITEBYTECODE="1")
    return env


def torch_python() -> Path:
    """The venv with the torch CPU wheel, no TensorFlow, and pytest-xdist (the PyTorch sample project runs under -n 2)."""
    return cached_venv("torch", (TORCH, *TEST_TOOLS))


def torch_tf_python() -> Path:
    """The venv with both the torch CPU wheel and TensorFlow (the benchmark run's time to verdict with both installed)."""
    return cached_venv("torch-tf", (TORCH, TENSORFLOW))


def torch_cuda_python() -> Path:
    """The venv with torch's CUDA build (``TORCH_CUDA``), no TensorFlow, and pytest-xdist: what runs against the fakes."""
    return cached_venv("torch-cuda", (TORCH_CUDA, *TEST_TOOLS))


if __name__ == "__main__":
    # `python -m tests.pyenvs`: make the four venvs now (the README's and CI's install step), so that the test command
    # does not pay their install; each is made once per cache and reused after.
    for made in (torch_python(), torch_tf_python(), torch_cuda_python(), neighbours_python()):
        print(made, (made.parent.parent / "complete").read_text().splitlines()[-1])
