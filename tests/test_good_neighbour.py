"""Issue 33: installed beside other projects, gpucheck changes none of their own ``gpu`` tests unless the project
asks (``gpucheck_marker``), and where the marker is gpucheck's, the project's own skips come first.

The projects here are small, written in the shapes of real suites, each cited; the real suites themselves, as
released, run in tests/test_neighbours.py. Each run happens on the fake healthy H100
(tests/scenarios/cuda/h100-80gb-healthy.json, modelled on ../shared/machines/h100-80gb-driver-580), whose fake
libcuda logs every ``cuInit`` with its process's command line: a diagnosis is a line in that log, so "nothing
started" is an empty log.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpucheck import suite

HERE = Path(__file__).resolve().parent

#: A tier marker with a GPU count, 0 included, registered by the project (an inference server's end-to-end
#: suite marks each test with the runner tier it needs, ``gpu(0)`` to ``gpu(4)``; tests/test_neighbours.py
#: runs a real one). Its own ``skipif`` beside it, as dask/distributed's test_nvml.py writes it.
OWN_MARKER_TESTS = '''
import pytest

@pytest.mark.gpu(0)
def test_tier_zero():
    pass

@pytest.mark.gpu(2, vram="24G")
def test_tier_two():
    pass

@pytest.mark.gpu
@pytest.mark.skipif(True, reason="Less than two GPUs available")
def test_two_gpus():
    pass

@pytest.mark.gpu
def test_selected_for_the_gpu_runner():
    pass

def test_cpu():
    pass
'''

#: gpucheck's marker, and the project's own ways to skip: a ``skipif`` mark, ``importorskip`` in a fixture (as
#: zarr's ``cupy`` fixtures do), a fixture that skips, and a fixture that fails on a machine without a GPU.
OWN_SKIPS_TESTS = '''
import pytest

@pytest.fixture
def cupy():
    return pytest.importorskip("cupy_that_is_not_installed")

@pytest.fixture
def cuda_cluster():
    raise RuntimeError("no CUDA device to start a LocalCUDACluster on")

@pytest.fixture
def runslow(request):
    pytest.skip("need --runslow option to run")

@pytest.mark.gpu
@pytest.mark.skipif(True, reason="CuPy not installed or no GPU available")
def test_skipif():
    pass

@pytest.mark.gpu
def test_importorskip(cupy):
    pass

@pytest.mark.gpu
def test_fixture_skips(runslow):
    pass

@pytest.mark.gpu
def test_fixture_fails(cuda_cluster):
    pass

@pytest.mark.gpu
def test_would_run():
    pass
'''


def _outcomes(xml: Path) -> dict[str, tuple[str, str]]:
    """Each test case of a JUnit XML file: (outcome, skip or error message)."""
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name", "?")
        outcome, message = "passed", ""
        for tag in ("skipped", "failure", "error"):
            found = case.find(tag)
            if found is not None:
                outcome, message = tag, found.get("message", "")
                break
        out[name] = (outcome, message)
    return out


@pytest.fixture
def h100(fake_machine: Callable[[dict[str, Any]], Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake healthy H100, its cuInit log in pytester's folder."""
    fake_machine(json.loads((HERE / "scenarios" / "cuda" / "h100-80gb-healthy.json").read_text()))
    log = pytester.path / "cuinit.log"
    monkeypatch.setenv("GPUCHECK_FAKE_CUINIT_LOG", str(log))
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    return log


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, tuple[str, str]]]:
    xml = pytester.path / f"junit-{len(list(pytester.path.glob('junit-*.xml')))}.xml"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", f"--junitxml={xml}", *args, timeout=300)
    return result, _outcomes(xml) if xml.exists() else {}


def test_a_projects_own_gpu_marker_is_left_alone(pytester: pytest.Pytester, h100: Path) -> None:
    """Registered by the project (its ini file's ``markers``): its tests, its arguments (a count of 0, a keyword
    gpucheck does not know), its own skip reasons and its ``-m gpu`` selection are as without gpucheck; one
    line says why; no diagnosis starts, not even on a machine with a GPU."""
    pytester.makeini("[pytest]\nmarkers =\n    gpu: the runner tier's GPU count, 0 included\n")
    pytester.makepyfile(test_tiers=OWN_MARKER_TESTS)
    installed, with_plugin = _run(pytester)
    alone, without = _run(pytester, "-p", "no:gpucheck")
    assert with_plugin == without and len(with_plugin) == 5, (with_plugin, without)
    assert with_plugin["test_two_gpus"] == ("skipped", "Less than two GPUs available")
    assert installed.ret == alone.ret == 0
    installed.stdout.fnmatch_lines(["gpucheck: the `gpu` marker is this project's own * left its 4 test(s) alone; `gpucheck_marker = gpu`*"])
    assert "gpucheck" not in alone.stdout.str()
    assert "tests marked gpu" not in installed.stdout.str()
    selected = [pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q", "-m", "gpu", *extra)
                for extra in ((), ("-p", "no:gpucheck"))]
    assert selected[0].stdout.lines[:4] == selected[1].stdout.lines[:4]
    assert [line for line in selected[0].stdout.lines if "::" in line] == [
        "test_tiers.py::test_tier_zero", "test_tiers.py::test_tier_two", "test_tiers.py::test_two_gpus",
        "test_tiers.py::test_selected_for_the_gpu_runner",
    ]
    markers = pytester.runpytest_subprocess("--markers", "-p", "no:cacheprovider").stdout.lines
    assert [line for line in markers if line.startswith("@pytest.mark.gpu")] == [
        "@pytest.mark.gpu: the runner tier's GPU count, 0 included"
    ]
    assert not h100.exists(), h100.read_text()


