"""Gather every fact once (child probes concurrently), apply the rules, keep the verdict.

A :class:`Diagnosis` starts its probes as soon as it is created, so pytest's
collection overlaps with them; :meth:`Diagnosis.result` waits for them. An
interrupt kills every probe child; a diagnosis that could not finish still
yields a result (root cause ``diagnosis-incomplete``) so the report is written.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
from collections.abc import Mapping
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from gpucheck import __version__, registry
from gpucheck.blocking import LayerState, consequence_of, layer_states, named_root_cause
from gpucheck.facts import ChildExit, Facts, ProbeOutcome, from_json, to_json
from gpucheck.isolation import GPUCHECK_ROOT, ChildRunner, in_daemon_thread
from gpucheck.layers import checked
from gpucheck.model import Finding, Severity, finding, raised_action, verdict
from gpucheck.probes.host import HOST_READ_TIMEOUT_S, probe_environment, probe_hardware_within, probe_kernel_within
from gpucheck.probes.visibility import probe_visibility
from gpucheck.protocol import DEEP_ENV, FORKED_ENV, STEPS_ENV, TIMEOUT_ENV, Fork, encode_forks
from gpucheck.rules.nvml import gpu_ids, gpu_subjects
from gpucheck.settings import Settings
from gpucheck.unit import ChildProbe, PreStart

#: How long an abandoned diagnosis waits for the threads of its killed children to record them.
ABANDON_WAIT_S = 2.0

T = TypeVar("T")


@dataclass(frozen=True)
class FrameworkState:
    """One framework's answer: its verdict, root cause and layer states, over the lower stack's findings and its own
    (another framework's findings neither break nor block it). The run's verdict is the worst of them, its root
    cause the lowest."""

    name: str
    verdict: str
    root_cause: Finding | None
    layers: tuple[LayerState, ...]


def framework_states(
    findings: tuple[Finding, ...], checked: frozenset[str], frameworks: tuple[str, ...]
) -> tuple[FrameworkState, ...]:
    out = []
    for name in frameworks:
        mine = tuple(f for f in findings if f.framework in (None, name))
        rc = named_root_cause(mine)
        out.append(FrameworkState(name, verdict(mine), rc, layer_states(findings, rc, checked, name)))
    return tuple(out)


@dataclass(frozen=True)
class Result:
    facts: Facts | None
    partial_facts: dict[str, Any]
    findings: tuple[Finding, ...]
    #: The blocker of the lowest broken layer; under a ``degraded`` verdict the lowest degraded finding; None exactly
    #: when the verdict is ``accelerated`` (``blocking.named_root_cause``).
    root_cause: Finding | None
    verdict: str
    layers: tuple[LayerState, ...]
    complete: bool
    #: Why a question could not be looked at, by the id it is named after (``Unit.not_checked``).
    unchecked: Mapping[str, str] = field(default_factory=dict)
    #: The GPUs the per-GPU checks are about ("GPU-0"), as NVML lists them.
    gpus: tuple[str, ...] = ()
    #: Each framework the run asked for, as it sees the stack (``framework_states``).
    frameworks: tuple[FrameworkState, ...] = ()

    def cause_blocked_by(self, f: Finding) -> Finding | None:
        """What blocks the finding ``f`` itself: a broken layer its evidence needs (a consequence of it)."""
        return consequence_of(self.findings, f)

    def facts_json(self) -> dict[str, Any]:
        return to_json(self.facts) if self.facts is not None else self.partial_facts


#: What a child's thread hands back (``ChildRunner.run_forking``): how it ended, its facts, and its forked probes'.
ChildResult = tuple[ChildExit, dict[str, Any] | None, dict[str, tuple[ChildExit, dict[str, Any] | None]]]


class _Pending(Generic[T]):
    def __init__(
        self,
        name: str,
        future: Future[ChildResult],
        cls: type[T],
        key: str | None = None,
        forked: bool = False,
    ) -> None:
        self.name = name
        self.future = future
        self.cls = cls
        #: For a probe that runs within another's child: its key in that child's facts; for one forked from another's
        #: child (``forked``): its key among that child's forked probes.
        self.key = key
        self.forked = forked

    def outcome(self) -> ProbeOutcome[T]:
        exit_, data, forked = self.future.result()
        if self.forked and self.key is not None:
            exit_, data = forked[self.key]
        elif self.key is not None and data is not None:
            data = data.get(self.key) if isinstance(data.get(self.key), dict) else None
        facts = from_json(self.cls, data) if data is not None else None
        return ProbeOutcome(self.name, exit_, facts)


class Diagnosis:
    """Starts every child probe of the layers this run checks at once (the host view decides which are
    worth a process), so that pytest's collection overlaps with them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runner = ChildRunner()
        self._lock = threading.Lock()
        self._result: Result | None = None
        # In-process and quick: what decides which children are worth starting.
        self._host_timeout = min(HOST_READ_TIMEOUT_S, settings.timeout)
        self._hardware = probe_hardware_within(self._host_timeout)
        self._environment = probe_environment(registry.environment_keys())
        pre = PreStart(len(self._hardware.nvidia_gpus), self._environment, settings)
        self._probes: list[ChildProbe] = []
        self._not_run: dict[str, str] = {}
        for probe in registry.probes(settings):
            why = registry.not_asked(probe, settings)
            if why is None and probe.skip_reason is not None:
                why = probe.skip_reason(pre)
            if why is None:
                self._probes.append(probe)
            else:
                self._not_run[probe.name] = why
        # A probe forked from another's child where that child runs (gpucheck.probes.forked), in its own otherwise.
        running = {p.name for p in self._probes}
        forked_from = {p.name: p.forked_from for p in self._probes if p.forked_from in running and p.within is None}
        own = [p for p in self._probes if p.within is None and p.name not in forked_from]
        futures: dict[str, Future[ChildResult]] = {}
        for p in own:
            forks = [q for q in self._probes if forked_from.get(q.name) == p.name]
            env = self._child_env(p)
            if forks:
                env[FORKED_ENV] = encode_forks([Fork(q.field, q.target, self._child_env(q)) for q in forks])
            futures[p.name] = in_daemon_thread(
                self.runner.run_forking, p.target, p.time_limit(settings), env, tuple(q.field for q in forks)
            )
        self._pending = {
            p.field: _Pending(
                p.name,
                futures[p.within or forked_from.get(p.name) or p.name],
                p.facts_cls,
                p.field if p.within or p.name in forked_from else None,
                forked=p.name in forked_from,
            )
            for p in self._probes
        }

    def _child_env(self, probe: ChildProbe) -> dict[str, str]:
        # The resolved timeout, so that a probe child running steps of its own (placement) can fit them in it;
        # a child that runs steps (a framework's) gets the steps the registry lists for it.
        env = {
            **dict(probe.env),
            TIMEOUT_ENV: f"{probe.time_limit(self.settings):g}",
            DEEP_ENV: "1" if self.settings.deep else "0",
        }
        if probe.settings_env is not None:
            env.update(probe.settings_env(self.settings))
        steps = registry.steps_of(probe, self.settings)
        if steps:
            env[STEPS_ENV] = ",".join(f"{s.key}={s.target}" for s in steps)
        return env

    def result(self) -> Result:
        """Wait for the probes (once) and evaluate the rules. Interrupts kill the children."""
        with self._lock:
            if self._result is None:
                try:
                    self._result = self._evaluate()
                except BaseException:
                    self.runner.kill_all()
                    raise
            return self._result

    def gpus(self) -> tuple[str, ...]:
        """The GPUs the per-GPU checks are about (``Result.gpus``), as soon as the NVML probe has answered:
        collection needs them, and the rest of the diagnosis goes on meanwhile."""
        if self._result is not None:
            return self._result.gpus
        pending = self._pending.get(registry.NVML_PROBE.field)
        if pending is None:
            return ()
        try:
            return gpu_ids(pending.outcome().facts)
        except BaseException:
            self.runner.kill_all()
            raise

    def abandon(self) -> Result:
        """Stop every probe and return what is known: used when the run ends before the verdict."""
        self.runner.kill_all()
        if self._result is not None:
            return self._result
        # The threads that ran the killed children record them as cancelled within moments.
        futures.wait([p.future for p in self._pending.values()], timeout=ABANDON_WAIT_S)
        partial: dict[str, Any] = {}
        finished: list[str] = []
        cancelled: list[str] = []
        for pending in self._pending.values():
            if pending.future.done() and pending.future.exception() is None:
                outcome = pending.outcome()
                partial[pending.name] = to_json(outcome)
                (cancelled if outcome.exit.status == "cancelled" else finished).append(pending.name)
            else:
                cancelled.append(pending.name)
        return incomplete(finished, cancelled, partial)

    def measure(self, env: Mapping[str, str], timeout: float) -> Result:
        """Run the probes that come after the diagnosis (the performance layer's benchmarks), one after the
        other on a machine where no other probe of ours runs any more, and judge again with their facts.
        ``env`` is handed to them (the plan of the benchmarks); ``timeout`` bounds each."""
        result = self.result()
        if result.facts is None:
            return result
        facts = result.facts
        for probe in registry.measured_after(self.settings):
            child_env = {**self._child_env(probe), TIMEOUT_ENV: f"{timeout:g}", **env}
            exit_, data = self.runner.run(probe.target, timeout, child_env)
            outcome = ProbeOutcome(probe.name, exit_, from_json(probe.facts_cls, data) if data is not None else None)
            facts = facts.with_field(probe.field, outcome)
        with self._lock:
            self._result = self._judge(facts)
            return self._result

    def _evaluate(self) -> Result:
        hardware = self._hardware
        kernel = probe_kernel_within(len(hardware.nvidia_gpus), self._host_timeout)
        visibility = probe_visibility(len(hardware.nvidia_gpus) if hardware.readable else None)
        outcomes = {name: pending.outcome() for name, pending in self._pending.items()}
        units: dict[str, Any] = dict.fromkeys(registry.unit_fields())
        units.update({r.field: r.read(self.settings, self._environment) for r in registry.in_process(self.settings)})
        units.update({name: o for name, o in outcomes.items() if name in units})
        facts = Facts(
            hardware=hardware,
            kernel=kernel,
            visibility=visibility,
            cuda=outcomes["cuda"],
            nvml=outcomes["nvml"],
            units=units,
            not_run=dict(self._not_run),
            environment=self._environment,
        )
        return self._judge(facts)

    def _judge(self, facts: Facts) -> Result:
        facts = registry.with_views(facts, self.settings)
        findings = explained(facts, registry.findings(facts, self.settings))
        rc = named_root_cause(findings)
        # A layer measured after the diagnosis is "not checked" until it has been (its items deselected).
        unmeasured = {p.layer for p in registry.measured_after(self.settings) if facts.unit(p.field) is None}
        on = checked(self.settings) - unmeasured
        return Result(
            facts=facts,
            partial_facts={},
            findings=findings,
            root_cause=rc,
            verdict=verdict(findings),
            layers=layer_states(findings, rc, on),
            complete=True,
            unchecked=registry.not_checked(facts, self.settings),
            gpus=gpu_subjects(facts),
            frameworks=framework_states(findings, on, self.settings.frameworks),
        )


def explained(facts: Facts, findings: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """``findings`` with the evidence the units' facts add to them (``Unit.explains``: the kernel log's words for the GPU
    NVML finds lost). Only added: a key a finding has is kept; the action is raised by a ``recovery_action`` added."""
    out = []
    for f in findings:
        extra: dict[str, Any] = {}
        for explain in registry.explainers():
            extra.update((k, v) for k, v in explain(facts, f).items() if k not in f.evidence and k not in extra)
        if extra:
            evidence = {**f.evidence, **extra}
            f = replace(f, evidence=evidence, action=raised_action(f.action, evidence))
        out.append(f)
    return tuple(out)


def incomplete(finished: list[str], cancelled: list[str], partial: dict[str, Any]) -> Result:
    """The result of a diagnosis that did not finish: root cause ``diagnosis-incomplete``."""
    found = finding(
        "diagnosis-incomplete",
        Severity.BLOCKER,
        summary="The diagnosis did not finish: the run ended before every probe reported.",
        cause="pytest was interrupted (Ctrl-C, SIGTERM) while the probes were still running.",
        remedy="Run `pytest --gpucheck` again and let it finish; raise --gpucheck-timeout if a probe is slow.",
        evidence={"finished_probes": sorted(set(finished)), "cancelled_probes": sorted(set(cancelled))},
    )
    return Result(None, partial, (found,), found, "not-accelerated", (), False)


def environment() -> dict[str, Any]:
    return {
        "gpucheck": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "executable": sys.executable,
        # Which host this is, for a fleet's reports joined by `gpucheck merge`.
        "host": platform.node(),
        # Which gpucheck and which path the probe children import from (gpucheck.isolation starts them so).
        "gpucheck_location": GPUCHECK_ROOT,
        "python_path": [p for p in sys.path if p not in ("", os.getcwd())],
    }
