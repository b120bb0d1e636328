"""The plugin object registered for a ``--gpucheck`` run: it runs pytest and nothing else. It collects the
check files of the layers this run checks, decides each check's question before it runs (blocked and "not
checked" become skip marks, so the skip is the check's own, as ``_pytest/skipping.py`` does it), records
the outcomes, and hands the result to the report. The units' own pytest sides are plugins of their own,
registered here only when asked for (``gpucheck.registry.pytest_plugins``)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpucheck import registry, report
from gpucheck.blocking import QUESTION_ATTRIBUTE, Decision, Question, decide
from gpucheck.diagnosis import Diagnosis, Result
from gpucheck.isolation import Interrupts
from gpucheck.marker import Machine
from gpucheck.reportfile import EXIT_REPORT_NOT_WRITTEN, one_line
from gpucheck.settings import Settings
from gpucheck.shared import Remote, SharedRun

PACKAGE_DIR = Path(__file__).resolve().parent
#: The decision of a check item, made at its setup.
DECISION = pytest.StashKey[Decision]()
#: The session of a --gpucheck run, for the check modules (their GPU parametrisation) and the units' plugins.
SESSION = pytest.StashKey["GpucheckSession"]()


def check_files(settings: Settings) -> frozenset[Path]:
    """The check files the registry names for the layers ``settings`` asks for."""
    return frozenset(PACKAGE_DIR / path for path in registry.check_files(settings))


def current(config: pytest.Config) -> GpucheckSession | None:
    return config.stash.get(SESSION, None)


class Answer:
    """What a check function is handed: the decision on its question, made before it ran (it is not
    skipped, so it passed or failed)."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    def check(self) -> None:
        """Fail with the faults' cause and remedy, or pass."""
        if self.decision.outcome == "failed":
            pytest.fail("\n\n".join(report.failure_text(f) for f in self.decision.faults), pytrace=False)


