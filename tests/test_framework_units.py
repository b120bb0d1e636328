"""Frameworks as units (issue 34): a framework is its package, the catalog and one registry line. Shown with a unit
built only for the tests (``tests/frameworks/numpy_unit.py``: "NumPy", answering on the CPU), registered as another
distribution would register it (an entry point of the ``gpucheck.frameworks`` group, in a ``.dist-info`` on the path),
run beside TensorFlow on the fake healthy H100 (tests/scenarios/cuda/h100-80gb-healthy.json): each framework gets
its own layer states, and one framework's blocker never blocks the other's questions."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.blocking import Question, decide, layer_states, named_root_cause
from gpucheck.diagnosis import framework_states
from gpucheck.layers import LAYERS
from gpucheck.model import Severity, finding

HERE = Path(__file__).parent
H100 = json.loads((HERE / "scenarios/cuda/h100-80gb-healthy.json").read_text())
EVERY_LAYER = frozenset(layer.name for layer in LAYERS)


def install_numpy_unit(site: Path) -> Path:
    """The test unit as a distribution would ship it: its module and a ``.dist-info`` whose entry point names it."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "frameworks" / "numpy_unit.py", site / "numpy_unit.py")
    info = site / "gpucheck_numpy_unit-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpucheck-numpy-unit\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gpucheck.frameworks]\nnumpy = numpy_unit:FRAMEWORK\n")
    return site


