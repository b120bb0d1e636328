"""Gather every fact once (child probes concurrently), apply the rules, keep the verdict.

A :class:`Diagnosis` starts its probes as soon as it is created, so pytest's
collection overlaps with them; :meth:`Diagnosis.result` waits for them. An
interrupt kills every probe child; a diagnosis that could not finish still
yields a result (root cause ``diagnosis-incomplete``) so the report is written.
"""

from __future__ import annotations

import platform
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gpucheck import __version__
from gpucheck.facts import (
    ChildExit,
    CudaDriverFacts,
    Facts,
    FrameworkFacts,
    LibrariesFacts,
    NvmlFacts,
    PlacementFacts,
    ProbeOutcome,
    from_json,
    to_json,
)
from gpucheck.isolation import ChildRunner
from gpucheck.model import RUN_LAYER, Finding, Severity, catalog, finding, root_cause, verdict
from gpucheck.probes.host import probe_environment, probe_hardware, probe_kernel
from gpucheck.probes.visibility import probe_visibility
from gpucheck.settings import Settings

T = TypeVar("T")
R = TypeVar("R")

#: Environment the framework child gets: TensorFlow's own log lines are evidence.
FRAMEWORK_ENV = {"TF_CPP_MIN_LOG_LEVEL": "0"}


@dataclass(frozen=True)
class LayerState:
    layer: str
    #: "ok", "broken", "degraded", "blocked" or "not checked".
    state: str
    finding_ids: tuple[str, ...]


@dataclass(frozen=True)
class Result:
    facts: Facts | None
    partial_facts: dict[str, Any]
    findings: tuple[Finding, ...]
    root_cause: Finding | None
    verdict: str
    layers: tuple[LayerState, ...]
    complete: bool

    def blocked_by(self, layer: str) -> Finding | None:
        """The root cause that blocks ``layer``, if it lies in a lower layer."""
        rc = self.root_cause
        if rc is None:
            return None
        cat = catalog()
        return rc if cat.layer_rank(rc.layer) < cat.layer_rank(layer) else None

    def findings_for(self, ids: tuple[str, ...] | list[str]) -> list[Finding]:
        return [f for f in self.findings if f.id in ids]

    def facts_json(self) -> dict[str, Any]:
        return to_json(self.facts) if self.facts is not None else self.partial_facts


class _Pending(Generic[T]):
    def __init__(
        self,
        name: str,
        future: Future[tuple[ChildExit, dict[str, Any] | None]],
        cls: type[T],
        key: str | None = None,
    ) -> None:
        self.name = name
        self.future = future
        self.cls = cls
        #: For a probe that runs within another's child: its key in that child's facts.
        self.key = key

    def outcome(self) -> ProbeOutcome[T]:
        exit_, data = self.future.result()
        if self.key is not None and data is not None:
            data = data.get(self.key) if isinstance(data.get(self.key), dict) else None
        facts = from_json(self.cls, data) if data is not None else None
        return ProbeOutcome(self.name, exit_, facts)


@dataclass(frozen=True)
class ChildProbe:
    """A probe that runs in a child process: its name in ``gpucheck.probes.child``, the facts class
    it returns, the ``Facts`` field it fills, and extra environment for the child."""

    name: str
    facts_cls: type[Any]
    field: str
    env: tuple[tuple[str, str], ...] = ()
    #: Part of the framework diagnosis: not run with --gpucheck-framework=none.
    framework: bool = False
    #: Runs inside the child of the probe of that name (its facts under ``field`` in that child's JSON),
    #: not in a child of its own: the placement step shares the framework probe's TensorFlow import.
    within: str | None = None


#: Every child probe, slowest first (they start in this order): TensorFlow's import dominates the time
#: to verdict. Adding a probe: a function in gpucheck.probes.child, a field in Facts, a line here.
CHILD_PROBES: tuple[ChildProbe, ...] = (
    ChildProbe("framework", FrameworkFacts, "framework", tuple(FRAMEWORK_ENV.items()), framework=True),
    # Issue 5: placement, numerics, XLA, memory configurations, in the framework child after its facts.
    ChildProbe("placement", PlacementFacts, "placement", framework=True, within="framework"),
    ChildProbe("cuda", CudaDriverFacts, "cuda"),
    ChildProbe("libraries", LibrariesFacts, "libraries", framework=True),
    ChildProbe("nvml", NvmlFacts, "nvml"),
)