class GpucheckSession:
    """``role``: "plain" (one process), "controller" (of pytest-xdist workers: it runs the diagnosis, hands
    its facts to the workers through the run's folder, gathers the checks' outcomes from their reports, and
    writes the summary and the report) or "worker" (judges the controller's facts, runs checks, writes
    nothing)."""

    def __init__(self, config: pytest.Config, settings: Settings, role: str = "plain") -> None:
        self.config = config
        self.settings = settings
        self.role = role
        self.diagnosis: Diagnosis | Remote | None = None
        self._result: Result | None = None
        self._check_ids: set[str] = set()
        #: Whether collection ran to its end (pytest_collection_modifyitems is not called when interrupted).
        self._collected = False
        self._outcomes: dict[str, dict[str, Any]] = {}
        #: Checks whose worker died while they ran (xdist's crash report): the report is then not complete.
        self._lost: list[str] = []
        self._written = False
        #: Why the report could not be written at the end, if it could not.
        self._write_error: str | None = None
        self._interrupts: Interrupts | None = None
        #: The run ended at a test file that could not be collected (not at Ctrl-C or a signal).
        self._collection_failed = False
        #: Ctrl-C or a signal ended the run (the controller then does not wait for the diagnosis).
        self._interrupted = False
        if role == "worker":
            self._written = True  # the controller writes the report

    # --- life cycle ---------------------------------------------------------------------

    def start(self, diagnosis: Diagnosis | Remote | None = None) -> None:
        config = self.config
        config.stash[SESSION] = self
        suite = sorted({str(path.parent) for path in check_files(self.settings)})
        if config.args_source == pytest.Config.ArgsSource.ARGS:
            config.args.extend(suite)
        else:
            # No path given: the suite alone, whatever testpaths or the current directory hold.
            config.args[:] = suite
        # CI cancels a job with SIGTERM: the run ends as at Ctrl-C (children killed, a partial report with
        # `complete: false`), and the later signals wait for the clean-up (gpucheck.isolation.Interrupts).
        self._interrupts = Interrupts("gpucheck: stopped by ")
        self.diagnosis = diagnosis if diagnosis is not None else Diagnosis(self.settings)
        for name, plugin_class in registry.pytest_plugins(self.settings):
            config.pluginmanager.register(plugin_class(self), f"gpucheck-{name}")

    def publish_to(self, run: SharedRun) -> None:
        """The controller: write the facts for the workers as soon as the diagnosis ends (a daemon thread;
        pytest's collection and the workers' start-up overlap with the probes)."""
        diagnosis = self.diagnosis
        assert isinstance(diagnosis, Diagnosis)

        def publish() -> None:
            try:
                result = diagnosis.result()
            except BaseException:  # noqa: BLE001 - whatever ends it, the workers wait for a document: the partial one
                result = diagnosis.abandon()
            run.publish(Machine.of(result), "controller")

        threading.Thread(target=publish, name="gpucheck-publish", daemon=True).start()

    def result(self) -> Result:
        if self._result is None:
            assert self.diagnosis is not None
            self._result = self.diagnosis.result()
        return self._result

    def gpus(self) -> tuple[str, ...]:
        """The GPUs the per-GPU checks are about: NVML's answer, without waiting for the whole diagnosis."""
        if self._result is not None:
            return self._result.gpus
        assert self.diagnosis is not None
        return self.diagnosis.gpus()

    def measure(self, env: dict[str, str], timeout: float) -> Result:
        """Run the probes that come after the diagnosis (a unit's plugin asks, with what they need)."""
        assert self.diagnosis is not None
        self.result()
        self._result = self.diagnosis.measure(env, timeout)
        return self._result

    def close(self) -> None:
        if self.diagnosis is not None and self._result is None:
            self._result = self.diagnosis.abandon()
        elif self.diagnosis is not None:
            self.diagnosis.runner.kill_all()
        if not self._written:
            self._write_json()
        # Last: until here a second signal must not cut the clean-up short.
        if self._interrupts is not None:
            self._interrupts.restore()

    # --- collection ---------------------------------------------------------------------

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
        if file_path in check_files(self.settings):
            return pytest.Module.from_parent(parent, path=file_path)
        return None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        files = check_files(self.settings)
        self._check_ids = {item.nodeid for item in items if item.path in files}
        self._collected = True

    # --- each check: its question decided before it runs -----------------------------------------

    def decide(self, item: pytest.Item, question: Question) -> Decision:
        """The decision on ``question`` for the check ``item``, recorded for the report and JUnit."""
        asked = self.settings.frameworks
        if question.framework is None:
            # A question of a layer a framework measures for (benchmarks, the collective) is that framework's.
            question = replace(question, framework=registry.measuring_framework(self.settings, question.layer))
        if question.framework is not None and asked and question.framework not in asked:
            # Another framework's question, in a run that diagnoses others: nothing of it was looked at.
            decision = Decision("skipped", f"not checked: --gpucheck-framework={self.settings.framework}")
        else:
            decision = decide(self.result(), question, framework_none=not asked)
        item.stash[DECISION] = decision
        if decision.blocked_by is not None:
            item.user_properties.append(("gpucheck.blocked_by", decision.blocked_by.id))
        if decision.outcome == "failed":
            for f in decision.faults:
                item.user_properties.extend(
                    [
                        ("gpucheck.finding", f.id),
                        ("gpucheck.cause", f.cause),
                        ("gpucheck.remedy", f.remedy),
                        ("gpucheck.action", f.action),
                    ]
                )
        return decision

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        question = getattr(getattr(item, "obj", None), QUESTION_ATTRIBUTE, None)
        if item.nodeid not in self._check_ids or not isinstance(question, Question):
            return
        params = getattr(getattr(item, "callspec", None), "params", {})
        framework = registry.check_framework(
            item.path.relative_to(PACKAGE_DIR).as_posix() if item.path.is_relative_to(PACKAGE_DIR) else str(item.path)
        )
        skip_at_setup(self.decide(item, replace(question, subject=params.get("gpu"), framework=framework)))

    @pytest.fixture
    def gpucheck_answer(self, request: pytest.FixtureRequest) -> Answer:
        """The decision on this check's question (``gpucheck.blocking.asks``)."""
        decision = request.node.stash.get(DECISION, None)
        if decision is None:
            pytest.fail(f"{request.node.name} asks no question: declare it with gpucheck.blocking.asks", pytrace=False)
        return Answer(decision)

    @pytest.fixture(scope="session", autouse=True)
    @classmethod
    def _gpucheck_suite_properties(cls, request: pytest.FixtureRequest) -> None:
        """The verdict and the root cause as properties of the JUnit test suite (``--junitxml``). In an xdist
        worker the fixture records nothing (pytest#7767): the controller adds them (``pytest_sessionfinish``)."""
        session = current(request.config)
        if session is None or not request.config.pluginmanager.has_plugin("junitxml"):
            return  # -p no:junitxml: no such fixture, and nothing to record into
        record_testsuite_property = request.getfixturevalue("record_testsuite_property")
        for name, value in suite_properties(session.result()):
            record_testsuite_property(name, value)

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        """Every saved benchmark of a --gpucheck run (gpucheck's and the user's own) says what it ran on."""
        machine_info["gpucheck"] = report.machine_info(self.result())

    # --- reporting ----------------------------------------------------------------------

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        """The diagnosis's two lines, after "collected N items": collection overlaps the probes instead of
        waiting for them (as it did when they were header lines). Shown when pytest shows its header (not
        with -q, not with --no-header)."""
        if config.get_verbosity() < 0 or config.getoption("no_header", False):
            return []
        if not self._collected:
            # Collection did not finish (Ctrl-C, SIGTERM: pytest calls this hook on its way out): waiting for
            # the probes here would hold up the interrupt until their timeout.
            return []
        return [one_line(line) for line in report.header_lines(self.result())]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        rep = yield
        if item.nodeid in self._check_ids:
            decision = item.stash.get(DECISION, None)
            entry = self._outcomes.setdefault(
                item.nodeid, {"nodeid": item.nodeid, "outcome": "passed", "finding_ids": []}
            )
            entry["finding_ids"] = list(decision.finding_ids) if decision is not None else []
            if rep.failed:
                entry["outcome"] = "failed"
            elif rep.skipped and entry["outcome"] != "failed":
                entry["outcome"] = "skipped"
            # Read by the controller of an xdist run (a report's attributes travel with it to the controller).
            rep.gpucheck_check = dict(entry)
        return rep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The controller of an xdist run: the checks' outcomes, from its workers' reports. A check whose worker died
        while it ran has only the report xdist makes of the crash (``when == "???"``): it is recorded as failed,
        with why, and the report says ``complete: false`` (what the check would have said is not known)."""
        entry = getattr(report, "gpucheck_check", None)
        if self.role != "controller":
            return
        if isinstance(entry, dict) and isinstance(entry.get("nodeid"), str):
            self._outcomes[entry["nodeid"]] = entry
        elif str(report.when) == "???" and report.failed and self._is_check(report.nodeid):
            text = one_line(str(report.longrepr or "its worker crashed"))[:300]
            self._outcomes[report.nodeid] = {"nodeid": report.nodeid, "outcome": "failed", "finding_ids": [], "crashed": text}
            self._lost.append(report.nodeid)

    def _is_check(self, nodeid: str) -> bool:
        """Whether ``nodeid`` is one of gpucheck's checks (its file is one the registry names for this run). The node
        ids of the checks are relative to their own folder (the session collects the folders), so the file's name is
        all there is to compare: a project's own file of the same name, whose worker died, would count too."""
        path = nodeid.split("::", 1)[0]
        return any(path == str(f) or str(f).endswith("/" + path) for f in check_files(self.settings))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        tr.section("gpucheck")
        for line, markup in report.summary_lines(self.result()):
            tr.write_line(one_line(line), **markup)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # pytest ends a run whose test file cannot be collected by raising Session.Interrupted, an interrupt
        # to its hooks: the person asked for the diagnosis and is still there, so it is waited for.
        self._collection_failed = isinstance(excinfo.value, pytest.Session.Interrupted)
        self._interrupted = not self._collection_failed

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        # tryfirst: before junitxml's (which writes its file) and pytest-html's (which reads the result).
        waits = self._collection_failed or (self.role == "controller" and not self._interrupted)
        if self.diagnosis is not None and self._result is None and waits:
            try:
                self._result = self.diagnosis.result()
            except KeyboardInterrupt:
                self._result = self.diagnosis.abandon()
        if self.diagnosis is not None and self._result is None:
            self._result = self.diagnosis.abandon()
        if self.role == "controller" and self._result is not None:
            _add_junit_suite_properties(self.config, suite_properties(self._result))
        self._write_json()
        session.exitstatus = exit_status(int(exitstatus), self._result, self._write_error)

    def _write_json(self) -> None:
        self._written = True
        if self.settings.json is None or self._result is None:
            return
        try:
            result = replace(self._result, complete=False) if self._lost else self._result
            report.write_json(self.settings.json, result, list(self._outcomes.values()), self.settings)
        except OSError as exc:
            # Checked at start-up; this is a disk that filled or a directory removed meanwhile.
            # The message is the sentence ("cannot write the report to PATH: why"); on a line of its own.
            self._write_error = str(exc)
            sys.stderr.write(f"\ngpucheck: {exc}\n")


