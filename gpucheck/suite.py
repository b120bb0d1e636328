"""gpucheck inside a project's own test suite: the ``gpu`` marker, the ``gpus`` / ``gpucheck_result`` /
``tf_gpu_device`` fixtures, and pytest-xdist (one diagnosis per run, GPUs and a memory bound per worker).

Registered by the plugin on every pytest run, so this module imports nothing but pytest and the standard
library at its top: a suite without the marker pays for one scan of its items and nothing else. The
diagnosis starts only when a collected test carries the marker (or asks for one of the fixtures), once.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpucheck.diagnosis import Diagnosis, Result
    from gpucheck.marker import Answer, Gpu, Machine, Need
    from gpucheck.settings import Settings
    from gpucheck.shared import SharedRun

PLUGIN_NAME = "gpucheck-suite"
MARKED_PLUGIN_NAME = "gpucheck-suite-marked"
#: The --gpucheck session's plugin name (gpucheck.plugin registers it).
SESSION_PLUGIN_NAME = "gpucheck-session"
#: The workerinput key that carries the run's folder (``gpucheck.shared.WORKERINPUT_KEY``).
WORKERINPUT_KEY = "gpucheck_shared"
#: The workerinput key that says who diagnoses (``gpucheck.shared.PRODUCER_KEY``).
PRODUCER_KEY = "gpucheck_producer"
MARKER = "gpu"
#: The line ``pytest --markers`` shows.
MARKER_HELP = (
    "gpu(count=1, min_memory=None, compute_capability=None, framework='tensorflow'): the test needs COUNT "
    "GPUs that FRAMEWORK (framework=None: the CUDA driver) can use here, each with at least MIN_MEMORY "
    "('8GiB') and compute capability COMPUTE_CAPABILITY ('8.0'); gpucheck skips it with the root cause where "
    "the machine cannot, or fails it with --gpucheck-require"
)
#: The option whose mere presence sets up the workers' environment (read without resolving the others).
_ENV_SETTINGS = ("gpus-per-worker",)
ANSWER = pytest.StashKey["Answer"]()


def _given(config: pytest.Config, name: str) -> bool:
    """Whether the setting ``name`` is given anywhere (command line, environment, ini), without parsing."""
    dest = "gpucheck_" + name.replace("-", "_")
    if config.getoption(dest, default=None) is not None or ("GPUCHECK_" + dest[9:].upper()) in os.environ:
        return True
    try:
        return config.getini(dest) not in (None, "", [])
    except ValueError:
        return False


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class SuitePlugin:
    """The suite side of one pytest process (a plain run, an xdist controller or one of its workers)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._settings: Settings | None = None
        self._diagnosis: Diagnosis | None = None
        self._machine: Machine | None = None
        self._shared: SharedRun | None = None
        self._own_folder: Path | None = None
        #: Marked tests this process collected (a worker's, or a plain run's) and their outcome counts.
        self.marked = 0
        self.outcomes: dict[str, int] = {}
        #: Whether TensorFlow was given --gpucheck-worker-memory's bound in this process.
        self._bounded = False
        #: The GPUs each worker was given (controller, --gpucheck-gpus-per-worker), for the summary.
        self.assigned: list[str] = []
        if _is_worker(config):
            folder = config.workerinput.get(WORKERINPUT_KEY)  # type: ignore[attr-defined]
            if isinstance(folder, str):
                from gpucheck.shared import SharedRun

                self._shared = SharedRun(folder)

    # --- settings, and the one diagnosis -------------------------------------------------------------

    def settings(self) -> Settings:
        if self._settings is None:
            from gpucheck.options import resolve

            self._settings = resolve(self.config)
        return self._settings

    def _gpucheck_run(self) -> bool:
        """Whether this is a --gpucheck run (its session registered), asked without importing it."""
        return self.config.pluginmanager.has_plugin(SESSION_PLUGIN_NAME)

    def _session_machine(self) -> Machine | None:
        """The --gpucheck session's diagnosis, when this run is one: never a second diagnosis."""
        if not self._gpucheck_run():
            return None
        from gpucheck.marker import Machine
        from gpucheck.session import current
        from gpucheck.shared import Remote

        session = current(self.config)
        if session is None:
            return None
        result = session.result()
        if isinstance(session.diagnosis, Remote) and session.diagnosis.machine is not None:
            return session.diagnosis.machine
        return Machine.of(result)

    def start(self) -> None:
        """Start the diagnosis in the background (a plain run): the tests before the first marked one run
        meanwhile. A worker or a --gpucheck run has its own way to the one diagnosis."""
        if self._diagnosis is not None or self._shared is not None or self._gpucheck_run():
            return
        from gpucheck.diagnosis import Diagnosis

        self._diagnosis = Diagnosis(self.settings())

    def machine(self) -> Machine:
        """The run's diagnosis as the marker reads it (waited for here, once)."""
        if self._machine is not None:
            return self._machine
        found = self._session_machine()
        if found is None and self._shared is not None:
            found = self._shared_machine()
        if found is None:
            from gpucheck.marker import Machine

            self.start()
            assert self._diagnosis is not None
            found = Machine.of(self._diagnosis.result())
        self._machine = found
        return found

    def result(self) -> Result:
        return self.machine().result

    def _shared_machine(self) -> Machine:
        from gpucheck import shared

        assert self._shared is not None
        settings = self.settings()
        workerinput: dict[str, Any] = self.config.workerinput  # type: ignore[attr-defined]
        if workerinput.get(shared.PRODUCER_KEY) == "controller":
            return self._shared.wait(shared.wait_limit(settings))

        def diagnose() -> Result:
            # A worker given GPUs of its own diagnoses with the controller's CUDA_VISIBLE_DEVICES: the run's
            # diagnosis is about every GPU of the run. Nothing else runs in this process meanwhile.
            saved = dict(os.environ)
            os.environ.clear()
            os.environ.update(shared.parent_environment(saved))
            try:
                from gpucheck.diagnosis import Diagnosis

                return Diagnosis(settings).result()
            finally:
                os.environ.clear()
                os.environ.update(saved)

        return self._shared.once(diagnose, str(workerinput.get("workerid", "worker")), shared.wait_limit(settings))

    def answer(self, need: Need) -> Answer:
        from gpucheck import marker, shared

        ordinals = shared.worker_ordinals(os.environ)
        return marker.answer(self.machine(), need, ordinals, self.settings().gpus_per_worker)

    # --- the workers' environment -----------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: Sequence[Any]) -> None:
        """Each worker's environment before it starts (execnet sets it before the worker imports anything,
        as ``--tx popen//env:CUDA_VISIBLE_DEVICES=…`` does, pytest-xdist#179)."""
        if not any(_given(config, name) for name in _ENV_SETTINGS):
            return
        from gpucheck import shared

        settings = self.settings()
        if settings.gpus_per_worker is None:
            return
        entries = shared.visible_entries(os.environ)
        count = shared.gpu_count_on_bus(settings) if entries is None else len(entries)
        plan = shared.assign_gpus(entries, count, len(specs), settings.gpus_per_worker)
        if plan.available == 0:
            self.assigned = ["no GPU to share out: the workers see what this process sees"]
            return
        parent = os.environ.get("CUDA_VISIBLE_DEVICES", shared.UNSET)
        for spec, visible, ordinals in zip(specs, plan.visible, plan.ordinals, strict=True):
            spec.env["CUDA_VISIBLE_DEVICES"] = visible
            spec.env[shared.WORKER_GPUS_ENV] = ",".join(str(o) for o in ordinals)
            spec.env[shared.PARENT_VISIBLE_ENV] = parent
            self.assigned.append(f"{spec.id or '?'}: CUDA_VISIBLE_DEVICES={visible}")
        if plan.shared:
            self.assigned.append(f"{len(specs)} workers x {settings.gpus_per_worker} GPU(s) > {plan.available}: shared round-robin")

    def watch_marked(self) -> None:
        if not self.config.pluginmanager.has_plugin(MARKED_PLUGIN_NAME):
            self.config.pluginmanager.register(MarkedTests(self), MARKED_PLUGIN_NAME)

    def _folder(self) -> Path:
        """The controller's folder for the run's one diagnosis, made at the first ask (nothing imported: a
        suite without the marker run with -n pays for one empty folder)."""
        if self._own_folder is None:
            self._own_folder = Path(tempfile.mkdtemp(prefix="gpucheck-run-"))
        return self._own_folder

    def run_folder(self) -> SharedRun:
        """The run's folder as ``gpucheck.shared`` reads and writes it (the --gpucheck controller publishes there)."""
        from gpucheck.shared import SharedRun

        if self._shared is None:
            self._shared = SharedRun(self._folder())
        return self._shared

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """The run's folder for the one diagnosis, handed to each worker (a path through execnet; what is
        written there is JSON, never pickle)."""
        node.workerinput[WORKERINPUT_KEY] = str(self._folder())
        self.watch_marked()  # the controller counts the marked tests' outcomes from the workers' reports
        gpucheck = bool(self.config.getoption("gpucheck", default=False))
        node.workerinput[PRODUCER_KEY] = "controller" if gpucheck else "worker"

    # --- collection: only a marked test starts anything -------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        marked = [item for item in items if item.get_closest_marker(MARKER) is not None]
        if not marked:
            return
        from gpucheck.marker import MarkerError, parse_need

        for item in marked:
            mark = item.get_closest_marker(MARKER)
            assert mark is not None
            try:
                parse_need(mark.args, mark.kwargs)
            except MarkerError as exc:
                raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        self.marked = len(marked)
        self.watch_marked()
        self.start()

    # --- the fixtures -----------------------------------------------------------------------------------------

    def _gpus(self, request: pytest.FixtureRequest) -> tuple[Gpu, ...]:
        from gpucheck import marker, shared

        found: Answer | None = request.node.stash.get(ANSWER, None)
        if found is not None and found.runs:
            return found.gpus
        mark = request.node.get_closest_marker(MARKER)
        framework = marker.parse_need(mark.args, mark.kwargs).framework if mark is not None else "tensorflow"
        every = marker.for_worker(self.machine().gpus_for(framework), shared.worker_ordinals(os.environ))
        return tuple(g for g in every if g.usable)

    @pytest.fixture
    def gpus(self, request: pytest.FixtureRequest) -> list[Gpu]:
        """The GPUs this test may use: a marked test's, else every usable GPU of this process (an empty list
        when none). Each has index, device ("/GPU:0"), name, memory (bytes), compute_capability, bus_id."""
        return list(self._gpus(request))

    @pytest.fixture
    def gpucheck_result(self) -> Result:
        """The run's diagnosis: ``.verdict``, ``.root_cause`` (a Finding or None), ``.findings``."""
        return self.result()

    @pytest.fixture
    def tf_gpu_device(self, request: pytest.FixtureRequest) -> str:
        """The ``tf.device`` string of a usable GPU of this process ("/GPU:0"), or a skip with the cause. With
        --gpucheck-worker-memory, TensorFlow (imported here) is first given that memory_limit on each GPU."""
        found = request.node.stash.get(ANSWER, None)
        if found is not None and not found.runs:
            return "/GPU:0"  # --gpucheck-require: the test fails at its call with the cause, before using it
        usable = self._gpus(request)
        if usable:
            limit = self.settings().worker_memory
            if limit is not None and not self._bounded:
                self._bounded = True
                _bound_tensorflow(_megabytes(limit))
            return usable[0].device
        from gpucheck import marker, shared
        from gpucheck.reportfile import one_line

        why = marker.answer(self.machine(), marker.Need(), shared.worker_ordinals(os.environ)).reason
        raise pytest.skip.Exception(one_line(why), _use_item_location=True)

    # --- the end: the summary and the report, written once -------------------------------------------------

    def _final_result(self) -> Result | None:
        """The result for the summary: this process's, or (the controller) the one a worker wrote."""
        if self._machine is not None or self._diagnosis is not None:
            return self.result()
        if self._own_folder is not None and (self._own_folder / "facts.json").exists():
            found = self.run_folder().read()
            return found.result if found is not None else None
        return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._gpucheck_run():
            return  # the --gpucheck session writes its own section
        result = self._final_result()
        marked = sum(self.outcomes.values())
        if result is None and not self.assigned:
            return
        tr = terminalreporter
        tr.section("gpucheck: tests marked gpu")
        for line in self.assigned:
            tr.write_line(f"gpus per worker: {line}")
        if result is None:
            return
        from gpucheck.report import failure_text, summary_lines
        from gpucheck.reportfile import one_line

        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.outcomes.items()))
        tr.write_line(f"{marked} marked test(s): {counts}" if marked else "no marked test ran")
        rc = result.root_cause
        if rc is not None:
            tr.write_line(one_line(f"root cause: {rc.id} ({rc.layer}): {rc.summary}"), red=True, bold=True)
            for line in failure_text(rc).splitlines()[1:]:
                tr.write_line(one_line(line))
        if result.verdict != "accelerated" and self.outcomes.get("passed", 0):
            tr.write_line(
                f"the marked tests that ran, ran on a machine whose verdict is {result.verdict}: see the findings above",
                yellow=True,
            )
        for line, markup in summary_lines(result):
            if line.startswith(("verdict:", "recommended action:", "also")):
                tr.write_line(one_line(line), **markup)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if _is_worker(self.config) or self._gpucheck_run():
            return
        result = self._final_result()
        if result is None:
            return
        settings = self.settings()
        if settings.json is not None:
            from gpucheck.report import write_json

            try:
                write_json(settings.json, result, [], settings)
            except OSError as exc:
                sys.stderr.write(f"\ngpucheck: {exc}\n")

    def close(self) -> None:
        if self._diagnosis is not None and self._machine is None:
            self._diagnosis.abandon()
        if self._own_folder is not None:
            shutil.rmtree(self._own_folder, ignore_errors=True)


