"""gpucheck inside a project's own test suite: the ``gpu`` marker, the ``gpus`` / ``gpucheck_result`` /
``tf_gpu_device`` / ``torch_device`` fixtures, and pytest-xdist (one diagnosis per run, GPUs and a memory bound per
worker).

Registered by the plugin on every pytest run, so this module imports nothing but pytest and the standard
library at its top: a suite without the marker pays for one scan of its items and nothing else. The
diagnosis starts only when a collected test carries the marker (or asks for one of the fixtures), once.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
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
LEFT_ALONE_PLUGIN_NAME = "gpucheck-suite-left-alone"
#: The marker's help after its name (``pytest --markers``): ``NAME(count=1, ...): the test needs ...``.
MARKER_HELP = (
    "(count=1, min_memory=None, compute_capability=None, framework=...): gpucheck's marker: the test needs "
    "COUNT GPUs that FRAMEWORK ('tensorflow', 'torch'; framework=None: the CUDA driver; not given: the first framework "
    "installed and diagnosed, TensorFlow before PyTorch, else the driver) can use here, each with at least MIN_MEMORY "
    "('8GiB') and compute capability COMPUTE_CAPABILITY ('8.0'); gpucheck skips it with the root cause where the "
    "machine cannot, or fails it with --gpucheck-require"
)
#: The option whose mere presence sets up the workers' environment (read without resolving the others).
_ENV_SETTINGS = ("gpus-per-worker",)
ANSWER = pytest.StashKey["Answer"]()
#: The frameworks that had initialised CUDA when gpucheck's plugin was loaded in an xdist worker given GPUs of its own.
EARLY_CUDA = pytest.StashKey[tuple[str, ...]]()
#: The variable that carries an xdist worker's GPUs (``gpucheck.shared.WORKER_GPUS_ENV``; named here so that a process
#: that is no such worker imports nothing to ask).
WORKER_GPUS_ENV = "GPUCHECK_WORKER_GPUS"
#: The marker gpucheck owns when the project says nothing (and has no ``gpu`` marker of its own).
DEFAULT_MARKER = "gpu"
#: The ini value by which a project hands a marker to gpucheck (``gpucheck_marker = gpu``; ``none``: no marker).
MARKER_INI = "gpucheck_marker"
_MARKER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def marker_name(line: str) -> str:
    """The marker a ``markers`` ini line registers: ``"gpu(count): ..."`` and ``"gpu: ..."`` are ``gpu``."""
    return line.split(":", 1)[0].split("(", 1)[0].strip()


@dataclass(frozen=True)
class Ownership:
    """Whose the ``gpu`` marker is in this run (docs/own-suites.md, "Whose marker is it?")."""

    #: The marker gpucheck decides, or None: gpucheck decides no test by its marks.
    name: str | None
    #: Whether gpucheck adds its own line to the ``markers`` ini value (never a second line for one name).
    register: bool
    #: The project's own marker gpucheck leaves alone (said once at the end of a run that has such tests).
    left_alone: str | None = None
    #: Whether the project chose (``gpucheck_marker``): then nothing registered later changes it.
    chosen: bool = False


def ownership(chosen: str | None, registered: Sequence[str], strict: bool) -> Ownership:
    """The rule. ``chosen``: the ``gpucheck_marker`` ini value (None when not set); ``registered``: the
    ``markers`` ini lines of the project and its other plugins (gpucheck's own line not among them);
    ``strict``: pytest's ``strict_markers``.

    - ``gpucheck_marker = NAME``: NAME is gpucheck's, whatever else registers it; ``none``: no marker is.
    - Otherwise a project that registers ``gpu`` itself keeps it: gpucheck neither registers a second one nor
      decides those tests.
    - Otherwise ``gpu`` is gpucheck's, registered by it, except under ``--strict-markers``: there a ``gpu`` the
      project did not register stays an error, as the project asked (it opts in with ``gpucheck_marker``).
    """
    names = {marker_name(line) for line in registered}
    if chosen is not None:
        value = chosen.strip()
        if value.lower() == "none":
            return Ownership(None, False, chosen=True)
        if not _MARKER_NAME.match(value):
            raise ValueError(f"{MARKER_INI} must be a marker name (like gpu) or none, not {chosen!r}")
        return Ownership(value, value not in names, chosen=True)
    if DEFAULT_MARKER in names:
        return Ownership(None, False, left_alone=DEFAULT_MARKER)
    if strict:
        return Ownership(None, False)
    return Ownership(DEFAULT_MARKER, True)




def marker_line(name: str) -> str:
    """gpucheck's line in the ``markers`` ini value for the marker ``name``."""
    return name + MARKER_HELP


def _strict_markers(config: pytest.Config) -> bool:
    """pytest's ``strict_markers`` (``--strict-markers``, or ``strict``, pytest 9), or pytest 8's option."""
    for name in ("strict_markers", "strict"):
        try:
            value = config.getini(name)
        except ValueError:  # not an ini value of this pytest
            continue
        if value is not None:
            return bool(value)
    return bool(getattr(config.option, "strict_markers", False) or getattr(config.option, "strict", False))


def _registered_by_others(config: pytest.Config) -> list[str]:
    """The ``markers`` ini lines of the project and its other plugins (gpucheck's own lines left out)."""
    lines = config.getini("markers")
    return [line for line in lines if not line.endswith(MARKER_HELP)] if isinstance(lines, list) else []


def _chosen(config: pytest.Config) -> str | None:
    try:
        value = config.getini(MARKER_INI)
    except ValueError:
        return None
    return value if isinstance(value, str) and value.strip() else None


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

    def __init__(self, config: pytest.Config, owner: Ownership) -> None:
        self.config = config
        #: Whose the marker is in this run (``gpucheck.marker.ownership``).
        self.owner = owner
        #: Tests of the project's own ``gpu`` marker that gpucheck left alone (counted from their reports).
        self.left_alone = 0
        self._settings: Settings | None = None
        self._diagnosis: Diagnosis | None = None
        self._machine: Machine | None = None
        self._shared: SharedRun | None = None
        self._own_folder: Path | None = None
        #: Marked tests this process collected (a worker's, or a plain run's) and their outcome counts.
        self.marked = 0
        self.outcomes: dict[str, int] = {}
        #: The frameworks given --gpucheck-worker-memory's bound in this process.
        self._bounded: set[str] = set()
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

    @property
    def marker(self) -> str | None:
        """The marker gpucheck decides in this run, or None."""
        return self.owner.name

    def recheck_owner(self) -> None:
        """A conftest below the root (or a plugin) may register its own ``gpu`` during collection: it is the
        project's then, as if registered from the start (only gpucheck's line is already in ``--markers``)."""
        if self.owner.chosen or self.owner.name is None:
            return
        if any(marker_name(line) == DEFAULT_MARKER for line in _registered_by_others(self.config)):
            self.owner = Ownership(None, False, left_alone=DEFAULT_MARKER)
            watch_left_alone(self.config, self)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.recheck_owner()
        name = self.marker
        if name is None:
            return
        marked = [item for item in items if item.get_closest_marker(name) is not None]
        if not marked:
            return
        from gpucheck.marker import MarkerError, parse_need

        for item in marked:
            mark = item.get_closest_marker(name)
            assert mark is not None
            try:
                # The closest level's marks (the test's own, else its class's, else its module's): two there say two
                # needs and pytest would keep the first without a word. A closer one overriding a module's is fine.
                pairs = list(item.iter_markers_with_node(name))
                level = [m for node, m in pairs if node is pairs[0][0]]
                if len(level) > 1:
                    raise MarkerError(f"{len(level)} {name} marks on one test at one level: give it one")
                parse_need(mark.args, mark.kwargs)
            except MarkerError as exc:
                raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        self.marked = len(marked)
        self.watch_marked()
        if not self.config.getoption("collectonly", default=False):
            self.start()  # in the background: the tests before the first marked one run meanwhile

    # --- the fixtures -----------------------------------------------------------------------------------------

    def answer_of(self, item: pytest.Item) -> Answer | None:
        """The answer to a test of gpucheck's marker (asked once, kept in its stash), or None for any other."""
        found: Answer | None = item.stash.get(ANSWER, None)
        if found is not None:
            return found
        mark = item.get_closest_marker(self.marker) if self.marker is not None else None
        if mark is None:
            return None
        from gpucheck.marker import parse_need

        found = item.stash[ANSWER] = self.answer(parse_need(mark.args, mark.kwargs))
        if found.runs:
            item.user_properties.append(("gpucheck.gpus", ",".join(g.device for g in found.gpus)))
        elif found.cause is not None:
            item.user_properties.extend([("gpucheck.root_cause", found.cause.id), ("gpucheck.remedy", found.cause.remedy)])
        return found

    def _gpus(self, request: pytest.FixtureRequest) -> tuple[Gpu, ...]:
        from gpucheck import marker, shared

        found = self.answer_of(request.node)
        if found is not None and found.runs:
            return found.gpus
        mark = request.node.get_closest_marker(self.marker) if self.marker is not None else None
        machine = self.machine()
        # An unmarked test: a bare marker's GPUs, the first framework installed and diagnosed, else the driver's (a run
        # with --gpucheck-framework=none still hands out the GPUs it found usable).
        need = marker.parse_need(mark.args, mark.kwargs) if mark is not None else marker.Need(framework_given=False)
        framework = marker.resolve(machine, need).framework
        every = marker.for_worker(machine.gpus_for(framework), shared.worker_ordinals(os.environ))
        return tuple(g for g in every if g.usable)

    @pytest.fixture
    def gpus(self, request: pytest.FixtureRequest) -> list[Gpu]:
        """The GPUs this test may use: a marked test's, else every usable GPU of this process (an empty list
        when none). Each has index, device ("/GPU:0" for TensorFlow and the driver, "cuda:0" for PyTorch), name,
        memory (bytes), compute_capability, bus_id."""
        return list(self._gpus(request))

    @pytest.fixture
    def gpucheck_result(self) -> Result:
        """The run's diagnosis: ``.verdict``, ``.root_cause`` (a Finding or None), ``.findings``."""
        return self.result()

    @pytest.fixture
    def tf_gpu_device(self, request: pytest.FixtureRequest) -> str:
        """The ``tf.device`` string of a usable GPU of this process ("/GPU:0"), or a skip with the cause. With
        --gpucheck-worker-memory, TensorFlow (imported here) is first given that memory_limit on each GPU."""
        from gpucheck import frameworks

        gpu = self._framework_gpu(request, frameworks.DEFAULT)
        return gpu.device if gpu is not None else "/GPU:0"

    @pytest.fixture
    def torch_device(self, request: pytest.FixtureRequest) -> Any:
        """The ``torch.device`` of a usable GPU of this process (``cuda:0``) that PyTorch can use, or a skip with the
        cause. With --gpucheck-worker-memory, torch's caching allocator is first bound to that much of each GPU
        (``torch.cuda.set_per_process_memory_fraction``). Under xdist with --gpucheck-gpus-per-worker, a worker where
        PyTorch had initialised CUDA before gpucheck's plugin was loaded fails the test, saying so, rather than hand
        out what may be another worker's GPU."""
        gpu = self._framework_gpu(request, TORCH)
        import importlib  # torch, the test's own framework, only now: it imports torch to use the device

        return importlib.import_module("torch").device(gpu.device if gpu is not None else "cuda:0")

    def _framework_gpu(self, request: pytest.FixtureRequest, framework: str) -> Gpu | None:
        """The first GPU of this test's answer that ``framework`` can use, its memory bounded in this process
        (--gpucheck-worker-memory); a skip with the cause where there is none, or None under --gpucheck-require (the
        test then fails at its call with the cause, before it uses the device)."""
        from gpucheck import marker
        from gpucheck.reportfile import one_line

        item = request.node
        found = self.answer_of(item)
        mark = item.get_closest_marker(self.marker) if self.marker is not None else None
        need = marker.parse_need(mark.args, mark.kwargs) if mark is not None else marker.Need(framework=framework)
        if found is not None and found.runs and marker.resolve(self.machine(), need).framework != framework:
            # Marked for another framework's GPUs, or the driver's (framework=None; a bare marker where this one is
            # not the first installed): this fixture is this framework's, and asks it for the same GPUs.
            found = self.answer(replace(need, framework=framework, framework_given=True))
            if not found.runs and self.settings().require:
                pytest.fail(_require_text(found), pytrace=False)
        elif found is None:
            found = self.answer(marker.Need(framework=framework))
        if not found.runs:
            if mark is not None and self.settings().require:
                return None  # --gpucheck-require: the test fails at its call with the cause, before using it
            raise pytest.skip.Exception(one_line(found.reason), _use_item_location=True)
        self.refuse_early_cuda(framework)
        limit = self.settings().worker_memory
        if limit is not None and framework not in self._bounded:
            self._bounded.add(framework)
            for warning in _bound_memory(framework, _megabytes(limit)):
                warnings.warn(pytest.PytestWarning(f"gpucheck: --gpucheck-worker-memory {warning}"), stacklevel=2)
        return found.gpus[0]

    def refuse_early_cuda(self, framework: str | None) -> None:
        """Fail the test where ``framework`` had initialised CUDA in this xdist worker before gpucheck could give it
        its GPUs (``gpucheck.shared.cuda_too_early``): its GPUs may be another worker's."""
        early = self.config.stash.get(EARLY_CUDA, ())
        if framework is None or framework not in early:
            return
        from gpucheck.shared import cuda_too_early

        why = cuda_too_early((framework,), os.environ)
        if why is not None:
            pytest.fail(f"gpucheck: {why}", pytrace=False)

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
        if self.left_alone and self.owner.left_alone is not None:
            name = self.owner.left_alone
            terminalreporter.write_line(
                f"gpucheck: the `{name}` marker is this project's own (its `markers` register it): gpucheck left its "
                f"{self.left_alone} test(s) alone; `{MARKER_INI} = {name}` in the ini file hands them to gpucheck"
            )
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
        from gpucheck.report import root_cause_lines, summary_lines
        from gpucheck.reportfile import one_line

        counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.outcomes.items()))
        tr.write_line(f"{marked} marked test(s): {counts}" if marked else "no marked test ran")
        if result.root_cause is not None:
            from gpucheck.model import Severity

            headline, *details = root_cause_lines(result.root_cause)
            blocker = result.root_cause.severity is Severity.BLOCKER
            tr.write_line(headline, bold=True, **({"red": True} if blocker else {"yellow": True}))
            for line in details:
                tr.write_line(line)
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

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        """The project's own skips come first: its ``skip``/``skipif`` marks (pytest's skipping plugin), its
        fixtures and ``importorskip`` in them run inside this wrapper, and keep their reasons. gpucheck decides
        only a test that would otherwise run, or whose set-up failed on a machine that cannot run it."""
        name = self.suite.marker
        if name is None or item.get_closest_marker(name) is None:
            return (yield)
        try:
            result = yield
        except pytest.skip.Exception:
            raise
        except (Exception, pytest.fail.Exception) as exc:
            self._decide(item, exc)
            raise
        self._decide(item, None)
        return result

    def _decide(self, item: pytest.Item, error: BaseException | None) -> None:
        """Skip (or, under --gpucheck-require, fail) a test this machine cannot run, with the cause."""
        from gpucheck.reportfile import one_line

        found = self.suite.answer_of(item)
        if found is None:
            return
        if found.runs:
            mark = item.get_closest_marker(self.suite.marker) if self.suite.marker is not None else None
            if mark is not None and error is None:
                from gpucheck.marker import parse_need, resolve

                self.suite.refuse_early_cuda(resolve(self.suite.machine(), parse_need(mark.args, mark.kwargs)).framework)
            return
        if not self.suite.settings().require:
            raise pytest.skip.Exception(one_line(found.reason), _use_item_location=True) from error
        if error is not None:  # the set-up failed on a machine that cannot run the test: the cause is the news
            pytest.fail(_require_text(found), pytrace=False)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        """--gpucheck-require: the test fails (its body does not run) with the cause and the remedy."""
        found = item.stash.get(ANSWER, None)
        if found is None or found.runs:
            return
        pytest.fail(_require_text(found), pytrace=False)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if self.suite.marker is not None and self.suite.marker in report.keywords:
                self.suite.outcomes[report.outcome] = self.suite.outcomes.get(report.outcome, 0) + 1


