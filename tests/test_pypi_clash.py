"""Issue 33: the unrelated PyPI package ``gpucheck`` beside pytest-gpucheck is named, not suffered.

That package (``tests/data/pypi-gpucheck/SOURCE.md``: the real wheel of gpucheck 0.1.0, its URL, sha256 and licence)
installs the same import package, ``gpucheck/``, and a pytest11 entry point of the same name. Here pip installs it and
pytest-gpucheck's wheel (built from this tree) into a virtual environment of the test's own, in both orders, then
uninstalls it again: in each state ``pytest --gpucheck`` and the ``gpucheck`` command stop with one sentence, what
happened and the fix, and a non-zero exit with no traceback; a pytest run without ``--gpucheck`` passes with that
sentence as a warning. Then the fix itself is run, and pytest-gpucheck works again (``-p no:gpucheck`` still turns it
off).

Offline and quick: both wheels are installed with ``--no-deps --no-index``, and the environment sees pytest and the
other package's requirements through a ``.pth`` file naming a folder of links to the running interpreter's copies.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import pytest_gpucheck

ROOT = Path(__file__).resolve().parent.parent
THEIRS = ROOT / "tests" / "data" / "pypi-gpucheck" / "gpucheck-0.1.0-py3-none-any.whl"
#: As PyPI lists it (https://pypi.org/simple/gpucheck/) and SOURCE.md records it.
THEIRS_SHA256 = "9921501e65087055ae3547d15021a67dc95d9e1d2bb0555fe39ae9fe7a24645e"
FIX = "run `pip uninstall -y gpucheck pytest-gpucheck && pip install pytest-gpucheck`"
#: What the commands in the environment must not inherit from this run.
DROPPED = ("PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "VIRTUAL_ENV")


def both_installed(site: Path) -> str:
    return (
        f"gpucheck: the PyPI package `gpucheck` 0.1.0 (an unrelated pytest plugin for GPU kernels) is installed in "
        f"{site} beside pytest-gpucheck and installs the same import package: the one installed second overwrote the "
        f"other's __init__.py and plugin.py in {site / 'gpucheck'}, and the two cannot share an environment; {FIX}"
    )


def files_gone(site: Path) -> str:
    return (
        f"gpucheck: pytest-gpucheck is installed but its __init__.py and plugin.py in {site / 'gpucheck'} are gone, as "
        "after `pip uninstall gpucheck` of the PyPI package `gpucheck` (an unrelated pytest plugin for GPU kernels), "
        f"which installs the same files: {FIX}"
    )


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest-gpucheck's wheel, built by setuptools from a copy of this tree (a build writes into its source)."""
    setuptools = importlib.metadata.version("setuptools")
    assert int(setuptools.split(".")[0]) >= 77, (
        f"setuptools {setuptools} cannot build the wheel (PEP 639 licence): the test extra's setuptools>=77 can"
    )
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "pytest_gpucheck.py"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "gpucheck", source / "gpucheck", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("pytest_gpucheck-*.whl")
    return wheel


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Links to this interpreter's pytest and the other package's requirements (numpy, rich: its METADATA), with
    their dependencies: what its plugin and ours import."""
    with zipfile.ZipFile(THEIRS) as wheel:
        metadata = wheel.read("gpucheck-0.1.0.dist-info/METADATA").decode()
    wanted = ["pytest"] + [
        Requirement(line.split(":", 1)[1]).name for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    folder = tmp_path_factory.mktemp("view")
    seen: set[str] = set()
    while wanted:
        dist = importlib.metadata.distribution(wanted.pop())
        name = dist.metadata["Name"].lower()
        if name in seen:
            continue
        seen.add(name)
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}:
            target = Path(str(dist.locate_file(top)))
            if target.exists() and not (folder / top).exists():
                (folder / top).symlink_to(target)
    return folder


@dataclass
class Env:
    """A virtual environment of the test's own."""

    root: Path
    work: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def site(self) -> Path:
        return self.root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

    def pip(self, *args: str | Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(self.python), "--disable-pip-version-check", "-q", *map(str, args)],
            capture_output=True, text=True, timeout=300, check=False, env=_environ(),
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def install(self, wheel: Path) -> None:
        self.pip("install", "--no-deps", "--no-index", "--no-compile", wheel)

    def run(self, *args: str, cwd: Path | None = None) -> tuple[int, str]:
        done = subprocess.run(
            [*args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd or self.work, env=_environ()
        )
        return done.returncode, done.stdout + done.stderr

    def pytest(self, *args: str, cwd: Path | None = None) -> tuple[int, str]:
        return self.run(str(self.python), "-m", "pytest", "-p", "no:cacheprovider", *args, cwd=cwd)

    def command(self, *args: str) -> tuple[int, str]:
        return self.run(str(self.root / "bin" / "gpucheck"), *args)


#: A test that passes when gpucheck's plugin is registered, once, under the name ``gpucheck``.
REGISTERED = """
def test_registered(request):
    manager = request.config.pluginmanager
    assert manager.get_plugin("gpucheck").__name__ == "gpucheck.plugin"
    assert [n for n, p in manager.list_name_plugin() if getattr(p, "__name__", "") == "gpucheck.plugin"] == ["gpucheck"]
"""

#: A test that passes when none of gpucheck's modules went through pytest's assertion rewriting: pytest marks every module
#: of an installed plugin's distribution, and where it cannot cache what it rewrote (PYTHONDONTWRITEBYTECODE, or a
#: read-only site-packages) it rewrites them again at every start (pytest_gpucheck._not_rewritten).
NOT_REWRITTEN = """
import sys

from _pytest.assertion.rewrite import AssertionRewritingHook


def test_not_rewritten():
    ours = {n: m for n, m in sys.modules.items() if n == "gpucheck" or n.startswith("gpucheck.")}
    assert "gpucheck.plugin" in ours, sorted(ours)
    assert [n for n, m in ours.items() if isinstance(getattr(m, "__loader__", None), AssertionRewritingHook)] == []
"""


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in DROPPED and not k.startswith("GPUCHECK_")}


