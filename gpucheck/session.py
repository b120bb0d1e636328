"""The plugin object registered for a ``--gpucheck`` run: collection of the suite, the check fixture, the report."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpucheck import layers, report
from gpucheck.decision import Question, decide
from gpucheck.diagnosis import Diagnosis, Result
from gpucheck.probes import benchplan
from gpucheck.protocol import BENCH_PLAN_ENV
from gpucheck.rules import performance
from gpucheck.settings import Settings

PACKAGE_DIR = Path(__file__).resolve().parent
FINDING_IDS = pytest.StashKey[list[str]]()
#: The session of a --gpucheck run, for the check modules (their GPU parametrisation).
SESSION = pytest.StashKey["GpucheckSession"]()


def check_files(settings: Settings | None = None) -> frozenset[Path]:
    """The check files the registry names (gpucheck.layers) for the layers ``settings`` asks for."""
    return frozenset(PACKAGE_DIR / path for path in layers.check_files(settings))


def current(config: pytest.Config) -> GpucheckSession | None:
    return config.stash.get(SESSION, None)


#: What keeps TensorFlow from running at all, even on the CPU.
TENSORFLOW_BROKEN = ("framework-missing", "framework-crashed", "framework-hung")


class Check:
    """What a check function is handed: it asks for its layer and finding ids, and passes, fails or is skipped."""

    def __init__(self, session: GpucheckSession, item: pytest.Item) -> None:
        self._session = session
        self._item = item

    @property
    def result(self) -> Result:
        return self._session.result()

    @property
    def settings(self) -> Settings:
        return self._session.settings

    @property
    def framework_not_diagnosed(self) -> str | None:
        """Why framework-side facts are missing (--gpucheck-framework=none), or None."""
        return "--gpucheck-framework=none" if self.settings.framework == "none" else None

    def verify(
        self,
        layer: str,
        ids: tuple[str, ...],
        requires: tuple[str, ...] = (),
        subject: str | None = None,
        unchecked: str | None = None,
        needs: tuple[str, ...] = (),
        instead: tuple[str, ...] | None = None,
        benchmark: str | None = None,
    ) -> None:
        """Ask the question (``gpucheck.decision.Question``) and act on the decision: fail with the faults'
        cause and remedy, skip as blocked or not checked, or pass."""
        decision = decide(
            self.result,
            Question(layer, ids, requires, needs, subject, unchecked, instead, benchmark),
            framework_none=self.settings.framework == "none",
        )
        self._item.stash[FINDING_IDS] = list(decision.finding_ids)
        if decision.blocked_by is not None:
            self._item.user_properties.append(("gpucheck.blocked_by", decision.blocked_by.id))
        if decision.outcome == "skipped":
            pytest.skip(decision.reason)
        if decision.outcome == "failed":
            for f in decision.faults:
                self._item.user_properties.extend(
                    [("gpucheck.finding", f.id), ("gpucheck.cause", f.cause), ("gpucheck.remedy", f.remedy)]
                )
            pytest.fail("\n\n".join(report.failure_text(f) for f in decision.faults), pytrace=False)

    def measure(self, spec: benchplan.Spec, benchmark: Any) -> None:
        """A benchmark of the performance layer: skipped as blocked when what it needs is broken (a GPU
        benchmark needs the GPU stack; a CPU one only TensorFlow), else measured in the benchmark process
        (once for all of them, after the diagnosis), its real per-round times handed to pytest-benchmark's
        fixture with its figures in ``extra_info``; failed with the finding when the figure is far below
        what the GPU is built for, or when it could not be measured."""
        question = benchmark_question(self.result, spec)
        early = decide(self.result, replace(question, ids=()))
        if early.blocked_by is not None:
            self._item.user_properties.append(("gpucheck.blocked_by", early.blocked_by.id))
            self._item.stash[FINDING_IDS] = []
            pytest.skip(early.reason)
        result = self._session.measured()
        facts = result.facts
        pf = performance.performance(facts) if facts is not None else None
        run = next((r for r in (pf.benchmarks if pf is not None else ()) if r.name == spec.name), None)
        if run is not None and run.error is None and run.rounds and facts is not None:
            extra = dict(run.extra_info)
            exp = performance.expectation(facts, run)
            if exp is not None:
                extra.update(
                    expected=exp.expected,
                    share_of_expected=exp.share,
                    expected_model=exp.model,
                    expected_basis=exp.basis,
                )
            _feed(benchmark, spec, run.iterations, run.rounds, extra)
        self.verify(
            question.layer,
            question.ids,
            question.requires,
            subject=question.subject,
            instead=question.instead,
            benchmark=spec.name,
            unchecked=None if run is not None else "the benchmark process did not measure it",
        )


def benchmark_question(result: Result, spec: benchplan.Spec) -> Question:
    """What a benchmark asks. On the CPU only TensorFlow itself must work: a machine without a GPU still gets
    its CPU figures (the fallback benchmark asks for a GPU that does not exist and runs on the CPU). On a
    GPU: what the performance layer needs (of placement only what keeps ops off the GPU), about that GPU."""
    ids = ("gpu-underperforming", "benchmark-failed") + (("scaling-inefficient",) if spec.kind == "scaling" else ())
    on_gpu = spec.kind != "matpow_fallback" and any("GPU" in d for d in spec.devices)
    if not on_gpu:
        return Question("performance", ids, TENSORFLOW_BROKEN, instead=(), benchmark=spec.name)
    index = performance.tf_gpu_index(spec.devices, spec.physical)
    subject = performance.subject_of(result.facts, index) if index is not None and result.facts is not None else None
    return Question(
        "performance", ids, layers.by_name()["performance"].blocked_by_ids, subject=subject, benchmark=spec.name
    )


def _feed(
    benchmark: Any, spec: benchplan.Spec, iterations: int, rounds: tuple[float, ...], extra: dict[str, Any]
) -> None:
    """Hand pytest-benchmark the per-round times measured in the benchmark process, as its fixture records
    its own (``BenchmarkFixture._make_stats`` + ``Metadata.update`` per round: the only way in for times
    taken elsewhere; checked here, so that another pytest-benchmark says so in a sentence)."""
    benchmark.extra_info.update(extra)
    if getattr(benchmark, "disabled", False):
        return  # --benchmark-disable: measured and judged, not recorded
    make_stats = getattr(benchmark, "_make_stats", None)
    if not callable(make_stats) or getattr(benchmark, "_mode", None):
        pytest.fail(
            "this pytest-benchmark cannot be handed times measured elsewhere (no BenchmarkFixture._make_stats): "
            "install pytest-benchmark 4 or 5",
            pytrace=False,
        )
    benchmark.group = spec.group
    benchmark._mode = "gpucheck (measured in its TensorFlow process)"
    stats = make_stats(iterations)
    for seconds in rounds:
        stats.update(seconds)


class GpucheckSession:
    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.diagnosis: Diagnosis | None = None
        self._result: Result | None = None
        self._check_ids: set[str] = set()
        self._outcomes: dict[str, dict[str, Any]] = {}
        self._written = False
        #: Why the report could not be written at the end, if it could not.
        self._write_error: str | None = None
        self._previous_sigterm: Any = None
        #: The benchmarks of the performance layer: planned at collection, measured once.
        self._plan: list[benchplan.Spec] | None = None
        self._selected: list[benchplan.Spec] = []
        self._measured = False

    # --- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        config = self.config
        config.stash[SESSION] = self
        suite = sorted({str(path.parent) for path in check_files(self.settings)})
        if config.args_source == pytest.Config.ArgsSource.ARGS:
            config.args.extend(suite)
        else:
            # No path given: the suite alone, whatever testpaths or the current directory hold.
            config.args[:] = suite
        self._treat_sigterm_as_interrupt()
        self.diagnosis = Diagnosis(self.settings)

    def _treat_sigterm_as_interrupt(self) -> None:
        """CI cancels a job with SIGTERM: end the run as Ctrl-C does (the children killed with their groups,
        a partial report written with ``complete: false``), not as a process killed with nothing written."""
        if threading.current_thread() is not threading.main_thread():
            return

        def interrupt(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt(f"gpucheck: stopped by {signal.Signals(signum).name}")

        self._previous_sigterm = signal.signal(signal.SIGTERM, interrupt)

    def result(self) -> Result:
        if self._result is None:
            assert self.diagnosis is not None
            self._result = self.diagnosis.result()
        return self._result

    def benchmark_plan(self) -> list[benchplan.Spec]:
        """The benchmarks for the devices TensorFlow listed in the diagnosis (the CPU always)."""
        if self._plan is None:
            facts = self.result().facts
            tf = facts.framework.facts if facts is not None and facts.framework is not None else None
            gpus = [_capability(d.details.get("compute_capability")) for d in (tf.gpus if tf is not None else ())]
            lf = facts.libraries.facts if facts is not None and facts.libraries is not None else None
            nccl = lf is None or any(lib.key == "nccl" and lib.loaded for lib in lf.libraries)
            self._plan = benchplan.plan(gpus, nccl=nccl)
        return self._plan

    def measured(self) -> Result:
        """The result with the performance layer's benchmarks measured (the first time: they run now, in a
        TensorFlow process of their own, each bounded by --gpucheck-timeout)."""
        if not self._measured:
            self._measured = True
            assert self.diagnosis is not None
            result = self.result()
            # Only what is not blocked: a benchmark on a GPU the diagnosis found broken would only hang there.
            wanted = [s for s in self._selected if decide(result, replace(benchmark_question(result, s), ids=())).blocked_by is None]
            specs = _with_companions(wanted, self.benchmark_plan())
            if specs:
                timeout = 2 * self.settings.timeout * (len(specs) + 2)
                self._result = self.diagnosis.measure({BENCH_PLAN_ENV: benchplan.to_env(specs)}, timeout)
        return self.result()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """The benchmarks run before any test (the checks are answered already, the diagnosis having
        ended): a user's test run earlier in the session could hold the GPUs' memory."""
        skip = session.config.getoption("benchmark_skip", False)  # pytest-benchmark skips every benchmark
        if self._selected and not skip and not session.config.option.collectonly and not session.shouldstop:
            self.measured()

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        """Every saved benchmark of a --gpucheck run (gpucheck's and the user's own) says what it ran on."""
        machine_info["gpucheck"] = report.machine_info(self.result())

    def close(self) -> None:
        if self._previous_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None
        if self.diagnosis is not None and self._result is None:
            self._result = self.diagnosis.abandon()
        elif self.diagnosis is not None:
            self.diagnosis.runner.kill_all()
        if not self._written:
            self._write_json()

    # --- collection ---------------------------------------------------------------------

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
        if file_path in check_files(self.settings):
            return pytest.Module.from_parent(parent, path=file_path)
        return None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        files = check_files(self.settings)
        self._check_ids = {item.nodeid for item in items if item.path in files}


    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The benchmarks left after selection (-k, -m, deselect): only those are measured."""
        files = check_files(self.settings)
        self._selected = [
            spec
            for item in session.items
            if item.path in files
            and isinstance(spec := getattr(getattr(item, "callspec", None), "params", {}).get("spec"), benchplan.Spec)
        ]

    @pytest.fixture
    def gpucheck_check(self, request: pytest.FixtureRequest) -> Check:
        """The check context of one built-in check."""
        return Check(self, request.node)

    @pytest.fixture(scope="session", autouse=True)
    @classmethod
    def _gpucheck_suite_properties(cls, request: pytest.FixtureRequest) -> None:
        """The verdict and the root cause as properties of the JUnit test suite (``--junitxml``)."""
        session = current(request.config)
        if session is None or not request.config.pluginmanager.has_plugin("junitxml"):
            return  # -p no:junitxml: no such fixture, and nothing to record into
        record_testsuite_property = request.getfixturevalue("record_testsuite_property")
        result = session.result()
        record_testsuite_property("gpucheck.verdict", result.verdict)
        rc = result.root_cause
        if rc is not None:
            record_testsuite_property("gpucheck.root_cause", rc.id)
            record_testsuite_property("gpucheck.root_cause.layer", rc.layer)
            record_testsuite_property("gpucheck.root_cause.summary", rc.summary)
            record_testsuite_property("gpucheck.root_cause.remedy", rc.remedy)

    # --- reporting ----------------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return report.header_lines(self.result())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        rep = yield
        if item.nodeid in self._check_ids:
            if rep.skipped and isinstance(rep.longrepr, tuple):
                # The skip is the check's, not this module's: point at the check (as skip marks do), so that
                # -rs and JUnit name it and -rs does not fold every check's skip into one line.
                path, line = item.reportinfo()[:2]
                rep.longrepr = (str(path), (line or 0) + 1, rep.longrepr[2])
            ids = item.stash.get(FINDING_IDS, [])
            entry = self._outcomes.setdefault(
                item.nodeid, {"nodeid": item.nodeid, "outcome": "passed", "finding_ids": []}
            )
            entry["finding_ids"] = ids
            if rep.failed:
                entry["outcome"] = "failed"
            elif rep.skipped and entry["outcome"] != "failed":
                entry["outcome"] = "skipped"
        return rep

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        tr.section("gpucheck")
        for line, markup in report.summary_lines(self.result()):
            tr.write_line(line, **markup)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        if self.diagnosis is not None and self._result is None:
            self._result = self.diagnosis.abandon()
        self._write_json()
        session.exitstatus = exit_status(int(exitstatus), self._result, self._write_error)

    def _write_json(self) -> None:
        self._written = True
        if self.settings.json is None:
            return
        result = self._result
        if result is None:
            return
        try:
            report.write_json(self.settings.json, result, list(self._outcomes.values()), self.settings)
        except OSError as exc:
            # Checked at start-up; this is a disk that filled or a directory removed meanwhile.
            # The message is the sentence ("cannot write the report to PATH: why"); on a line of its own.
            self._write_error = str(exc)
            sys.stderr.write(f"\ngpucheck: {exc}\n")