class LeftAlone:
    """Counts the tests of the project's own ``gpu`` marker (registered only where the project has one), for
    the one line at the end of the run."""

    def __init__(self, suite: SuitePlugin) -> None:
        self.suite = suite

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        name = self.suite.owner.left_alone
        if report.when == "setup" and name is not None and name in report.keywords:
            self.suite.left_alone += 1


def watch_left_alone(config: pytest.Config, suite: SuitePlugin) -> None:
    if not config.pluginmanager.has_plugin(LEFT_ALONE_PLUGIN_NAME):
        config.pluginmanager.register(LeftAlone(suite), LEFT_ALONE_PLUGIN_NAME)


def _require_text(found: Answer) -> str:
    from gpucheck.report import failure_text

    text = found.reason
    if found.cause is not None:
        text += "\n\n" + failure_text(found.cause)
    return f"--gpucheck-require: this machine cannot run this test: {text}"


def _bound_memory(framework: str, megabytes: int) -> list[str]:
    """Each GPU ``framework`` lists in this process gets ``megabytes`` (its unit's ``Framework.bound_memory``); what it
    could not bound, each a sentence."""
    from gpucheck import registry

    found = registry.framework_named(framework)
    return found.bound_memory(megabytes) if found is not None and found.bound_memory is not None else []


