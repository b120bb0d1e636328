"""The promises a report makes to the person reading it, as assertions the scenario tests share.

- **One red line**: every failed check carries the root cause, another fault of the root cause's own layer,
  a finding the report marks ``independent_of_root_cause`` (docs/how-it-works.md, "Checks": above the root cause and
  not resting on it, or about another GPU), a (degraded) fault of a layer the root cause's layer rests on, which
  cannot be its consequence either, or, under a degraded root cause (which blocks nothing), any fault. A failed check
  that carries only a consequence of the root cause is a second red line with the wrong remedy.
- **Not checked is never passed**: with ``--gpucheck-framework=none`` no TensorFlow process runs, so every
  check whose question needs a framework layer is skipped (not checked, or blocked by a lower root cause).
"""

from __future__ import annotations

import importlib
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any

import gpucheck
from gpucheck.blocking import GPU_SUBJECTS, QUESTION_ATTRIBUTE, Question, layers_needed, layers_needed_by_cause
from gpucheck.layers import by_name

PACKAGE = Path(gpucheck.__file__).parent


def assert_one_red_line(report: dict[str, Any]) -> None:
    """Every failed check carries the root cause, a fault of the root cause's layer, or an independent finding."""
    rc = report["root_cause"]
    assert rc is not None, "a failed run names its root cause"
    findings = {f["id"]: f for f in report["findings"]}
    failed = [c for c in report["checks"] if c["outcome"] == "failed"]
    assert failed, "the root cause's own check fails"
    assert any(rc["id"] in c["finding_ids"] for c in failed), "the root cause is a failed check's finding"

    def allowed(fid: str) -> bool:
        f = findings[fid]
        return (
            fid == rc["id"]
            or (f["layer"] == rc["layer"] and f["severity"] != "info")
            or f["independent_of_root_cause"]
            # A fault below what the root cause rests on (a degraded NVML under a visibility root cause, XLA's
            # toolchain under memory-config-failed, which needs TensorFlow) is no consequence of it.
            or f["layer"] in layers_needed_by_cause(rc["id"], rc["layer"])
            # A degraded root cause (the lowest fault of a degraded verdict) blocks nothing: each fault is its own line.
            or (rc["severity"] == "degraded" and f.get("blocked_by") is None)
        )

    for check in failed:
        assert any(allowed(fid) for fid in check["finding_ids"]), (
            f"{check['nodeid']} fails with {check['finding_ids']}: neither the root cause {rc['id']}, a fault of its "
            f"layer {rc['layer']} or below, nor a finding independent of it "
            f"({[(i, findings[i]['layer'], findings[i]['independent_of_root_cause']) for i in check['finding_ids']]})"
        )
    # The JSON field reads back as the rule says: independent findings lie above the root cause's layer, or are about a
    # GPU other than the root cause's, for which it blocks nothing (blocking.independent_of).
    for f in report["findings"]:
        if f["independent_of_root_cause"]:
            other_gpu = _other_gpu(rc.get("subject"), f.get("subject"))
            same = f["id"] == rc["id"] and f.get("subject") == rc.get("subject")
            assert not same and (other_gpu or rc["layer"] not in layers_needed_by_cause(f["id"], f["layer"])), f
            assert f.get("blocked_by") is None, f


def _other_gpu(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a != b and a.startswith(GPU_SUBJECTS) and b.startswith(GPU_SUBJECTS)


@cache
def _check_modules() -> dict[str, str]:
    """Check file name -> importable module (``checks_host.py`` -> ``gpucheck.checks.checks_host``)."""
    out = {}
    for path in PACKAGE.rglob("checks_*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out[path.name] = ".".join(rel.parts)
    return out


def question_of(nodeid: str) -> Question:
    """The question the check of ``nodeid`` asks (its ``@asks``)."""
    path, _, name = nodeid.partition("::")
    module = importlib.import_module(_check_modules()[Path(path).name])
    question = getattr(getattr(module, name.split("[")[0]), QUESTION_ATTRIBUTE)
    assert isinstance(question, Question), nodeid
    return question


def needs_tensorflow(q: Question) -> bool:
    """Whether the question needs a layer only the framework probes answer (its own layer included)."""
    if q.instead is not None:
        wanted = frozenset().union(*(layers_needed(n) | {n} for n in q.instead))
    else:
        wanted = layers_needed(q.layer).union({q.layer}, *(layers_needed(n) | {n} for n in q.needs))
    return any(by_name()[name].framework for name in wanted)


def skip_reasons(junit: Path) -> dict[str, str]:
    """Test name (``test_x[GPU-0]``) -> its skip message, from a JUnit XML file."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None:
            out[case.get("name", "")] = skipped.get("message", "")
    return out


def assert_tensorflow_checks_not_checked(report: dict[str, Any], junit: Path) -> list[str]:
    """With --gpucheck-framework=none: every check needing TensorFlow is skipped, as not checked (or blocked
    by a lower root cause); none passes or fails. Returns the names of those checks."""
    reasons = skip_reasons(junit)
    names = []
    for check in report["checks"]:
        if not needs_tensorflow(question_of(check["nodeid"])):
            continue
        name = check["nodeid"].rsplit("::", 1)[-1]
        names.append(name)
        assert check["outcome"] == "skipped", check
        assert "not checked" in reasons[name] or "blocked by" in reasons[name], (name, reasons[name])
    return names
