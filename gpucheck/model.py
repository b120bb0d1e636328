"""Findings, the cause catalog and the acceleration stack.

A finding is what a rule concludes from facts. Its ``id`` is one of the cause
catalog (``data/catalog.json``, the contract in DESIGN.md); ``layer`` comes from
the catalog, so a rule cannot put a cause in the wrong layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from importlib import resources
from typing import Any

#: The pseudo layer of ``diagnosis-incomplete``: below every real layer, since
#: nothing can be said about the stack when the run did not finish.
RUN_LAYER = "run"


class Severity(str, Enum):
    BLOCKER = "blocker"
    DEGRADED = "degraded"
    INFO = "info"


@dataclass(frozen=True)
class Cause:
    id: str
    layer: str
    meaning: str
    #: The highest layer the evidence of this cause depends on (its own layer unless the catalog says lower).
    needs: str


@dataclass(frozen=True)
class Catalog:
    layers: tuple[str, ...]
    causes: dict[str, Cause]

    def layer_rank(self, layer: str) -> int:
        if layer == RUN_LAYER:
            return -1
        return self.layers.index(layer)


@cache
def catalog() -> Catalog:
    text = resources.files("gpucheck").joinpath("data/catalog.json").read_text(encoding="utf-8")
    raw = json.loads(text)
    causes = {cid: Cause(cid, c["layer"], c["meaning"], c.get("needs", c["layer"])) for cid, c in raw["causes"].items()}
    return Catalog(layers=tuple(raw["layers"]), causes=causes)


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    layer: str
    summary: str
    cause: str
    remedy: str
    evidence: dict[str, Any] = field(default_factory=dict)
    #: Which GPU (index) or other subject the finding is about, when it is about one.
    subject: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "severity": self.severity.value,
            "layer": self.layer,
            "summary": self.summary,
            "cause": self.cause,
            "remedy": self.remedy,
            "evidence": self.evidence,
        }
        if self.subject is not None:
            out["subject"] = self.subject
        return out

    @property
    def is_fault(self) -> bool:
        return self.severity is not Severity.INFO


def finding(
    cause_id: str,
    severity: Severity,
    *,
    summary: str,
    cause: str,
    remedy: str,
    evidence: dict[str, Any] | None = None,
    subject: str | None = None,
) -> Finding:
    """Build a finding whose layer is the catalog's; an unknown id is a programming error."""
    entry = catalog().causes[cause_id]
    return Finding(
        id=cause_id,
        severity=severity,
        layer=entry.layer,
        summary=summary,
        cause=cause,
        remedy=remedy,
        evidence=evidence or {},
        subject=subject,
    )


def verdict(findings: list[Finding] | tuple[Finding, ...]) -> str:
    if any(f.severity is Severity.BLOCKER for f in findings):
        return "not-accelerated"
    if any(f.severity is Severity.DEGRADED for f in findings):
        return "degraded"
    return "accelerated"
