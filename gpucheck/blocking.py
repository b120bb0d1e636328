"""Blocking over the ``needs`` graph, and what a check decides: pure functions of findings.

Acceleration fails at the lowest broken layer; what needs it is blocked by it. A layer's ``needs``
(``gpucheck.layers``) name the layers it rests on; :func:`layers_needed` follows them. A question a check
asks (:class:`Question`) is blocked by the blocker of the lowest broken layer it needs; otherwise it fails
with its own faults, is "not checked" where the diagnosis could not look, or passes
(:func:`decide`, acted on by the pytest hook as ``_pytest/skipping.py`` acts on ``evaluate_skip_marks``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Literal, Protocol, TypeVar

from gpucheck.layers import LAYERS, by_name
from gpucheck.model import RUN_LAYER, Finding, Severity, catalog

#: What keeps a framework from running at all, even on the CPU.
FRAMEWORK_BROKEN = ("framework-missing", "framework-crashed", "framework-hung")


@cache
def layers_needed(layer: str) -> frozenset[str]:
    """Every layer ``layer`` needs, directly or through others (not itself). The run pseudo layer needs none."""
    if layer == RUN_LAYER:
        return frozenset()
    out: set[str] = set()
    todo = list(by_name()[layer].needs)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(by_name()[name].needs)
    return frozenset(out)


def layers_needed_by_cause(cause_id: str, layer: str) -> frozenset[str]:
    """What a finding's evidence needs: its cause's ``needs`` in the catalog where that says more than
    its layer (memory-config-failed is a resource but needs TensorFlow), else its layer's needs."""
    cause = catalog().causes.get(cause_id)
    if cause is not None and cause.needs != cause.layer:
        return layers_needed(cause.needs) | {cause.needs}
    return layers_needed(layer)


def _lowest(findings: Iterable[Finding], severity: Severity) -> Finding | None:
    """The finding of ``severity`` in the lowest layer (first in rule order on a tie)."""
    cat = catalog()
    found = [f for f in findings if f.severity is severity]
    return min(found, key=lambda f: cat.layer_rank(f.layer)) if found else None


def root_cause(findings: Iterable[Finding]) -> Finding | None:
    """The blocker of the lowest layer (first in rule order on a tie)."""
    return _lowest(findings, Severity.BLOCKER)


def named_root_cause(findings: Iterable[Finding]) -> Finding | None:
    """The root cause a report names (DESIGN.md, "Contract: the report JSON"): the blocker of the lowest layer; where
    nothing blocks (a ``degraded`` verdict), the lowest degraded finding by the same ordering. None exactly when no
    finding is a fault (the verdict is ``accelerated``). A degraded root cause blocks nothing: what a question is
    blocked by stays :func:`root_cause`'s."""
    found = list(findings)
    return root_cause(found) or _lowest(found, Severity.DEGRADED)


#: How findings name one GPU: NVML's index ("GPU-5"), or the bus address of a GPU NVML does not list because the driver
#: does not hold it ("PCI 0000:b3:00.0", ``gpu-init-failed``).
GPU_SUBJECTS = ("GPU-", "PCI ")


def _other_gpu(f: Finding, subject: str | None) -> bool:
    """``f`` is about one GPU ("GPU-5") and the question about another ("GPU-0")."""
    return (
        subject is not None
        and f.subject is not None
        and f.subject != subject
        and f.subject.startswith(GPU_SUBJECTS)
        and subject.startswith(GPU_SUBJECTS)
    )


def _other_framework(f: Finding, framework: str | None) -> bool:
    """``f`` is one framework's finding ("tensorflow") and the question another's: TensorFlow's framework-missing
    never blocks another framework's questions. A question of no framework (the lower stack's, the performance
    layer's) counts every framework's."""
    return framework is not None and f.framework is not None and f.framework != framework


def blocker_among(
    findings: Iterable[Finding], layers: frozenset[str], subject: str | None = None, framework: str | None = None
) -> Finding | None:
    """The blocker of the lowest layer among ``layers`` (the run pseudo layer blocks everything). For a
    question about one GPU, a blocker about another GPU does not count: one lost GPU of eight leaves the
    seven others' questions answered; nor, for a question of one framework, another framework's blocker."""
    candidates = [
        f
        for f in findings
        if f.severity is Severity.BLOCKER
        and (f.layer in layers or f.layer == RUN_LAYER)
        and not _other_gpu(f, subject)
        and not _other_framework(f, framework)
    ]
    return root_cause(candidates)