def _capability(value: Any) -> tuple[int, int] | None:
    """TensorFlow's device details give the compute capability as a pair (``[9, 0]`` once in JSON)."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return (value[0], value[1])
    return None


def _with_companions(selected: list[benchplan.Spec], plan: list[benchplan.Spec]) -> list[benchplan.Spec]:
    """The selected benchmarks and those their figures are computed against (a scaling run against one
    device of its method; a split or fallback matpow against matpow on one device), in plan order."""
    names = {s.name for s in selected}
    for s in selected:
        if s.kind == "scaling":
            names.add(f"test_scaling[{s.param.rsplit('-', 1)[0]}-x1]")
        if s.kind in ("matpow", "matpow_fallback"):
            names.update({"test_matpow[GPU:0]", "test_matpow[CPU:0]"})
    return [s for s in plan if s.name in names]


#: The exit status when the run itself went well but the report could not be written (pytest's own codes
#: are 0 to 5).
EXIT_REPORT_NOT_WRITTEN = 6


def exit_status(pytest_status: int, result: Result | None, write_error: str | None) -> int:
    """The exit status of a --gpucheck run: pytest's own for an interrupt (2), an internal error (3) or a
    usage error (4); otherwise never 0 (nor 5, nothing collected) when the verdict is not ``accelerated``,
    CI gates on it: 1. A report that could not be written: 6."""
    if pytest_status in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        return pytest_status
    if write_error is not None:
        return EXIT_REPORT_NOT_WRITTEN
    if (
        result is not None
        and result.verdict != "accelerated"
        and pytest_status
        in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        )
    ):
        return int(pytest.ExitCode.TESTS_FAILED)
    return pytest_status