def suite_properties(result: Result) -> list[tuple[str, str]]:
    """The JUnit test suite's properties of a run: the verdict, the action and the root cause."""
    props = [("gpucheck.verdict", result.verdict), ("gpucheck.action", report.node_action(result))]
    rc = result.root_cause
    if rc is not None:
        props += [
            ("gpucheck.root_cause", rc.id),
            ("gpucheck.root_cause.layer", rc.layer),
            ("gpucheck.root_cause.summary", rc.summary),
            ("gpucheck.root_cause.remedy", rc.remedy),
            ("gpucheck.root_cause.action", rc.action),
        ]
    return props


def _add_junit_suite_properties(config: pytest.Config, props: list[tuple[str, str]]) -> None:
    """Into the JUnit XML an xdist controller writes: ``record_testsuite_property`` is a no-op in the workers
    (pytest#7767), so the controller, which has the run's one diagnosis, adds them to pytest's LogXML itself
    (the object that fixture hands its properties to, ``_pytest.junitxml.xml_key``)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest that moved it: the suite properties are missing, the JSON report has them
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:  # no --junitxml
        return
    for name, value in props:
        xml.add_global_property(name, value)


def skip_at_setup(decision: Decision) -> None:
    """Skip a check whose decision is a skip, at its setup, located at the check itself, as
    ``_pytest/skipping.py`` skips for a skip mark (``_use_item_location``, a keyword pytest 7 to 9 take: not a
    mark, which ``-rs`` would fold into one line per file, and JUnit would not place)."""
    if decision.outcome == "skipped":
        raise pytest.skip.Exception(one_line(decision.reason), _use_item_location=True)


def exit_status(pytest_status: int, result: Result | None, write_error: str | None) -> int:
    """The exit status of a --gpucheck run: pytest's own for an interrupt (2), an internal error (3) or a
    usage error (4); otherwise never 0 (nor 5, nothing collected) when the verdict is not ``accelerated``,
    CI gates on it: 1. A report that could not be written: 6."""
    if pytest_status in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        return pytest_status
    if write_error is not None:
        return EXIT_REPORT_NOT_WRITTEN
    if result is not None and result.verdict != "accelerated" and pytest_status in (
        pytest.ExitCode.OK,
        pytest.ExitCode.NO_TESTS_COLLECTED,
    ):
        return int(pytest.ExitCode.TESTS_FAILED)
    return pytest_status
