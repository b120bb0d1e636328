"""The performance unit's pytest side, registered only with ``--gpucheck-benchmarks`` (as pytest registers
``LogXML`` only with ``--junitxml``): the benchmark plan for collection, the one measurement after the
diagnosis, each benchmark's question decided at its setup, and its per-round times handed to
pytest-benchmark's fixture."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from gpucheck import registry
from gpucheck.blocking import FRAMEWORK_BROKEN, Question, decide
from gpucheck.diagnosis import Result
from gpucheck.layers import by_name
from gpucheck.performance import plan as benchplan
from gpucheck.performance import rules
from gpucheck.performance.facts import BenchmarkRun, performance
from gpucheck.session import DECISION, Answer, skip_at_setup

if TYPE_CHECKING:
    from gpucheck.session import GpucheckSession

#: The pytest-benchmark majors whose private ``BenchmarkFixture._make_stats`` this was tested with: times
#: measured in another process have no public way in (tests/test_performance.py holds the pin).
TESTED_PYTEST_BENCHMARK = ("4", "5")


def benchmark_question(
    result: Result, spec: benchplan.Spec, framework: str | None = None, broken: tuple[str, ...] = FRAMEWORK_BROKEN
) -> Question:
    """What a benchmark asks, for the measuring ``framework``. On the CPU only that framework itself must work (none
    of ``broken``: :data:`FRAMEWORK_BROKEN` and its own ``Framework.broken_by``): a machine without a GPU still gets its
    CPU figures (the fallback benchmark asks for a GPU that does not exist and runs on the CPU). On a GPU: what the
    performance layer needs (of placement only what keeps ops off the GPU), about that GPU."""
    ids = ("gpu-underperforming", "benchmark-failed") + (("scaling-inefficient",) if spec.kind == "scaling" else ())
    on_gpu = spec.kind != "matpow_fallback" and any("GPU" in d for d in spec.devices)
    if not on_gpu:
        return Question("performance", ids, broken, instead=(), benchmark=spec.name, framework=framework)
    index = rules.gpu_index_of(spec.devices, spec.physical)
    subject = rules.subject_of(result.facts, index) if index is not None and result.facts is not None else None
    return Question(
        "performance", ids, by_name()["performance"].blocked_by_ids, subject=subject, benchmark=spec.name,
        framework=framework,
    )


def companions(selected: list[benchplan.Spec], plan: list[benchplan.Spec]) -> list[benchplan.Spec]:
    """The selected benchmarks and those their figures are computed against (a scaling run against one
    device of its method; a split or fallback matpow against matpow on one device), in plan order."""
    names = {s.name for s in selected}
    for s in selected:
        if s.kind == "scaling":
            names.add(f"test_scaling[{s.param.rsplit('-', 1)[0]}-x1]")
        if s.kind in ("matpow", "matpow_fallback"):
            names.update(benchplan.MATPOW_REFERENCES)
    return [s for s in plan if s.name in names]


class Measured(Answer):
    """What a benchmark check is handed: its decision, and the run the benchmark process measured."""

    def __init__(
        self, decision: Any, spec: benchplan.Spec, run: BenchmarkRun | None, extra: dict[str, Any], title: str
    ) -> None:
        super().__init__(decision)
        self.spec = spec
        self.run = run
        self.extra = extra
        #: The measuring framework, as people write it.
        self.title = title

    def record(self, benchmark: Any) -> None:
        """Hand pytest-benchmark the per-round times measured in the benchmark process, as its fixture
        records its own (``BenchmarkFixture._make_stats`` + ``Metadata.update`` per round: the only way in
        for times taken elsewhere; checked here, so that another pytest-benchmark says so in a sentence);
        then pass or fail."""
        run = self.run
        if run is not None and run.error is None and run.rounds:
            benchmark.extra_info.update(self.extra)
            if not getattr(benchmark, "disabled", False):  # --benchmark-disable: measured and judged, not recorded
                make_stats = getattr(benchmark, "_make_stats", None)
                if not callable(make_stats) or getattr(benchmark, "_mode", None):
                    pytest.fail(
                        "this pytest-benchmark cannot be handed times measured elsewhere (no "
                        "BenchmarkFixture._make_stats): install pytest-benchmark "
                        + " or ".join(TESTED_PYTEST_BENCHMARK),
                        pytrace=False,
                    )
                benchmark.group = self.spec.group
                benchmark._mode = f"gpucheck (measured in its {self.title} process)"
                stats = make_stats(run.iterations)
                for seconds in run.rounds:
                    stats.update(seconds)
        self.check()


class BenchmarkPlugin:
    """The benchmarks of the performance layer: planned at collection, measured once before any test runs."""

    def __init__(self, session: GpucheckSession) -> None:
        self.session = session
        self._plan: list[benchplan.Spec] | None = None
        self._selected: list[benchplan.Spec] = []
        self._measured = False

    def measuring(self) -> str | None:
        """The framework whose benchmark process measures this run (``registry.measuring_framework``)."""
        return registry.measuring_framework(self.session.settings, "performance")

    def not_measured(self, kind: str) -> str | None:
        """Why the plan has no benchmark of ``kind``: the measuring framework's child does not measure it."""
        framework = registry.framework_named(self.measuring() or "")
        if framework is None or framework.benchmarks is None or kind in {b.split(":")[0] for b in framework.benchmarks}:
            return None
        return f"not measured: {framework.title}'s benchmarks do not include {kind}"

    def plan(self) -> list[benchplan.Spec]:
        """The benchmarks the measuring framework measures, for the devices it listed in the diagnosis (the CPU
        always)."""
        if self._plan is None:
            facts = self.session.result().facts
            name = self.measuring()
            view = facts.frameworks.get(name) if facts is not None and name is not None else None
            framework = registry.framework_named(name) if name is not None else None
            gpus = [g.capability for g in (view.gpus if view is not None else ())]
            nccl = view is None or view.collectives is not False
            self._plan = benchplan.plan(gpus, nccl, framework.benchmarks if framework is not None else None)
        return self._plan

    def measured(self) -> Result:
        """The result with the benchmarks measured (the first time: they run now, in a process of the measuring
        framework's own, each bounded by --gpucheck-timeout)."""
        result = self.session.result()
        if not self._measured:
            self._measured = True
            # Only what is not blocked: a benchmark on a GPU the diagnosis found broken would only hang there.
            wanted = [s for s in self._selected if self._blocker(result, s) is None]
            specs = companions(wanted, self.plan())
            if specs:
                timeout = 2 * self.session.settings.timeout * (len(specs) + 2)
                env = {benchplan.BENCH_PLAN_ENV: benchplan.to_env(specs)}
                if (max_time := self._max_time()) is not None:
                    env[benchplan.BENCH_MAX_TIME_ENV] = repr(max_time)
                result = self.session.measure(env, timeout)
        return self.session.result()

    def _max_time(self) -> float | None:
        """pytest-benchmark's --benchmark-max-time, where it was given a value other than its default: each of
        gpucheck's benchmarks repeats its rounds for that long (at least its minimum of rounds) instead of its own
        times (docs/benchmarks.md)."""
        return benchplan.max_time_option(self.session.config.getoption("benchmark_max_time", None))

    def _question(self, result: Result, spec: benchplan.Spec) -> Question:
        """The benchmark's question for the measuring framework: its own ids of a framework that cannot run block the
        benchmarks on the CPU too (PyTorch's import stopped by a CUDA library found first)."""
        framework = self.measuring()
        named = registry.framework_named(framework or "")
        return benchmark_question(result, spec, framework, FRAMEWORK_BROKEN + (named.broken_by if named else ()))

    def _blocker(self, result: Result, spec: benchplan.Spec) -> Any:
        return decide(result, replace(self._question(result, spec), ids=())).blocked_by

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The benchmarks left after selection (-k, -m, deselect): only those are measured."""
        self._selected = [spec for item in session.items if (spec := _spec(item)) is not None]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """The benchmarks run before any test (the checks are answered already, the diagnosis having
        ended): a user's test run earlier in the session could hold the GPUs' memory."""
        skip = session.config.getoption("benchmark_skip", False)  # pytest-benchmark skips every benchmark
        if self._selected and not skip and not session.config.option.collectonly and not session.shouldstop:
            self.measured()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skipped as blocked when what it needs is broken (a GPU benchmark needs the GPU stack; a CPU one only
        the measuring framework), else judged on what the benchmark process measured."""
        spec = _spec(item)
        if spec is None:
            return
        result = self.session.result()
        question = self._question(result, spec)
        if self._blocker(result, spec) is not None:
            skip_at_setup(self.session.decide(item, replace(question, ids=())))
        result = self.measured()
        pf = performance(result.facts) if result.facts is not None else None
        run = next((r for r in (pf.benchmarks if pf is not None else ()) if r.name == spec.name), None)
        unchecked = None if run is not None else "the benchmark process did not measure it"
        skip_at_setup(self.session.decide(item, replace(question, unchecked=unchecked)))

    @pytest.fixture
    def gpucheck_measured(self, request: pytest.FixtureRequest) -> Measured:
        """The decision on this benchmark, and its run with the figures for ``extra_info``."""
        spec = _spec(request.node)
        decision = request.node.stash.get(DECISION, None)
        if spec is None or decision is None:
            pytest.fail(f"{request.node.name} is not a benchmark of the plan", pytrace=False)
        result = self.session.result()
        pf = performance(result.facts) if result.facts is not None else None
        run = next((r for r in (pf.benchmarks if pf is not None else ()) if r.name == spec.name), None)
        extra: dict[str, Any] = dict(run.extra_info) if run is not None else {}
        if run is not None and result.facts is not None:
            exp = rules.expectation(result.facts, run)
            if exp is not None:
                extra.update(
                    expected=exp.expected, share_of_expected=exp.share, expected_model=exp.model, expected_basis=exp.basis
                )
        framework = registry.framework_named(self.measuring() or "")
        return Measured(decision, spec, run, extra, framework.title if framework is not None else "framework's")


def _spec(item: pytest.Item) -> benchplan.Spec | None:
    spec = getattr(getattr(item, "callspec", None), "params", {}).get("spec")
    return spec if isinstance(spec, benchplan.Spec) else None