@pytest.fixture
def numpy_unit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = install_numpy_unit(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


def by_layer(layers: list[dict[str, Any]]) -> dict[str, str]:
    return {entry["layer"]: entry["state"] for entry in layers}


#: Two marked tests, one per framework, each writing down the GPUs the ``gpus`` fixture handed it.
MARKED = """
import pathlib

import pytest


def record(request, gpus):
    with open(pathlib.Path(__file__).parent / "seen.txt", "a") as out:
        out.write(request.node.name + " " + ",".join(g.device for g in gpus) + "\\n")


@pytest.mark.gpu(framework="numpy")
def test_on_numpy(request, gpus):
    record(request, gpus)


@pytest.mark.gpu(framework="tensorflow")
def test_on_tensorflow(request, gpus):
    record(request, gpus)
"""


def test_a_framework_unit_runs_beside_tensorflow_with_layer_states_of_its_own(
    numpy_unit: Path,
    pytester: pytest.Pytester,
    fake_machine: Callable[[dict[str, Any]], Path],
    run_gpucheck: Callable[..., GpucheckRun],
) -> None:
    """On the fake H100 (whose fakes run no kernel), TensorFlow's numerics break its placement layer; NumPy's
    questions, answered on the CPU, read ok beside it. The run's verdict is the worse, its root cause the lower."""
    fake_machine(H100)
    pytester.makepyfile(test_marked=MARKED)
    run = run_gpucheck("--gpucheck-framework=tensorflow,numpy", "-rs", ".", "test_marked.py")
    out = run.result.stdout.str()
    assert set(run.report["frameworks"]) == {"tensorflow", "numpy"}, out
    # A test marked for the new framework gets its GPUs (what its view says it registers), as TensorFlow's does.
    seen = dict(line.split(" ", 1) for line in (pytester.path / "seen.txt").read_text().splitlines())
    assert seen == {"test_on_numpy": "/GPU:0", "test_on_tensorflow": "/GPU:0"}, (seen, out[-2000:])
    tf, np = run.report["frameworks"]["tensorflow"], run.report["frameworks"]["numpy"]
    assert by_layer(tf["layers"])["placement"] == "broken" and tf["root_cause"] == "numerical-mismatch", tf
    assert by_layer(np["layers"])["framework"] == "ok" and by_layer(np["layers"])["placement"] == "ok", np
    assert np["root_cause"] is None and np["verdict"] == "accelerated", np
    assert run.report["verdict"] == "not-accelerated" and run.root_cause == "numerical-mismatch"
    mismatch = [f for f in run.report["findings"] if f["id"] == "numerical-mismatch"]
    assert mismatch and all(f["framework"] == "tensorflow" for f in mismatch), mismatch
    # Its header line, its device-map column and its machine_info entries, beside TensorFlow's.
    assert "NumPy " in out and "sees 1 GPU(s)" in out, out
    assert "GPU numbering (nvidia-smi / CUDA / TensorFlow / NumPy): 00000000:" in out, out
    assert "numpy: accelerated" in out and "tensorflow: not-accelerated (root cause: numerical-mismatch)" in out, out


def test_one_frameworks_blocker_never_blocks_anothers_questions(
    numpy_unit: Path,
    fake_machine: Callable[[dict[str, Any]], Path],
    run_gpucheck: Callable[..., GpucheckRun],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NumPy's framework-missing is the run's root cause (the lowest layer), yet TensorFlow's framework check passes
    and its numerics check still fails with its own finding, not "blocked by framework-missing"."""
    fake_machine(H100)
    monkeypatch.setenv("GPUCHECK_TEST_NUMPY_MISSING", "1")
    run = run_gpucheck("--gpucheck-framework=tensorflow,numpy")
    out = run.result.stdout.str()
    assert run.root_cause == "framework-missing", out
    (missing,) = [f for f in run.report["findings"] if f["id"] == "framework-missing"]
    assert missing["framework"] == "numpy", missing
    checks = {c["nodeid"].split("::")[-1]: c for c in run.report["checks"]}
    assert checks["test_tensorflow_importable"]["outcome"] == "passed", checks["test_tensorflow_importable"]
    numerics = checks["test_gpu_results_match_cpu_reference"]
    assert numerics["outcome"] == "failed" and set(numerics["finding_ids"]) == {"numerical-mismatch"}, numerics
    assert by_layer(run.report["frameworks"]["tensorflow"]["layers"])["framework"] == "ok"
    assert by_layer(run.report["frameworks"]["numpy"]["layers"])["framework"] == "broken"
    assert by_layer(run.report["frameworks"]["numpy"]["layers"])["placement"] == "blocked"


def test_an_unknown_framework_is_a_usage_error_naming_the_registered_ones(
    numpy_unit: Path, run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = run_gpucheck("--gpucheck-framework=torchy")
    assert run.result.ret == 4
    assert "must be one of tensorflow, torch, numpy, all, none" in run.result.stderr.str()
    monkeypatch.delenv("PYTHONPATH")
    run = run_gpucheck("--gpucheck-framework=numpy")
    assert run.result.ret == 4 and "must be one of tensorflow, torch, all, none" in run.result.stderr.str()


def test_the_settings_default_is_the_registrys() -> None:
    from gpucheck import frameworks, settings

    assert settings.DEFAULT_FRAMEWORK == frameworks.DEFAULT and settings.Settings().frameworks == (frameworks.DEFAULT,)


def _tagged(cause: str, severity: Severity, framework: str | None, **kw: Any) -> Any:
    import dataclasses

    return dataclasses.replace(finding(cause, severity, summary="s", cause="c", remedy="r", **kw), framework=framework)


def test_blocking_is_scoped_by_framework() -> None:
    """In-process, on the blocking functions themselves: a framework's blocker blocks its own questions and the
    questions of no framework (the lower stack's, the performance layer's), never another framework's."""
    missing = _tagged("framework-missing", Severity.BLOCKER, "tensorflow")
    findings = (missing,)

    class Result:
        def __init__(self) -> None:
            self.findings = findings
            self.layers = layer_states(findings, named_root_cause(findings), EVERY_LAYER)
            self.unchecked: dict[str, str] = {}

    result = Result()
    own = decide(result, Question("placement", ("placement-failed",), framework="tensorflow"))
    other = decide(result, Question("placement", ("placement-failed",), framework="numpy"))
    shared = decide(result, Question("placement", ("placement-failed",)))
    assert own.outcome == "skipped" and own.blocked_by is missing
    assert other.outcome == "passed" and other.blocked_by is None
    assert shared.outcome == "skipped" and shared.blocked_by is missing
    states = {s.name: {ls.layer: ls.state for ls in s.layers} for s in framework_states(findings, EVERY_LAYER, ("tensorflow", "numpy"))}
    assert states["tensorflow"]["framework"] == "broken" and states["tensorflow"]["placement"] == "blocked"
    assert states["numpy"]["framework"] == "ok" and states["numpy"]["placement"] == "ok"


def test_a_framework_unit_that_cannot_be_loaded_is_left_out_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """Another distribution's unit whose module raises on import: the run goes on without it, and says why once (a
    warning), never a traceback; a name that no --gpucheck-framework could give is no framework's."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "broken_unit.py").write_text("raise ImportError('its own dependency is missing')\n")
    info = site / "gpucheck_broken_unit-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpucheck-broken-unit\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gpucheck.frameworks]\nbroken = broken_unit:FRAMEWORK\nNot A Name = x:y\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    run = run_gpucheck("--gpucheck-framework=none")
    out = run.result.stdout.str() + run.result.stderr.str()
    assert run.result.ret == 1 and run.root_cause == "no-nvidia-gpu", out[-3000:]
    assert "the framework unit 'broken' (broken_unit:FRAMEWORK" in out and "its own dependency is missing" in out, out
    assert "Traceback" not in out
    refused = run_gpucheck("--gpucheck-framework=Not A Name")
    assert refused.result.ret == 4 and "must be one of tensorflow, torch, broken, all, none" in refused.result.stderr.str()
    # Asked for by name, it is a usage error that says why: never a run that goes on without it.
    asked = run_gpucheck("--gpucheck-framework=tensorflow,broken")
    err = asked.result.stderr.str()
    assert asked.result.ret == 4 and "names the framework unit 'broken', which cannot be loaded (ImportError" in err, err


def test_a_frameworks_checks_in_a_run_that_asks_for_another_are_not_checked(
    numpy_unit: Path, fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """``--gpucheck-framework=numpy``: TensorFlow was not diagnosed, so none of its checks passes or fails; each says
    why (found by review: they all passed, NumPy having answered the framework layers)."""
    fake_machine(H100)
    run = run_gpucheck("--gpucheck-framework=numpy", "-rs")
    checks = {c["nodeid"].split("::")[-1]: c for c in run.report["checks"]}
    tf_names = {"test_tensorflow_importable", "test_gpu_results_match_cpu_reference", "test_cudnn_loads", "test_driver_new_enough"}
    assert tf_names <= set(checks), sorted(checks)
    assert all(checks[n]["outcome"] == "skipped" for n in tf_names), {n: checks[n] for n in tf_names}
    assert "not checked: --gpucheck-framework=numpy" in run.result.stdout.str()
    assert set(run.report["frameworks"]) == {"numpy"}