class MarkedTests:
    """The hooks of each marked test, registered only once a marked test is collected (or, in an xdist
    controller, once workers start): a suite without the marker runs none of them."""

    def __init__(self, suite: SuitePlugin) -> None:
        self.suite = suite

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        mark = item.get_closest_marker(MARKER)
        if mark is None:
            return
        from gpucheck.marker import parse_need
        from gpucheck.reportfile import one_line

        found = self.suite.answer(parse_need(mark.args, mark.kwargs))
        item.stash[ANSWER] = found
        if found.runs:
            item.user_properties.append(("gpucheck.gpus", ",".join(g.device for g in found.gpus)))
            return
        if found.cause is not None:
            item.user_properties.extend(
                [("gpucheck.root_cause", found.cause.id), ("gpucheck.remedy", found.cause.remedy)]
            )
        if not self.suite.settings().require:
            raise pytest.skip.Exception(one_line(found.reason), _use_item_location=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        """--gpucheck-require: the test fails (its body does not run) with the cause and the remedy."""
        found = item.stash.get(ANSWER, None)
        if found is None or found.runs:
            return
        from gpucheck.report import failure_text

        text = found.reason
        if found.cause is not None:
            text += "\n\n" + failure_text(found.cause)
        pytest.fail(f"--gpucheck-require: this machine cannot run this test: {text}", pytrace=False)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if MARKER in report.keywords:
                self.suite.outcomes[report.outcome] = self.suite.outcomes.get(report.outcome, 0) + 1


def _bound_tensorflow(megabytes: int) -> None:
    """Each GPU TensorFlow lists gets a logical device of ``megabytes`` (``memory_limit``), as TensorFlow's
    own tests bound theirs: set before TensorFlow sets up its GPUs, or a warning that says it came too late.
    (TF_PER_DEVICE_MEMORY_LIMIT_MB, which TensorFlow's CI script exports, bounds each allocation TensorFlow 2.21
    asks of the driver, not their total: docs/PITFALLS.md.)"""
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=megabytes)])
        except RuntimeError as exc:
            warnings.warn(
                pytest.PytestWarning(
                    f"gpucheck: --gpucheck-worker-memory not applied to {gpu.name}: TensorFlow had already set up its "
                    f"GPUs in this process ({exc})"
                ),
                stacklevel=2,
            )


def _megabytes(amount: str) -> int:
    from gpucheck.settings import memory_bytes

    return max(1, memory_bytes(amount, 0) // (1 << 20))


def register(config: pytest.Config) -> None:
    """Called by the plugin's pytest_configure on every run: the marker, and this process's suite side."""
    config.addinivalue_line("markers", MARKER_HELP)
    config.pluginmanager.register(SuitePlugin(config), PLUGIN_NAME)


def unregister(config: pytest.Config) -> None:
    marked = config.pluginmanager.get_plugin(MARKED_PLUGIN_NAME)
    if marked is not None:
        config.pluginmanager.unregister(marked, MARKED_PLUGIN_NAME)
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if isinstance(plugin, SuitePlugin):
        plugin.close()
        config.pluginmanager.unregister(plugin, PLUGIN_NAME)
