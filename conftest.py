"""Fixtures for gpucheck's own tests: fake machines (fake driver libraries + host views) and a
way to run ``pytest --gpucheck`` on them in a subprocess and read its JSON report."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpucheck.report import report_schema
from tests import fakelibs, pyenvs

if TYPE_CHECKING:
    import jsonschema


#: Projects of their own, run through their own command line (tests/sampleproject and tests/torchproject by
#: tests/test_own_suites.py, tests/neighbours by tests/test_neighbours.py), never collected here: not even their conftest.py, which pytest
#: would otherwise import as the module ``conftest`` in place of this one (``from conftest import ...`` then fails).
collect_ignore = ["tests/sampleproject", "tests/torchproject", "tests/neighbours"]


#: The repository: the rootdir of this suite's own runs. A `pytest --gpucheck` run elsewhere loads this conftest
#: too (the built-in checks live below it), and the suite's hooks below leave such a run alone.
ROOT = Path(__file__).resolve().parent

#: The environment the session started with: a shared run (``gpucheck_shared``) starts from it, whatever the test
#: that first asks for the run has changed since, so the run is the same whichever test (or worker) makes it.
SESSION_ENVIRONMENT = dict(os.environ)


@dataclass
class GpucheckRun:
    result: pytest.RunResult
    report: dict[str, Any]
    #: The folder the run ran in (its files: a JUnit XML, a conftest), for a shared run.
    path: Path | None = None

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
#: step's key (``gpucheck.frameworks.tensorflow``, ``Step``), as (key, field of the step's facts, name in the view).
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


#: The session folder's subfolder where the fake libraries are compiled.
FAKE_LIB_CACHE = "fake-lib-cache"


def session_folder(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every process of this test session shares: the base temporary folder, or under pytest-xdist
    the controller's, of which each worker's is a subfolder (``popen-gw0``)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@pytest.fixture(scope="session")
def fake_lib_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the fake libraries are compiled, once per test session: one folder for every xdist worker, each
    build named by its source's hash and moved into place atomically (``fakelibs.build``)."""
    if fakelibs.compiler() is None:
        pytest.skip("no C compiler (cc, gcc or clang): the fake driver libraries cannot be built")
    cache = session_folder(request.config, tmp_path_factory) / FAKE_LIB_CACHE
    cache.mkdir(exist_ok=True)
    return cache


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
    for key, value in build_fake_machine(scenario, machine, cache).items():
        monkeypatch.setenv(key, value)
    return machine


def build_fake_machine(scenario: Mapping[str, Any], machine: Path, cache: Path) -> dict[str, str]:
    """Lay out the machine of ``scenario`` in the folder ``machine``; return the variables that make an
    environment that machine (the fake libraries on LD_LIBRARY_PATH, the scenario, the host view, its ``env``)."""
    libdir = machine / "lib"
    libdir.mkdir(parents=True, exist_ok=True)
    version = scenario.get("driver_version", "550.54.15")
    for name in scenario.get("libraries", []):
        # "libcudart@12.5.82": a library installed under its own version instead of the driver's.
        lib_name, _, lib_version = name.partition("@")
        fakelibs.build(getattr(fakelibs, lib_name.upper()), libdir, lib_version or version, cache)
    fakelibs.write_scenario(dict(scenario), machine / "scenario.cfg")
    fakelibs.make_host_root(machine / "root", scenario.get("host", {}))
    return {
        "LD_LIBRARY_PATH": str(libdir),
        "GPUCHECK_FAKE_SCENARIO": str(machine / "scenario.cfg"),
        "GPUCHECK_HOST_ROOT": str(machine / "root"),
        **scenario.get("env", {}),
    }


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


#: Options of every run of ``run_gpucheck`` and ``gpucheck_shared``: no cache folder, and without Hypothesis's pytest
#: plugin, which the test extra installs and no run under test uses: its pytest_terminal_summary imports all of
#: Hypothesis (about 0.5 s of CPU at the end of every session here, as much as the rest of pytest's start;
#: tests/test_benchmarks.py leaves it out of its timings for the same reason).
RUN_OPTIONS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


