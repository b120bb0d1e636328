"""What a check decides, as a pure function of the diagnosis: pass, fail with findings, or skip with a
reason. The pytest hook only acts on it (as ``_pytest/skipping.py`` acts on ``evaluate_skip_marks``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpucheck import layers
from gpucheck.diagnosis import Result
from gpucheck.model import Finding, Severity


@dataclass(frozen=True)
class Question:
    """One question a check asks: its layer, the finding ids that answer it, and what it needs."""

    layer: str
    ids: tuple[str, ...]
    #: Finding ids of the same layer whose blocker (about the same subject) blocks this question.
    requires: tuple[str, ...] = ()
    #: Layers this question needs beyond its layer's own (memory settings are a resource that needs TensorFlow).
    needs: tuple[str, ...] = ()
    #: The subject of a per-GPU question ("GPU-0"): findings about another subject are not its own.
    subject: str | None = None
    #: Why the facts for this question are missing: unblocked and without a finding, it is "not checked".
    unchecked: str | None = None
    #: The layers it needs instead of its layer's own: a benchmark on the CPU needs TensorFlow, not the GPUs.
    instead: tuple[str, ...] | None = None
    #: The benchmark a performance question is about: a finding that names other benchmarks is not its own.
    benchmark: str | None = None


@dataclass(frozen=True)
class Decision:
    outcome: Literal["passed", "failed", "skipped"]
    reason: str = ""
    #: The faults it fails with.
    faults: tuple[Finding, ...] = ()
    #: The ids of the findings that answer it (faults or notes), for the report.
    finding_ids: tuple[str, ...] = ()
    blocked_by: Finding | None = None


def decide(result: Result, q: Question, framework_none: bool = False) -> Decision:
    def about(f: Finding) -> bool:
        if q.benchmark is not None:
            named = f.evidence.get("benchmarks", [f.evidence["benchmark"]] if "benchmark" in f.evidence else None)
            if named is not None and q.benchmark not in named:
                return False
        return q.subject is None or f.subject is None or f.subject == q.subject

    mine = [f for f in result.findings_for(q.ids) if about(f)]
    ids = tuple(f.id for f in mine)
    if q.instead is not None:
        wanted = frozenset().union(*(layers.requires(n) | {n} for n in q.instead))
        first = layers.blocker_among(result.findings, wanted, q.subject)
    else:
        first = result.blocked_by(q.layer, q.needs, q.subject)
    blocker = first or next(
        (f for f in result.findings_for(q.requires) if f.severity is Severity.BLOCKER and about(f)), None
    )
    if blocker is not None and blocker not in mine:
        return Decision("skipped", f"blocked by {blocker.id}", finding_ids=ids, blocked_by=blocker)
    faults = tuple(f for f in mine if f.is_fault)
    unchecked = q.unchecked
    if unchecked is None and any(s.layer == q.layer and s.state == "not checked" for s in result.layers):
        unchecked = "--gpucheck-framework=none" if framework_none else f"the {q.layer} layer is not diagnosed"
    if not faults and unchecked is not None:
        return Decision("skipped", f"not checked: {unchecked}", finding_ids=ids)
    if not faults:
        return Decision("passed", finding_ids=ids)
    return Decision("failed", faults=faults, finding_ids=ids)