def _make(tmp_path: Path, view: Path) -> Env:
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120, env=_environ())
    env = Env(root, tmp_path / "work")
    assert env.site.is_dir(), env.site
    (env.site / "view.pth").write_text(f"{view}\n")
    env.work.mkdir()
    (env.work / "test_one.py").write_text("def test_one():\n    pass\n")
    (env.work / "test_registered.py").write_text(REGISTERED)
    (env.work / "test_not_rewritten.py").write_text(NOT_REWRITTEN)
    return env


def assert_named(env: Env, sentence: str) -> None:
    """`pytest --gpucheck` and the command stop with the sentence alone (pytest's usage error, 4; the command's 2);
    a run without --gpucheck passes, with the sentence as a warning (a usage error where warnings are errors)."""
    code, out = env.pytest("--gpucheck")
    assert (code, out.strip()) == (4, f"ERROR: {sentence}"), out
    code, out = env.pytest("--gpucheck-json=report.json", "test_one.py")
    assert (code, out.strip()) == (4, f"ERROR: {sentence}"), out
    code, out = env.command("--version")
    assert (code, out.strip()) == (2, sentence), out
    code, out = env.pytest("test_one.py")
    assert code == 0 and "1 passed" in out and f"PytestConfigWarning: {sentence}" in out, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    code, out = env.pytest("-W", "error::pytest.PytestConfigWarning", "test_one.py")  # a project's filterwarnings=error
    assert (code, out.strip()) == (4, f"ERROR: {sentence}"), out


def assert_fixed(env: Env, ours: Path) -> None:
    """The sentence's fix (our wheel standing in for PyPI's pytest-gpucheck) gives a working pytest-gpucheck."""
    env.pip("uninstall", "-y", "gpucheck", "pytest-gpucheck")
    env.install(ours)
    code, out = env.command("--version")
    assert (code, out.strip()) == (0, "gpucheck 0.1.0"), out
    code, out = env.pytest("--help")
    assert code == 0 and "--gpucheck-json" in out and "PyPI" not in out, out
    code, out = env.pytest("-p", "no:gpucheck", "--help")
    assert code == 0 and "--gpucheck" not in out, out
    code, out = env.pytest("test_one.py", "test_registered.py", "test_not_rewritten.py")
    assert code == 0 and "3 passed" in out and "warning" not in out, out


@pytest.mark.parametrize("first", ["pytest-gpucheck", "gpucheck"], ids=["ours-then-pypi", "pypi-then-ours"])
def test_both_orders_then_the_other_uninstalled(tmp_path: Path, view: Path, ours: Path, first: str) -> None:
    env = _make(tmp_path, view)
    for wheel in (ours, THEIRS) if first == "pytest-gpucheck" else (THEIRS, ours):
        env.install(wheel)
    assert_named(env, both_installed(env.site))
    env.pip("uninstall", "-y", "gpucheck")
    # It took pytest-gpucheck's two shared files with it, whichever came second; the rest of pytest-gpucheck stays.
    left = {p.name for p in (env.site / "gpucheck").glob("*.py")}
    assert "cli.py" in left and not left & set(pytest_gpucheck.SHARED_FILES), left
    assert_named(env, files_gone(env.site))
    assert_fixed(env, ours)