@pytest.fixture
def run_gpucheck(pytester: pytest.Pytester) -> Callable[..., GpucheckRun]:
    """Run ``pytest --gpucheck`` in a subprocess (in pytester's directory) and read its JSON report,
    which must follow the published schema (gpucheck/data/report.schema.json)."""

    def run(*args: str, timeout: float = 300) -> GpucheckRun:
        report_path = pytester.path / "gpucheck-report.json"
        result = pytester.runpytest_subprocess(
            "--gpucheck", f"--gpucheck-json={report_path}", *RUN_OPTIONS, *args, timeout=timeout
        )
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        if report:
            validate_report(report, report_path)
        return GpucheckRun(result, report)

    return run


class SharedRuns:
    """``pytest --gpucheck`` runs made once per test session and read by every test that asks for the same one
    (``gpucheck_shared``): a run is named by what makes it (the fake machine's scenario, the arguments, the
    project's files, the environment it adds), so the tests that only read one diagnosis, in any file, on any
    xdist worker, share it. The first test to ask makes it under a file lock of the session's folder; the
    others wait for it there and read what it left: its exit status, output, report and files.

    A run starts as ``pytester.runpytest_subprocess`` starts one (the session's environment without pytest's own
    variables, HOME in the project folder, no colour, the project folder on PYTHONPATH, stdin closed), plus the
    machine's variables, in a project folder of its own."""

    def __init__(self, folder: Path, lib_cache: Path) -> None:
        self.folder = folder
        self.lib_cache = lib_cache

    def run(
        self,
        *args: str,
        scenario: Mapping[str, Any] | None = None,
        files: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        json_path: str = "gpucheck-report.json",
        timeout: float = 300,
    ) -> GpucheckRun:
        """The run of ``pytest --gpucheck --gpucheck-json=<json_path> *RUN_OPTIONS *args`` in a project
        folder holding ``files`` (relative path: text), on the fake machine of ``scenario`` (None: this host),
        with ``env`` added to the environment; its report must follow the published schema."""
        spec = {"args": list(args), "scenario": scenario, "files": files or {}, "env": env or {}, "json": json_path}
        key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
        where = self.folder / key
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (where / "result.json").exists():
                self._make(where, spec, timeout)
        outcome = json.loads((where / "result.json").read_text())
        project = where / "project"
        print("shared run:", *outcome["command"], f"\n     in: {project}")
        print(outcome["stdout"])
        print(outcome["stderr"], file=sys.stderr)
        if outcome.get("error"):
            pytest.fail(outcome["error"], pytrace=False)
        result = pytest.RunResult(outcome["ret"], outcome["stdout"].splitlines(), outcome["stderr"].splitlines(),
                                  outcome["duration"])
        report_path = project / json_path
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        if report:
            validate_report(report, report_path)
        return GpucheckRun(result, report, project)

    def _make(self, where: Path, spec: dict[str, Any], timeout: float) -> None:
        project = where / "project"
        project.mkdir(parents=True, exist_ok=True)
        for name, text in spec["files"].items():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            (project / name).write_text(text)
        env = {k: v for k, v in SESSION_ENVIRONMENT.items() if not k.startswith("PYTEST_") and k != "TOX_ENV_DIR"}
        env.update(HOME=str(project), USERPROFILE=str(project), PY_COLORS="0")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project), env.get("PYTHONPATH", "")]))
        if spec["scenario"] is not None:
            if fakelibs.compiler() is None:
                pytest.skip("no C compiler (cc, gcc or clang): the fake driver libraries cannot be built")
            self.lib_cache.mkdir(exist_ok=True)
            env.update(build_fake_machine(spec["scenario"], where / "machine", self.lib_cache))
        env.update(spec["env"])
        command = [sys.executable, "-mpytest", f"--basetemp={where / 'basetemp'}", "--gpucheck",
                   f"--gpucheck-json={project / spec['json']}", *RUN_OPTIONS, *spec["args"]]
        outcome: dict[str, Any] = {"command": command, "ret": None, "error": None}
        start = time.monotonic()
        with open(where / "stdout", "w+") as out, open(where / "stderr", "w+") as err:
            proc = subprocess.Popen(command, cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True)
            try:
                outcome["ret"] = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                outcome["error"] = f"{timeout} second timeout expired running: {command}"
            out.seek(0)
            err.seek(0)
            outcome.update(stdout=out.read(), stderr=err.read(), duration=time.monotonic() - start)
        tmp = where / "result.json.tmp"
        tmp.write_text(json.dumps(outcome))
        tmp.replace(where / "result.json")