def _megabytes(amount: str) -> int:
    from gpucheck.settings import memory_bytes

    return max(1, memory_bytes(amount, 0) // (1 << 20))


#: PyTorch's name among the frameworks (``gpucheck.frameworks.BUILT_IN``): the framework of ``torch_device``.
TORCH = "torch"


def read_early_cuda(config: pytest.Config) -> None:
    """In an xdist worker given GPUs of its own (--gpucheck-gpus-per-worker), which frameworks had already initialised
    CUDA when gpucheck's plugin was loaded (``gpucheck.frameworks.cuda_initialised``: read from ``sys.modules``,
    nothing imported); any other process asks nothing. Called before the project's conftests load."""
    if WORKER_GPUS_ENV not in os.environ:
        return
    from gpucheck.frameworks import cuda_initialised

    config.stash[EARLY_CUDA] = cuda_initialised(sys.modules)


def register(config: pytest.Config) -> None:
    """Called by the plugin's pytest_configure on every run (after the project's own, trylast): whose the
    marker is, gpucheck's line for it where it is gpucheck's, and this process's suite side."""
    try:
        owner = ownership(_chosen(config), _registered_by_others(config), _strict_markers(config))
    except ValueError as exc:
        raise pytest.UsageError(f"{exc} ({config.inipath or 'the ini file'})") from None
    if owner.register and owner.name is not None:
        config.addinivalue_line("markers", marker_line(owner.name))
    suite = SuitePlugin(config, owner)
    config.pluginmanager.register(suite, PLUGIN_NAME)
    if owner.left_alone is not None:
        watch_left_alone(config, suite)


def unregister(config: pytest.Config) -> None:
    for name in (MARKED_PLUGIN_NAME, LEFT_ALONE_PLUGIN_NAME):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if isinstance(plugin, SuitePlugin):
        plugin.close()
        config.pluginmanager.unregister(plugin, PLUGIN_NAME)
