"""Fixtures for gpucheck's own tests: fake machines (fake driver libraries + host views) and a
way to run ``pytest --gpucheck`` on them in a subprocess and read its JSON report."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpucheck.report import report_schema
from tests import fakelibs

if TYPE_CHECKING:
    import jsonschema


#: A project of its own, run through its own command line by tests/test_own_suites.py, never collected here.
collect_ignore = ["tests/sampleproject"]


@dataclass
class GpucheckRun:
    result: pytest.RunResult
    report: dict[str, Any]

    @property
    def root_cause(self) -> str | None:
        rc = self.report["root_cause"]
        return rc["id"] if rc else None

    def finding(self, finding_id: str) -> dict[str, Any]:
        for f in self.report["findings"]:
            if f["id"] == finding_id:
                return f
        raise AssertionError(f"no finding {finding_id}; findings: {[f['id'] for f in self.report['findings']]}")

    @property
    def finding_ids(self) -> list[str]:
        return [f["id"] for f in self.report["findings"]]


#: Where each of the TensorFlow child's facts lies in a report: its set-up's and its steps', each under the
#: step's key (``gpucheck.stack``, ``TfStep``), as (key, field of the step's facts, name in the view).
TF_STEP_FIELDS = (
    ("placement", "soft_placement_default", "soft_placement_default"),
    ("placement", "runs", "runs"),
    ("training_step", "run", "training_step"),
    ("numerics", "checks", "numerics"),
    ("xla", "runs", "xla"),
    ("multi_device", "run", "multi_device"),
    ("gpu_memory", "memory", "memory"),
)


def tensorflow_facts(report: dict[str, Any]) -> dict[str, Any]:
    """The TensorFlow child's set-up and steps in one view: the set-up's facts, each step's under the name
    the tests read (``runs``, ``numerics``, ``xla``, ``multi_device``, ``memory``, ``training_step``), and
    every step's section errors together under ``errors``."""
    facts = report["facts"]
    view = dict(facts["tf_setup"]["facts"])
    errors = dict(view.get("errors", {}))
    for key, field, name in TF_STEP_FIELDS:
        step = facts[key]["facts"] if facts.get(key) is not None and facts[key]["facts"] is not None else None
        view[name] = step[field] if step is not None else None
        errors.update(step["errors"] if step is not None else {})
    view["errors"] = errors
    return view


@pytest.fixture(scope="session")
def fake_lib_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if fakelibs.compiler() is None:
        pytest.skip("no C compiler (cc, gcc or clang): the fake driver libraries cannot be built")
    return tmp_path_factory.mktemp("fake-lib-cache")


@pytest.fixture
def fake_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_lib_cache: Path
) -> Callable[[dict[str, Any]], Path]:
    """Make this test's environment a machine described by a scenario dict: fake libraries on
    LD_LIBRARY_PATH, the scenario file in GPUCHECK_FAKE_SCENARIO, a host view in GPUCHECK_HOST_ROOT.
    Sections: ``host`` (see fakelibs.make_host_root), ``libraries`` (which fakes to install, with the
    driver version), ``env`` (variables to set), and the sections the fakes read (``cuda``, ``gpus``, ...)."""

    def make(scenario: dict[str, Any]) -> Path:
        return make_fake_machine(scenario, tmp_path / "machine", fake_lib_cache, monkeypatch)

    return make


def make_fake_machine(scenario: dict[str, Any], machine: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The machine of ``scenario`` in the folder ``machine``, this environment made it (fake_machine; a test
    that is several hosts one after the other calls it with a folder each)."""
    libdir = machine / "lib"
    libdir.mkdir(parents=True, exist_ok=True)
    version = scenario.get("driver_version", "550.54.15")
    for name in scenario.get("libraries", []):
        # "libcudart@12.5.82": a library installed under its own version instead of the driver's.
        lib_name, _, lib_version = name.partition("@")
        fakelibs.build(getattr(fakelibs, lib_name.upper()), libdir, lib_version or version, cache)
    fakelibs.write_scenario(scenario, machine / "scenario.cfg")
    fakelibs.make_host_root(machine / "root", scenario.get("host", {}))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(libdir))
    monkeypatch.setenv("GPUCHECK_FAKE_SCENARIO", str(machine / "scenario.cfg"))
    monkeypatch.setenv("GPUCHECK_HOST_ROOT", str(machine / "root"))
    for key, value in scenario.get("env", {}).items():
        monkeypatch.setenv(key, value)
    return machine


@functools.cache
def report_validator() -> jsonschema.protocols.Validator:
    """The published schema of the report (gpucheck/data/report.schema.json), checked itself first."""
    # Imported here: an editable install's `pytest --gpucheck` loads this conftest too (the built-in checks
    # live below it), and jsonschema costs 0.1 s at every start.
    import jsonschema

    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate_report(report: dict[str, Any], where: object = "the report") -> None:
    """Fail the test when ``report`` does not follow the published schema, naming every violation."""
    errors = sorted(report_validator().iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  at /{'/'.join(str(p) for p in e.absolute_path)}: {e.message[:300]}" for e in errors[:20]]
        pytest.fail(f"{where} does not follow gpucheck/data/report.schema.json:\n" + "\n".join(lines), pytrace=False)


@pytest.fixture
def run_gpucheck(pytester: pytest.Pytester) -> Callable[..., GpucheckRun]:
    """Run ``pytest --gpucheck`` in a subprocess (in pytester's directory) and read its JSON report,
    which must follow the published schema (gpucheck/data/report.schema.json)."""

    def run(*args: str, timeout: float = 300) -> GpucheckRun:
        report_path = pytester.path / "gpucheck-report.json"
        result = pytester.runpytest_subprocess(
            "--gpucheck", f"--gpucheck-json={report_path}", "-p", "no:cacheprovider", *args, timeout=timeout
        )
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        if report:
            validate_report(report, report_path)
        return GpucheckRun(result, report)

    return run


#: Ratios the time-to-verdict benchmarks measured (their ``extra_info["ratio"]``), shown at the end of the run.
BENCHMARK_RATIOS: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if BENCHMARK_RATIOS:
        terminalreporter.section("time to verdict (median of gpucheck / median of its baseline, paired rounds)")
        for name, line in BENCHMARK_RATIOS.items():
            terminalreporter.write_line(f"{name}: {line}")