@pytest.fixture(scope="session")
def gpucheck_shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SharedRuns:
    """Runs of ``pytest --gpucheck`` shared by the tests that only read them, across files and xdist workers
    (``SharedRuns.run``). A test that changes its run's environment or files, or times it, makes its own
    (``run_gpucheck``)."""
    folder = session_folder(request.config, tmp_path_factory)
    return SharedRuns(folder / "shared-runs", folder / FAKE_LIB_CACHE)


@pytest.fixture(scope="session")
def torch_python() -> Path:
    """The interpreter of a venv with the torch CPU wheel and gpucheck's requirements (and pytest-xdist), without
    TensorFlow, made once per cache (``tests/pyenvs.py``): where the suite runs real PyTorch."""
    return pyenvs.torch_python()


@pytest.fixture(scope="session")
def torch_tf_python() -> Path:
    """The interpreter of a venv with both the torch CPU wheel and TensorFlow (the benchmark run's time to verdict with
    both installed), made once per cache (``tests/pyenvs.py``)."""
    return pyenvs.torch_tf_python()


# --- the inner loop: `pytest tests -m "not slow"` -------------------------------------------------------------

#: A test that asks for one of these starts a pytest session, a fake machine's processes or a benchmark: it is
#: marked ``slow``. What is left is the inner loop (docs/ARCHITECTURE.md, "Tests"): pure functions and in-process
#: readings of every unit.
SLOW_FIXTURES = frozenset({"pytester", "run_gpucheck", "gpucheck_shared", "fake_machine", "fake_lib_cache", "benchmark",
                           "torch_python", "torch_tf_python"})

#: Tests that start TensorFlow, a command or a browser without asking for one of those fixtures, by node id
#: prefix (a file, a test, or a parametrized test's name), each with why.
SLOW_TESTS: dict[str, str] = {
    "tests/test_neighbours.py": "other projects' own suites, each run twice through its own command line",
    "tests/test_pypi_clash.py::test_both_orders_then_the_other_uninstalled": "pip installs and uninstalls wheels",
    "tests/test_gpu_acceptance.py::test_the_gpu_command_on_this_host": "the acceptance command, TensorFlow and benchmarks",
    "tests/test_gpu_acceptance.py::test_a_step_is_killed_with_its_process_group": "waits out a step's time limit",
    "tests/test_cluster.py::test_nodes_given_the_cluster_in_different_orders": (
        "two `pytest --gpucheck` nodes whose TensorFlow coordination service waits out its 30 s"
    ),
    "tests/test_cluster_config.py::test_the_reading_agrees_with_tensorflows_own_resolvers": "imports TensorFlow",
    "tests/test_cluster_config.py::test_any_tf_config_is_read_without_a_crash": "hundreds of Hypothesis examples",
    "tests/test_explain.py::test_this_hosts_own_tensorflow_log": "imports TensorFlow in a child for its log",
    "tests/test_hostile_cwd.py::test_scripts_named_like_packages_in_the_working_directory_are_not_imported": (
        "`gpucheck doctor` with TensorFlow"
    ),
    "tests/test_hostile_fuzz.py::test_compare_takes": "hundreds of `gpucheck compare` commands",
    "tests/test_hostile_fuzz.py::test_merge_takes": "hundreds of `gpucheck merge` commands",
    "tests/test_hostile_fuzz.py::test_random_bytes_through_the_real_command_line": "the console scripts",
    "tests/test_hostile_merge.py::test_a_fifo_no_one_writes_to_ends_in_a_sentence": "waits out the 10 s a FIFO gets",
    "tests/test_explain_cli.py::test_a_fifo_no_program_writes_to": "waits out the 10 s a FIFO gets",
    "tests/test_explain_torch.py::test_the_command_line_on_a_pytorch_fault_and_a_healthy_pytorch_log": (
        "three `gpucheck explain` commands"
    ),
    "tests/test_hostile_records.py::test_journalctls_output_is_bounded_while_it_is_read": "reads 768 MiB",
    "tests/test_compare_real.py::test_real_pairs_in_every_form": "real files through the command, a plot each",
    "tests/test_compare_real.py::test_the_plot_clips_nothing_and_stays_readable": "draws PNGs with matplotlib",
    "tests/test_compare.py::test_plot_draws_a_real_png": "draws a PNG with matplotlib",
    "tests/test_doctor.py::test_environment_variables_are_the_pytest_runs": "`gpucheck doctor` and pytest runs",
}