def layer_blocker(
    findings: Iterable[Finding], layer: str, subject: str | None = None, framework: str | None = None
) -> Finding | None:
    """What blocks ``layer`` as a whole: the lowest broken layer it needs, or one of its ``blocked_by_ids``."""
    found = list(findings)
    own = by_name()[layer].blocked_by_ids if layer in by_name() else ()
    return blocker_among(found, layers_needed(layer), subject, framework) or next(
        (
            f
            for f in found
            if f.id in own
            and f.severity is Severity.BLOCKER
            and not _other_gpu(f, subject)
            and not _other_framework(f, framework)
        ),
        None,
    )


def consequence_of(findings: Iterable[Finding], f: Finding) -> Finding | None:
    """The blocker of a broken layer that ``f``'s own evidence needs, if any: ``f`` is then its consequence."""
    return blocker_among(findings, layers_needed_by_cause(f.id, f.layer), f.subject, f.framework)


def independent_of(f: Finding, rc: Finding | None) -> bool:
    """Whether ``f`` cannot be a consequence of the root cause ``rc``: it lies above ``rc`` and what it rests on
    does not need ``rc``'s layer (NVML's health readings do not need TensorFlow), or it is about a GPU other than
    ``rc``'s, for which ``rc`` blocks no layer (one lost GPU of six leaves the others' questions answered, as
    :func:`blocker_among` decides them): its own red line either way."""
    if rc is None or f is rc or rc.layer == RUN_LAYER:
        return False
    if _other_gpu(rc, f.subject) or _other_framework(rc, f.framework):
        return True
    cat = catalog()
    return cat.layer_rank(rc.layer) < cat.layer_rank(f.layer) and rc.layer not in layers_needed_by_cause(f.id, f.layer)


@dataclass(frozen=True)
class LayerState:
    layer: str
    #: "ok", "broken", "degraded", "blocked" or "not checked".
    state: str
    finding_ids: tuple[str, ...]
    #: The id of what blocks it, when it is blocked.
    blocked_by: str | None = None


def layer_states(
    findings: tuple[Finding, ...], rc: Finding | None, checked: frozenset[str], framework: str | None = None
) -> tuple[LayerState, ...]:
    """Each layer: "blocked" by a broken layer it needs, "broken", "degraded", "ok" or "not checked". A
    fault whose own evidence needs a broken layer (memory-config-failed needs TensorFlow) is that layer's
    consequence: it leaves its layer blocked rather than broken. With ``framework``, the layers as that framework
    sees them: the lower stack's findings and its own, not another framework's."""
    if framework is not None:
        findings = tuple(f for f in findings if not _other_framework(f, framework))
    states = []
    for layer in LAYERS:
        here = [f for f in findings if f.layer == layer.name and f.is_fault]
        ids = tuple(dict.fromkeys(f.id for f in here))
        blocker = layer_blocker(findings, layer.name)
        causes = [(f, consequence_of(findings, f)) for f in here]
        free = [f for f, by in causes if by is None]
        consequence = next((by for _f, by in causes if by is not None), None)
        if layer.name not in checked:
            state, by = "not checked", None
        elif blocker is not None:
            state, by = "blocked", blocker.id
        elif any(f.severity is Severity.BLOCKER for f in free):
            state, by = "broken", None
        elif free:
            state, by = "degraded", None
        elif consequence is not None:
            state, by = "blocked", consequence.id
        else:
            state, by = "ok", None
        states.append(LayerState(layer.name, state, ids, by))
    if rc is not None and rc.layer == RUN_LAYER:
        states = [LayerState(s.layer, "not checked", s.finding_ids) for s in states]
    return tuple(states)


# --- what a check decides -------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One question a check asks: its layer, the finding ids that answer it, and what it needs."""

    layer: str
    ids: tuple[str, ...]
    #: Finding ids (of its own layer) whose blocker, unless it is about another GPU, blocks this question: a GPU
    #: that takes no op cannot be asked whether its results are right.
    blocked_by_ids: tuple[str, ...] = ()
    #: Layers this question needs beyond its layer's own (memory settings are a resource that needs TensorFlow).
    needs: tuple[str, ...] = ()
    #: The subject of a per-GPU question ("GPU-0"): findings about another subject are not its own.
    subject: str | None = None
    #: Why the facts for this question are missing, where the diagnosis does not say (a benchmark that the
    #: benchmark process did not measure).
    unchecked: str | None = None
    #: The layers it needs instead of its layer's own: a benchmark on the CPU needs TensorFlow, not the GPUs.
    instead: tuple[str, ...] | None = None
    #: The benchmark a performance question is about: a finding that names other benchmarks is not its own.
    benchmark: str | None = None
    #: The framework whose unit asks it: another framework's findings neither answer nor block it.
    framework: str | None = None