def _in_daemon_thread(fn: Callable[..., R], *args: Any) -> Future[R]:
    """``fn(*args)`` in a daemon thread of its own. Not a ThreadPoolExecutor: the interpreter joins its
    workers at exit, so a run ending in a way that skips the kill (an interrupt at an unlucky moment)
    would wait for hung probe children until their timeout. Children die with the thread that started
    them (PR_SET_PDEATHSIG, see probes.child), so none outlives this process either way."""
    future: Future[R] = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the result
            future.set_exception(exc)

    threading.Thread(target=target, name=f"gpucheck-probe-{args[0] if args else ''}", daemon=True).start()
    return future


class Diagnosis:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runner = ChildRunner()
        self._probes = [p for p in CHILD_PROBES if settings.framework != "none" or not p.framework]
        own = [p for p in self._probes if p.within is None]
        self._lock = threading.Lock()
        self._result: Result | None = None
        futures = {p.name: _in_daemon_thread(self.runner.run, p.name, settings.timeout, self._child_env(p)) for p in own}
        self._pending = [
            _Pending(p.name, futures[p.within or p.name], p.facts_cls, p.field if p.within else None)
            for p in self._probes
        ]

    def _child_env(self, probe: ChildProbe) -> dict[str, str]:
        # The resolved timeout, so that a probe child running steps of its own (placement) can fit them in it.
        return {**dict(probe.env), "GPUCHECK_TIMEOUT": f"{self.settings.timeout:g}"}

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

    def abandon(self) -> Result:
        """Stop every probe and return what is known: used when the run ends before the verdict."""
        self.runner.kill_all()
        if self._result is not None:
            return self._result
        partial: dict[str, Any] = {}
        for pending in self._pending:
            if pending.future.done() and pending.future.exception() is None:
                partial[pending.name] = to_json(pending.outcome())
        incomplete = finding(
            "diagnosis-incomplete",
            Severity.BLOCKER,
            summary="The diagnosis did not finish: the run ended before every probe reported.",
            cause="pytest was interrupted (or stopped) while the probes were still running.",
            remedy="Run `pytest --gpucheck` again and let it finish; raise --gpucheck-timeout if a probe is slow.",
            evidence={"finished_probes": sorted(partial)},
        )
        return Result(None, partial, (incomplete,), incomplete, "not-accelerated", (), False)

    def _evaluate(self) -> Result:
        from gpucheck.rules import checked_layers, evaluate

        hardware = probe_hardware()
        kernel = probe_kernel(len(hardware.nvidia_gpus))
        visibility = probe_visibility(len(hardware.nvidia_gpus) if hardware.readable else None)
        outcomes = {probe.field: pending.outcome() for probe, pending in zip(self._probes, self._pending, strict=True)}
        facts = Facts(hardware=hardware, kernel=kernel, visibility=visibility, **outcomes, environment=probe_environment())
        findings = tuple(evaluate(facts, self.settings))
        rc = root_cause(findings)
        return Result(
            facts=facts,
            partial_facts={},
            findings=findings,
            root_cause=rc,
            verdict=verdict(findings),
            layers=layer_states(findings, rc, checked_layers(self.settings)),
            complete=True,
        )


def layer_states(findings: tuple[Finding, ...], rc: Finding | None, checked: frozenset[str]) -> tuple[LayerState, ...]:
    cat = catalog()
    rc_rank = cat.layer_rank(rc.layer) if rc is not None else None
    states = []
    for layer in cat.layers:
        here = [f for f in findings if f.layer == layer and f.is_fault]
        ids = tuple(dict.fromkeys(f.id for f in here))
        if rc_rank is not None and cat.layer_rank(layer) > rc_rank and layer in checked:
            state = "blocked"
        elif any(f.severity is Severity.BLOCKER for f in here):
            state = "broken"
        elif here:
            state = "degraded"
        elif layer in checked:
            state = "ok"
        else:
            state = "not checked"
        states.append(LayerState(layer, state, ids))
    if rc is not None and rc.layer == RUN_LAYER:
        states = [LayerState(s.layer, "not checked", s.finding_ids) for s in states]
    return tuple(states)


def environment() -> dict[str, str]:
    return {
        "gpucheck": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "executable": sys.executable,
    }