def pytest_configure(config: pytest.Config) -> None:
    if config.rootpath != ROOT:
        return  # a `pytest --gpucheck` run elsewhere, which loads this conftest with the built-in checks
    if not hasattr(config, "workerinput"):
        compile_the_project()
    # pytest keeps the test modules it rewrote (tests/__pycache__, its own file names) only where this process may
    # write bytecode. Under PYTHONDONTWRITEBYTECODE=1 (this project's build machines) every process of the suite (each
    # xdist worker, then the benchmark run) rewrote all of them again: collection took 4.1 s against 1.7 s from the
    # cache (docs/measured.md, "Stop 44"). As compile_the_project above, for this checkout's files; the processes the
    # tests start keep the environment as it is.
    sys.dont_write_bytecode = False
    config.addinivalue_line(
        "markers",
        "slow: starts a pytest session, TensorFlow, a fake machine's processes or a command (set by conftest.py "
        "from the fixtures a test asks for and SLOW_TESTS); `pytest tests -m 'not slow'` is the inner loop",
    )


#: The longest tests, longest first, as measured on the quiet two-core machine (a timeline of a whole run's tests,
#: wall seconds, docs/measured.md "Stop 44"): run first, so that pytest-xdist hands them out round-robin at the start
#: and no worker is left with one of them while the others have finished (the suite's tail). A node id that no longer
#: exists changes nothing; one that is missing here only runs in its place.
LONGEST_FIRST: tuple[str, ...] = (
    "tests/test_cluster.py::test_nodes_given_the_cluster_in_different_orders",  # 35 s, mostly a hung task's wait
    "tests/test_performance.py::test_underperforming_gpus_and_poor_scaling_through_the_full_path",  # 26 s
    "tests/test_performance.py::test_every_benchmark_runs_on_the_cpu_host",  # 20 s
    "tests/test_gpu_acceptance.py::test_the_gpu_command_on_this_host",  # 20 s
    "tests/test_healthy_h100.py::test_healthy_h100_reads_the_same_over_repeated_runs_on_a_loaded_machine",  # 16 s
    "tests/test_performance.py::test_launch_bound_scaling_is_not_judged",  # 15 s
    "tests/test_torch_session.py::test_pytorch_benchmarks_on_the_cpu",  # 12 s
    "tests/test_explain_cli.py::test_a_fifo_no_program_writes_to",  # 10 s, the input's wait
    "tests/test_hostile_merge.py::test_a_fifo_no_one_writes_to_ends_in_a_sentence",  # 10 s, the input's wait
    "tests/test_hostile_fuzz.py::test_compare_takes_a_real_benchmark_file_with_any_field_replaced",  # 9 s
    "tests/test_neighbours.py::test_own_outcomes_and_reasons[distributed]",  # 9 s
    "tests/test_own_suites.py::test_healthy_h100_runs_the_marked_tests_and_bounds_the_worker_memory",  # 9 s
    "tests/test_stack_scenarios.py::test_scenario[cuinit-and-nvml-both-hang]",  # 8.5 s, the probes' timeout
    "tests/test_stack_scenarios.py::test_scenario[cuinit-hangs]",  # 8.5 s
    "tests/test_nvml_scenarios.py::test_scenario[nvml-hangs-in-a-gpu-query]",  # 8.5 s
    "tests/test_nvml_scenarios.py::test_scenario_gpu_stack_alone[nvml-hangs-in-a-gpu-query]",  # 8.5 s
    "tests/test_own_suites.py::test_the_pytorch_sample_skips_then_fails_under_require_with_xdist",  # 8 s
    "tests/test_neighbours.py::test_own_gpu_selection[zarr]",  # 8 s
    "tests/test_cluster.py::test_local_parameter_server_smoke_test",  # 8 s
    # 11 to 14 s in the clean clone's run with three workers (--durations), 6 to 9 s with two
    "tests/test_fake_gemm_speed.py::test_tensorflow_matmuls_on_the_slow_h100_run_at_its_set_speed[cublaslt]",
    "tests/test_fake_gemm_speed.py::test_tensorflow_matmuls_on_the_slow_h100_run_at_its_set_speed[cublas]",
    "tests/test_neighbours.py::test_own_outcomes_and_reasons[dask]",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.rootpath != ROOT:
        return
    slow_ids = tuple(SLOW_TESTS)
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())) or item.nodeid.startswith(slow_ids):
            item.add_marker(pytest.mark.slow)
    # Every process of an xdist run sorts alike (the same collection, the same stable sort): xdist checks that.
    rank = {nodeid: i for i, nodeid in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: a run with -p no:xdist does not know it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (the README's test command) starts one worker more than this process may use CPUs. A fifth of
    the suite's worker time is spent waiting, not computing: on timeouts it tests (a hung probe, a FIFO no one
    writes to, a cluster task TensorFlow holds), and on child processes. The extra worker computes meanwhile.
    Measured on the quiet two-core machine (docs/measured.md): 2 workers 431 to 441 s, 3 workers 402 s, 4 workers
    412 s. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides where it is set (pytest-xdist's own hook reads it)."""
    if config.rootpath != ROOT or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return cpus + 1


def compile_the_project() -> None:
    """Write gpucheck's bytecode once, at the start of the test session (the controller's, before any worker).

    Every ``pytest --gpucheck`` a test starts, and each of its probe children, imports gpucheck from this checkout.
    Where ``PYTHONDONTWRITEBYTECODE`` is set (as on this project's build machines) Python never writes the ``.pyc``
    files, so each of those processes compiled the modules it imports again: about 0.1 s of CPU a run with three
    probe children (docs/measured.md). Python still reads ``.pyc`` files it finds, and checks each against its
    source's time and size, so a file changed later is compiled afresh, never read stale. Only what is out of date is
    written; a tree that cannot be written (a read-only checkout) is left as it is."""
    import compileall

    # quiet=2: nothing printed, not even what cannot be written.
    compileall.compile_dir(ROOT / "gpucheck", quiet=2)
    compileall.compile_file(ROOT / "pytest_gpucheck.py", quiet=2)


#: Ratios the time-to-verdict benchmarks measured (their ``extra_info["ratio"]``), shown at the end of the run.
BENCHMARK_RATIOS: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if BENCHMARK_RATIOS:
        terminalreporter.section("time to verdict (median of gpucheck / median of its baseline, paired rounds)")
        for name, line in BENCHMARK_RATIOS.items():
            terminalreporter.write_line(f"{name}: {line}")
