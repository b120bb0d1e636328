"""The performance unit's facts: what the benchmark process of the measuring framework measured (after the
diagnosis)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from gpucheck.facts import Facts, ProbeOutcome, facts_of

#: The facts field of the benchmark process's outcome.
FIELD = "performance"


@dataclass(frozen=True)
class BenchmarkRun:
    """One benchmark of the plan (``gpucheck.performance.plan.Spec``) as the benchmark child measured it."""

    #: The pytest item's name (``test_matmul[GPU:0-bfloat16]``), its kind and parameter id.
    name: str
    kind: str
    param: str
    devices: tuple[str, ...]
    #: Separate hardware (GPUs), not logical CPU devices that share the CPU's cores.
    physical: bool
    #: The work one round does (e.g. chained matmuls), timed as a whole and synchronised once: the
    #: per-round times divided by it are the times of one unit of work.
    iterations: int = 1
    #: Seconds per round, as measured (warm-up, tracing and compilation are not in them).
    rounds: tuple[float, ...] = ()
    #: Derived figures: tflops, gbps, speedup, efficiency, device, dtype, shape ...
    extra_info: dict[str, Any] = field(default_factory=dict)
    #: Why it could not be measured (the exception's text), or None.
    error: str | None = None


@dataclass(frozen=True)
class PerformanceFacts:
    #: TensorFlow's version where TensorFlow measured (the field of the reports written before PyTorch measured).
    tensorflow: str | None
    #: The devices of the benchmark process: TensorFlow's logical devices (the CPU split into logical devices),
    #: torch's (``cpu``, ``cuda:N``).
    devices: tuple[str, ...]
    benchmarks: tuple[BenchmarkRun, ...]
    #: What kept the benchmarks from starting (the framework not importable, the devices not set up).
    setup_error: str | None = None
    #: Whether every benchmark of the plan was attempted (False when the child was stopped partway).
    finished: bool = False
    #: The names of the benchmarks the plan asked for.
    planned: tuple[str, ...] = ()
    #: The framework whose benchmark process measured (its name in --gpucheck-framework) and its version; None in
    #: reports written before PyTorch measured (TensorFlow's, then).
    framework: str | None = None
    version: str | None = None


def outcome(facts: Facts) -> ProbeOutcome[PerformanceFacts] | None:
    """The benchmark process's outcome: None when it was not run (not asked, or not yet measured)."""
    return cast("ProbeOutcome[PerformanceFacts] | None", facts.unit(FIELD))


def performance(facts: Facts) -> PerformanceFacts | None:
    """What the benchmark process measured, or None (not run, or it died before it said)."""
    found = outcome(facts)
    return facts_of(found)