def test_another_gpucheck_first_on_sys_path(tmp_path: Path, view: Path, ours: Path) -> None:
    """pytest-gpucheck installed alone, and `python -m pytest` run from a folder with another `gpucheck` in it (as
    with an editable install of pytest-gpucheck and the PyPI package in site-packages)."""
    env = _make(tmp_path, view)
    env.install(ours)
    with zipfile.ZipFile(THEIRS) as wheel:
        wheel.extractall(env.work)
    found = env.work / "gpucheck"
    code, out = env.pytest("--gpucheck")
    sentence = (
        f"gpucheck: `import gpucheck` finds {found}, installed by the PyPI package `gpucheck` 0.1.0 (an unrelated pytest "
        f"plugin for GPU kernels), instead of pytest-gpucheck's {env.site / 'gpucheck'}: run `pip uninstall -y gpucheck` "
        "(pytest-gpucheck's own files are untouched)"
    )
    assert (code, f"ERROR: {sentence}") == (4, out.strip()), out
    shutil.rmtree(env.work / "gpucheck-0.1.0.dist-info")
    code, out = env.pytest("--gpucheck")
    sentence = (
        f"gpucheck: `import gpucheck` finds {found}, a package that is not pytest-gpucheck's ({env.site / 'gpucheck'}), "
        "so pytest-gpucheck stays off: take that folder off sys.path (PYTHONPATH, or `python -m pytest` run from its parent)"
    )
    assert (code, f"ERROR: {sentence}") == (4, out.strip()), out
    # The command is not run from there: its script's folder, not the working directory, starts sys.path.
    code, out = env.command("--version")
    assert (code, out.strip()) == (0, "gpucheck 0.1.0"), out


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_stale_copy_of_our_old_entry_point_beside_the_new_one(tmp_path: Path, view: Path, ours: Path, where: str) -> None:
    """pytest-gpucheck installed, and in view an egg-info older than this change, whose pytest11 entry point is the
    former `gpucheck = gpucheck.plugin` (what setuptools wrote from pyproject.toml before, as in this repository's own
    `pytest_gpucheck.egg-info` until it is rebuilt): before site-packages on sys.path (`python -m pytest` run from
    that source tree), or after it. Both entry points load, in either order, and the plugin is registered once, under
    `gpucheck`."""
    env = _make(tmp_path, view)
    env.install(ours)
    folder = env.work if where == "before" else tmp_path / "stale"
    egg = folder / "pytest_gpucheck.egg-info"
    egg.mkdir(parents=True)
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: pytest-gpucheck\nVersion: 0.1.0\n")
    (egg / "entry_points.txt").write_text("[console_scripts]\ngpucheck = gpucheck.cli:main\n\n[pytest11]\ngpucheck = gpucheck.plugin\n")
    if where == "after":
        (env.site / "stale.pth").write_text(f"{folder}\n")
    code, out = env.pytest("test_registered.py")
    assert code == 0 and "1 passed" in out, out


def test_the_wheels_share_exactly_the_files_the_check_looks_for(ours: Path) -> None:
    digest = hashlib.sha256(THEIRS.read_bytes()).hexdigest()
    assert digest == THEIRS_SHA256
    with zipfile.ZipFile(THEIRS) as theirs, zipfile.ZipFile(ours) as mine:
        shared = set(theirs.namelist()) & set(mine.namelist())
        assert shared == {f"gpucheck/{name}" for name in pytest_gpucheck.SHARED_FILES}
        their_entry_points = theirs.read("gpucheck-0.1.0.dist-info/entry_points.txt").decode()
        (ours_entry_points,) = [n for n in mine.namelist() if n.endswith(".dist-info/entry_points.txt")]
        our_entry_points = mine.read(ours_entry_points).decode()
    assert "[pytest11]\ngpucheck = gpucheck.plugin" in their_entry_points
    # A pytest11 name of our own, which `-p no:gpucheck` blocks too (pytest blocks pytest_NAME with NAME).
    assert "[pytest11]\npytest_gpucheck = pytest_gpucheck" in our_entry_points
    assert "gpucheck = pytest_gpucheck:main" in our_entry_points


def test_the_wheel_carries_every_module_and_data_file(ours: Path) -> None:
    """pyproject.toml finds the packages (issue 34): every module and data file of gpucheck/ is in the built wheel,
    a unit added as a package of its own included (the hand-written list had to name each one)."""
    with zipfile.ZipFile(ours) as wheel:
        shipped = set(wheel.namelist())
    package = ROOT / "gpucheck"
    wanted = {
        p.relative_to(ROOT).as_posix() for p in package.rglob("*")
        if p.is_file() and p.suffix in (".py", ".json") and "__pycache__" not in p.parts
    }
    assert wanted and wanted - shipped == set(), sorted(wanted - shipped)
    assert "pytest_gpucheck.py" in shipped
