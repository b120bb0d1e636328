"""Findings, the cause catalog and the acceleration stack.

A finding is what a rule concludes from facts. Its ``id`` is one of the cause
catalog (``data/catalog.json``, the contract in DESIGN.md); ``layer`` comes from
the catalog, so a rule cannot put a cause in the wrong layer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from importlib import resources
from typing import Any

#: The pseudo layer of ``diagnosis-incomplete``: below every real layer, since
#: nothing can be said about the stack when the run did not finish.
RUN_LAYER = "run"

#: What a fleet's automation should do with the node for a finding, least to most severe (DESIGN.md, "Contract:
#: the report JSON"). Each cause's default is the catalog's ``action``; evidence may raise it (:func:`raised_action`).
ACTIONS: tuple[str, ...] = ("none", "reconfigure", "stop-processes", "reset-gpu", "reboot", "service-hardware")
NO_ACTION = "none"
#: The evidence key whose value raises a finding's action: the driver's own recovery action (Xid 154's line, NVML's
#: recovery-action field), as an action name, NVML's number, or the driver's words.
RECOVERY_ACTION_KEY = "recovery_action"
#: NVML's ``nvmlDeviceGpuRecoveryAction_t`` (and Xid 154's ``0xN (...)``) as actions: 3 "drain P2P" stops the work
#: on the GPU; 5 "recover IMEX domain" restarts a service; 6 a PCIe bus reset is a reset of the GPU.
NVML_RECOVERY_ACTIONS: dict[int, str] = {
    0: "none", 1: "reset-gpu", 2: "reboot", 3: "stop-processes", 4: "reset-gpu", 5: "reconfigure", 6: "reset-gpu",
    7: "reboot",
}
#: The driver's words for its recovery actions (Xid 154: "GPU recovery action changed from 0x0 (None) to 0x2 (Node
#: Reboot Required)"), most specific first.
_RECOVERY_WORDS: tuple[tuple[str, str], ...] = (
    ("drain and reset", "reset-gpu"),
    ("drain p2p", "stop-processes"),
    ("system reboot", "reboot"),
    ("node reboot", "reboot"),
    ("reboot", "reboot"),
    ("bus reset", "reset-gpu"),
    ("gpu reset", "reset-gpu"),
    ("reset", "reset-gpu"),
    ("imex", "reconfigure"),
    ("none", "none"),
)
_HEX = re.compile(r"0x([0-9a-f]+)", re.IGNORECASE)
#: The evidence key of a finding that says a source of facts the diagnosis was asked to read could not be read to its
#: end (the kernel log's probe crashed, was killed, timed out): its value names the source. Such a source is "not
#: checked", never "healthy": ``gpucheck doctor`` exits 2 on it where nothing else makes the node not usable.
UNREAD_KEY = "unread"


def action_rank(action: str) -> int:
    return ACTIONS.index(action)


def most_severe(actions: Iterable[str]) -> str:
    """The most severe of ``actions`` (``none`` for none at all)."""
    return max(actions, key=action_rank, default=NO_ACTION)


def recovery_action(value: Any) -> str | None:
    """The action a recovery action found in evidence asks for, or None when it names none that is known: an
    action name, NVML's number, the driver's text (the last ``0xN`` of "changed from 0x0 (None) to 0x2 (Node Reboot
    Required)", else its words), or a list of them (the most severe)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return NVML_RECOVERY_ACTIONS.get(value)
    if isinstance(value, (list, tuple)):
        found = [a for a in (recovery_action(v) for v in value) if a is not None]
        return most_severe(found) if found else None
    if isinstance(value, dict):
        for key in ("action", "code", "value", "text"):
            if key in value:
                return recovery_action(value[key])
        return None
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    if text in ACTIONS:
        return text
    if text.isdigit():
        return NVML_RECOVERY_ACTIONS.get(int(text))
    codes = _HEX.findall(text)
    if codes:
        return NVML_RECOVERY_ACTIONS.get(int(codes[-1], 16))
    return next((action for words, action in _RECOVERY_WORDS if words in text), None)


def raised_action(default: str, evidence: dict[str, Any]) -> str:
    """``default``, raised (never lowered) by the recovery action the evidence names."""
    named = recovery_action(evidence.get(RECOVERY_ACTION_KEY)) if RECOVERY_ACTION_KEY in evidence else None
    return default if named is None else most_severe((default, named))


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
    #: The recommended action by default (one of ``ACTIONS``); a finding's evidence may raise it.
    action: str = NO_ACTION


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
    causes = {
        cid: Cause(cid, c["layer"], c["meaning"], c.get("needs", c["layer"]), c.get("action", NO_ACTION))
        for cid, c in raw["causes"].items()
    }
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
    #: What a fleet's automation should do with the node (``ACTIONS``): the catalog's default, raised by evidence.
    action: str = NO_ACTION
    #: The framework whose unit found it ("tensorflow"); None for the lower stack's. It blocks only that framework's
    #: questions (``gpucheck.blocking``).
    framework: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "severity": self.severity.value,
            "layer": self.layer,
            "summary": self.summary,
            "cause": self.cause,
            "remedy": self.remedy,
            "action": self.action,
            "evidence": self.evidence,
        }
        if self.subject is not None:
            out["subject"] = self.subject
        if self.framework is not None:
            out["framework"] = self.framework
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
    """Build a finding whose layer and action are the catalog's (the action raised by the evidence's
    ``recovery_action``, :func:`raised_action`); an unknown id is a programming error."""
    entry = catalog().causes[cause_id]
    evidence = evidence or {}
    return Finding(
        id=cause_id,
        severity=severity,
        layer=entry.layer,
        summary=summary,
        cause=cause,
        remedy=remedy,
        evidence=evidence,
        subject=subject,
        action=raised_action(entry.action, evidence),
    )


def unread(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that say a source could not be read to its end (:data:`UNREAD_KEY`)."""
    return [f for f in findings if UNREAD_KEY in f.evidence]


def verdict(findings: list[Finding] | tuple[Finding, ...]) -> str:
    if any(f.severity is Severity.BLOCKER for f in findings):
        return "not-accelerated"
    if any(f.severity is Severity.DEGRADED for f in findings):
        return "degraded"
    return "accelerated"