@dataclass(frozen=True)
class Decision:
    outcome: Literal["passed", "failed", "skipped"]
    reason: str = ""
    #: The faults it fails with.
    faults: tuple[Finding, ...] = ()
    #: The ids of the findings that answer it (faults or notes), for the report.
    finding_ids: tuple[str, ...] = ()
    blocked_by: Finding | None = None


class Diagnosed(Protocol):
    """What a decision reads of a diagnosis (``gpucheck.diagnosis.Result``)."""

    @property
    def findings(self) -> tuple[Finding, ...]: ...
    @property
    def layers(self) -> tuple[LayerState, ...]: ...
    @property
    def unchecked(self) -> Mapping[str, str]: ...


def unchecked_key(framework: str | None, cause_id: str) -> str:
    """Where a diagnosis keeps why a question of ``cause_id`` was not checked: a framework unit's reason under
    ``"<framework>/<id>"`` (two frameworks ask questions of one id), the lower stack's under the id."""
    return f"{framework}/{cause_id}" if framework else cause_id


def decide(result: Diagnosed, q: Question, framework_none: bool = False) -> Decision:
    """Blocked (skipped, naming the blocker), failed with the question's own faults, not checked (skipped,
    saying why), or passed."""

    def about(f: Finding) -> bool:
        if q.benchmark is not None:
            named = f.evidence.get("benchmarks", [f.evidence["benchmark"]] if "benchmark" in f.evidence else None)
            if named is not None and q.benchmark not in named:
                return False
        if _other_framework(f, q.framework):
            return False
        if framework_none and q.framework is not None:
            # No framework was diagnosed: a framework's question owns nothing (PyTorch's device count names the
            # driver's 802 and 803 too); a lower layer's blocker blocks it, else it is not checked.
            return False
        return q.subject is None or f.subject is None or f.subject == q.subject

    mine = [f for f in result.findings if f.id in q.ids and about(f)]
    ids = tuple(f.id for f in mine)
    if q.instead is not None:
        wanted = frozenset().union(*(layers_needed(n) | {n} for n in q.instead))
    else:
        wanted = layers_needed(q.layer).union(*(layers_needed(n) | {n} for n in q.needs))
    blocker = blocker_among(result.findings, wanted, q.subject, q.framework) or next(
        # Not ``about(f)``: placement names TensorFlow's devices ("/GPU:0", "placement step"), a per-GPU question
        # NVML's GPU ("GPU-0"), so only a blocker about another of NVML's GPUs leaves it answered (as layer_blocker).
        (f for f in result.findings if f.id in q.blocked_by_ids and f.severity is Severity.BLOCKER
         and not _other_gpu(f, q.subject) and not _other_framework(f, q.framework)),
        None,
    )
    if blocker is not None and blocker not in mine:
        return Decision("skipped", f"blocked by {blocker.id}", finding_ids=ids, blocked_by=blocker)
    faults = tuple(f for f in mine if f.is_fault)
    # The diagnosis says why, under the id the question is named after (its first): its framework's reason first.
    unchecked = q.unchecked or (
        result.unchecked.get(unchecked_key(q.framework, q.ids[0]), result.unchecked.get(q.ids[0])) if q.ids else None
    )
    if unchecked is None and framework_none and q.framework is not None:
        unchecked = "--gpucheck-framework=none"  # a framework's question, and no framework was looked at
    if unchecked is None and any(s.layer == q.layer and s.state == "not checked" for s in result.layers):
        unchecked = "--gpucheck-framework=none" if framework_none else f"the {q.layer} layer is not diagnosed"
    if not faults and unchecked is not None:
        return Decision("skipped", f"not checked: {unchecked}", finding_ids=ids)
    if not faults:
        return Decision("passed", finding_ids=ids)
    return Decision("failed", faults=faults, finding_ids=ids)


F = TypeVar("F", bound=Callable[..., object])
#: The attribute a check function carries its question under (set by :func:`asks`).
QUESTION_ATTRIBUTE = "gpucheck_question"


def asks(layer: str, ids: tuple[str, ...], *, blocked_by_ids: tuple[str, ...] = (), needs: tuple[str, ...] = (),
         instead: tuple[str, ...] | None = None) -> Callable[[F], F]:
    """Declare the question a check asks. The session decides it before the check runs (blocked and "not
    checked" are skips at setup); a per-GPU check's ``gpu`` parameter is its subject."""
    question = Question(layer, ids, blocked_by_ids, needs, instead=instead)

    def mark(fn: F) -> F:
        setattr(fn, QUESTION_ATTRIBUTE, question)
        return fn

    return mark
