"""What a unit is made of: the vocabulary of the registry (``gpucheck.registry``).

A unit is what one source of facts gives: its probes (child processes, steps run inside one of them
(a framework's child, which imports the framework once), or quick in-process readings), its rules, its checks, its rendering and its pytest side, each
registered with the layer (``gpucheck.layers``) it answers. A run gathers what the layers it checks
need: a probe, step, rule or check of a layer this run does not check is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpucheck.facts import Facts, FrameworkView
from gpucheck.model import Finding
from gpucheck.settings import Settings

Rule = Callable[[Facts, Settings], list[Finding]]
#: Evidence a unit's facts add to a finding another rule made (the kernel log's words for the GPU NVML finds lost):
#: ``(facts, finding) -> {key: value}``, empty where it has none. It only adds: a key the finding has is kept.
Explain = Callable[[Facts, Finding], Mapping[str, Any]]


@dataclass(frozen=True)
class PreStart:
    """What is known before any probe child starts: the in-process host facts and the settings."""

    nvidia_gpus_on_bus: int
    environment: dict[str, str | None]
    settings: Settings


@dataclass(frozen=True)
class ChildProbe:
    """A probe that runs in a child process (``python -m gpucheck.probes.child TARGET OUT``).

    ``target`` is ``module:function`` under ``gpucheck.``; the function returns a facts object, or
    yields ever more complete ones (a staged probe: each is written as soon as it is known, so a crash
    in a later step keeps the earlier facts). ``field`` is the facts field its outcome fills."""

    name: str
    layer: str
    target: str
    facts_cls: type[Any]
    field: str
    #: Variables set for the child; otherwise it runs with the user's environment, as their programs do.
    env: tuple[tuple[str, str], ...] = ()
    #: Runs inside the child of the probe of that name (its facts under ``field`` in that child's JSON).
    within: str | None = None
    #: Runs in a process forked from the child of the probe of that name once that child has imported its framework
    #: (``gpucheck.probes.forked``), where that probe runs; in a child of its own otherwise. Its outcome is its own.
    forked_from: str | None = None
    #: Why the probe is not worth a process here, or None: a pure function of what is known before any
    #: child starts (the host's PCI view and the environment). None: always worth one.
    skip_reason: Callable[[PreStart], str | None] | None = None
    #: Its time limit, where it is not --gpucheck-timeout (the cluster child waits for its peers).
    timeout: Callable[[Settings], float] | None = None
    #: Variables set for the child from the settings (the cluster spec and the wait).
    settings_env: Callable[[Settings], dict[str, str]] | None = None

    def time_limit(self, settings: Settings) -> float:
        return self.timeout(settings) if self.timeout is not None else settings.timeout


@dataclass(frozen=True)
class Step:
    """A step of ``layer`` run inside the child probe named ``child`` (a staged child of
    ``gpucheck.probes.steps``: a framework's, which imports the framework once for all its steps). ``target``
    is a function ``(context, timeout) -> Iterator[(facts, budget)]``, the context that child's set-up's; its
    facts land under ``key`` in that child's JSON and fill the facts field of the same name."""

    key: str
    layer: str
    target: str
    #: None: a step whose facts the child folds into its own (the cluster child's collective, in its tasks' facts).
    facts_cls: type[Any] | None
    child: str


@dataclass(frozen=True)
class InProcess:
    """A quick reading made in the pytest process itself (no driver, no TensorFlow): the cluster
    configuration from the environment. ``read(settings, environment)`` never raises."""

    field: str
    layer: str
    read: Callable[[Settings, Mapping[str, str | None]], Any]


@dataclass(frozen=True)
class LayerRule:
    """A rules entry point and the layer it answers (rules run bottom-up, in layer order)."""

    layer: str
    rule: Rule


@dataclass(frozen=True)
class CheckFile:
    """A check file (a path relative to the gpucheck package) that pytest collects for ``layer``."""

    layer: str
    path: str


@dataclass(frozen=True)
class Unit:
    name: str
    probes: tuple[ChildProbe, ...] = ()
    steps: tuple[Step, ...] = ()
    in_process: tuple[InProcess, ...] = ()
    #: Child probes started once the diagnosis of every layer below has ended (``Diagnosis.measure``), so
    #: that they time a machine where no probe of ours still runs.
    after: tuple[ChildProbe, ...] = ()
    rules: tuple[LayerRule, ...] = ()
    #: Evidence its facts add to the findings of every unit's rules, once they have all run (``Explain``).
    explains: Explain | None = None
    #: Why a question (by finding id) could not be looked at here: ``{id: reason}``, a pure function of the
    #: facts (NVML did not answer; --gpucheck-expect-gpus not given).
    not_checked: Callable[[Facts, Settings], Mapping[str, str]] | None = None
    checks: tuple[CheckFile, ...] = ()
    #: The environment variables its rules weigh, recorded in the facts (``Facts.environment``).
    environment_keys: tuple[str, ...] = ()
    #: Its lines in the terminal summary, after the verdict's findings.
    summary: Callable[[Facts], list[str]] | None = None
    #: Its key figures for ``gpucheck merge``, read from a report's ``facts`` JSON (any shape: defensive).
    figures: Callable[[Any], dict[str, Any]] | None = None
    #: Those figures in words, for merge's table.
    figures_text: Callable[[Mapping[str, Any]], list[str]] | None = None
    #: Its pytest side, ``module:Class`` under ``gpucheck.``: registered with the session only when the
    #: layer of its checks is asked for (as pytest registers ``LogXML`` only with ``--junitxml``).
    pytest_plugin: str | None = None

    @property
    def layers(self) -> frozenset[str]:
        parts: list[Any] = [*self.probes, *self.steps, *self.in_process, *self.after, *self.rules, *self.checks]
        return frozenset(p.layer for p in parts)




@dataclass(frozen=True)
class Framework:
    """A framework unit (a package of ``gpucheck.frameworks``): its units, whose parts run only when a run asks
    for it (--gpucheck-framework), and what it says of itself to the modules outside it (``view``)."""

    #: Its name in --gpucheck-framework ("tensorflow"), and as people write it ("TensorFlow").
    name: str
    title: str
    #: The module a program imports to use it, found without importing it (``importlib.util.find_spec``).
    module: str
    units: tuple[Unit, ...]
    #: What it says of itself, from its facts (``FrameworkView``), where this run diagnosed it; None where it did not
    #: (its facts fields are None). A probe that left no facts still has a view: its header says how it ended.
    view: Callable[[Facts], FrameworkView | None]
    #: Bound the memory of each GPU it lists in this process to so many MiB (--gpucheck-worker-memory, for the suite's
    #: fixtures), before it sets them up; returns what it could not bound, each a sentence. None: it cannot.
    bound_memory: Callable[[int], list[str]] | None = None
    #: The file of the patterns ``gpucheck explain`` reads its logs with (``gpucheck.logs.Table``), relative to the
    #: gpucheck package (``data/log_patterns.json``, ``frameworks/torch/log_patterns.json``) or absolute; None: none.
    log_patterns: str | None = None
    #: Its ids, beyond ``blocking.FRAMEWORK_BROKEN``, of a framework that cannot run at all (its import stopped): the
    #: questions that need only the framework itself (its benchmarks on the CPU) are blocked by them too.
    broken_by: tuple[str, ...] = ()
    #: The benchmarks of the performance unit's plan its ``after`` probe measures, where it measures
    #: (``gpucheck.performance.plan.measured``: kinds, or ``kind:variant``); None: every one.
    benchmarks: tuple[str, ...] | None = None