def test_a_conftest_that_registers_gpu_below_the_root_keeps_it(pytester: pytest.Pytester, h100: Path) -> None:
    """``config.addinivalue_line("markers", "gpu: ...")`` in a conftest collected only below the root (as dask's
    and distributed's conftests register theirs): the marker is the project's too, decided at collection."""
    pytester.mkpydir("sub")
    (pytester.path / "sub" / "conftest.py").write_text(
        'def pytest_configure(config):\n    config.addinivalue_line("markers", "gpu: select with -m gpu")\n'
    )
    (pytester.path / "sub" / "test_tiers.py").write_text(OWN_MARKER_TESTS)
    installed, with_plugin = _run(pytester, "sub")
    _, without = _run(pytester, "sub", "-p", "no:gpucheck")
    assert with_plugin == without and len(with_plugin) == 5, (with_plugin, without)
    installed.stdout.fnmatch_lines(["gpucheck: the `gpu` marker is this project's own*"])
    assert not h100.exists(), h100.read_text()


def test_the_projects_own_skips_come_first(pytester: pytest.Pytester, h100: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gpucheck's marker (the project has no ``gpu`` of its own) on a machine whose only GPU is hidden
    (``CUDA_VISIBLE_DEVICES=-1``): the skips the project wrote keep their reasons; the test that would have run,
    and the one whose fixture failed for want of a GPU, are skipped with the cause."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    pytester.makepyfile(test_skips=OWN_SKIPS_TESTS)
    _, got = _run(pytester, "--gpucheck-framework=none")
    assert got["test_skipif"] == ("skipped", "CuPy not installed or no GPU available")
    assert got["test_importorskip"][0] == "skipped"
    assert got["test_importorskip"][1].startswith("could not import 'cupy_that_is_not_installed'"), got
    assert got["test_fixture_skips"] == ("skipped", "need --runslow option to run")
    for name in ("test_fixture_fails", "test_would_run"):
        assert got[name][0] == "skipped" and "devices-hidden-by-env" in got[name][1], got


def test_collection_alone_starts_nothing(pytester: pytest.Pytester, h100: Path) -> None:
    """``--collect-only`` of a suite with gpucheck's marker: no diagnosis, no child (the issue saw four)."""
    pytester.makepyfile(test_skips=OWN_SKIPS_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q")
    assert result.ret == 0 and "5 tests collected" in result.stdout.str()
    assert not h100.exists(), h100.read_text()


def test_opting_in_with_the_ini_value_takes_any_name(pytester: pytest.Pytester, h100: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``gpucheck_marker = needs_gpu``: that marker is gpucheck's (registered by it, decided by it, its arguments
    read by it) and ``gpu`` is not; ``none``: gpucheck decides no test."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    pytester.makepyfile(test_x="""
import pytest

@pytest.mark.needs_gpu(framework=None)
def test_mine():
    pass

@pytest.mark.gpu
def test_not_gpuchecks():
    pass
""")
    pytester.makeini("[pytest]\ngpucheck_marker = needs_gpu\nmarkers =\n    gpu: someone else's\n")
    _, got = _run(pytester, "--strict-markers")
    assert got["test_not_gpuchecks"] == ("passed", "")
    assert got["test_mine"][0] == "skipped" and "devices-hidden-by-env" in got["test_mine"][1], got
    markers = pytester.runpytest_subprocess("--markers", "-p", "no:cacheprovider").stdout.lines
    assert any(line.startswith("@pytest.mark.needs_gpu(count=1") for line in markers), markers
    pytester.makeini("[pytest]\ngpucheck_marker = none\nmarkers =\n    needs_gpu: mine\n    gpu: mine\n")
    h100.unlink()
    _, got = _run(pytester)
    assert got == {"test_mine": ("passed", ""), "test_not_gpuchecks": ("passed", "")}
    assert not h100.exists()
    pytester.makeini("[pytest]\ngpucheck_marker = needs-gpu!\n")
    bad = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in bad.stderr.str()
    bad.stderr.fnmatch_lines(["ERROR: gpucheck_marker must be a marker name (like gpu) or none, not 'needs-gpu!'*"])


def test_strict_markers_still_catch_an_unregistered_gpu(pytester: pytest.Pytester) -> None:
    """A project that asks pytest to refuse unregistered marks gets that for ``gpu`` too: gpucheck registers its
    ``gpu`` there only when the project opts in."""
    pytester.makepyfile(test_x="import pytest\n\n@pytest.mark.gpu\ndef test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers", "--collect-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'gpu' not found in `markers` configuration option*"])
    pytester.makeini("[pytest]\ngpucheck_marker = gpu\n")
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers", "--collect-only").ret == 0


# --- the rule, in-process ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chosen", "registered", "strict", "expected"),
    [
        (None, [], False, suite.Ownership("gpu", True)),
        (None, [], True, suite.Ownership(None, False)),
        (None, ["gpu: mine"], False, suite.Ownership(None, False, left_alone="gpu")),
        (None, ["gpu(n): tier"], True, suite.Ownership(None, False, left_alone="gpu")),
        (None, ["gpus: not the same name", "slow"], False, suite.Ownership("gpu", True)),
        ("gpu", ["gpu: mine"], False, suite.Ownership("gpu", False, chosen=True)),
        ("needs_gpu", ["gpu: mine"], True, suite.Ownership("needs_gpu", True, chosen=True)),
        ("none", [], False, suite.Ownership(None, False, chosen=True)),
        (" NONE ", ["gpu: mine"], False, suite.Ownership(None, False, chosen=True)),
    ],
)
def test_whose_marker_it_is(chosen: str | None, registered: list[str], strict: bool, expected: suite.Ownership) -> None:
    assert suite.ownership(chosen, registered, strict) == expected


@pytest.mark.parametrize("bad", ["gpu-x", "gpu x", "1gpu", "gpu()"])
def test_a_marker_name_that_pytest_cannot_take_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="gpucheck_marker must be a marker name"):
        suite.ownership(bad, [], False)


#: Put first on PYTHONPATH, a ``sitecustomize`` that makes every process of the run one without TensorFlow
#: (``import tensorflow`` raises ModuleNotFoundError, as in an environment where it was never installed), the
#: probe children included: the issue's "fake healthy H100 without TensorFlow".
WITHOUT_TENSORFLOW = '''
import importlib.abc
import sys


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTensorFlow())
'''


def test_a_bare_marker_without_tensorflow_asks_the_driver(
    pytester: pytest.Pytester, h100: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without TensorFlow installed, a bare ``@pytest.mark.gpu`` asks for what the environment has, the driver's
    GPUs, and runs on the healthy H100; a marker that names TensorFlow still gets framework-missing."""
    site = pytester.mkdir("no-tensorflow")
    (site / "sitecustomize.py").write_text(WITHOUT_TENSORFLOW)
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makepyfile(test_x="""
import pytest

@pytest.mark.gpu
def test_bare(gpus):
    assert [g.name for g in gpus] == ["NVIDIA H100 80GB HBM3"]

@pytest.mark.gpu(framework="tensorflow")
def test_asks_for_tensorflow():
    pass

@pytest.mark.gpu
def test_bare_with_tensorflows_fixture(tf_gpu_device):
    import tensorflow
""")
    result, got = _run(pytester)
    assert got["test_bare"] == ("passed", ""), (got, result.stdout.str())
    # A bare marker asks the driver, but the fixture is TensorFlow's: it asks TensorFlow (seen on a real H200
    # without TensorFlow: the fixture failed on ``import tensorflow`` before it asked, docs/measured.md).
    for name in ("test_asks_for_tensorflow", "test_bare_with_tensorflows_fixture"):
        assert got[name][0] == "skipped" and "framework-missing" in got[name][1], got
    assert h100.read_text().count("probe_cuda_driver") == 1  # one diagnosis


def test_the_sample_project_opts_in_as_the_page_shows() -> None:
    """docs/own-suites.md shows the sample project's ini lines; tests/test_own_suites.py runs it with them (its
    own registered ``gpu`` handed to gpucheck), so every run there is the opt-in's semantics."""
    page = (HERE.parent / "docs" / "own-suites.md").read_text()
    shown = page.split("```toml\n[tool.pytest.ini_options]\n", 1)[1].split("```", 1)[0].splitlines()
    sample = (HERE / "sampleproject" / "pyproject.toml").read_text().splitlines()
    assert shown == ['markers = ["gpu: needs a GPU; gpucheck decides (gpucheck_marker)"]', 'gpucheck_marker = "gpu"']
    assert all(line in sample for line in shown)
