"""Classify TensorFlow's own log lines with the patterns of data/log_patterns.json.

Used by ``gpucheck explain`` on a log a person pasted, and by the framework rules on the TensorFlow
probe child's stderr. Pure functions, standard library only. Harmless lines (oneDNN, NUMA node,
cpu_feature_guard, ...) are recognised so that they are reported as such and never become a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from gpucheck import knowledge
from gpucheck.model import Finding, Severity, finding, root_cause

_SEVERITY = {"blocker": Severity.BLOCKER, "degraded": Severity.DEGRADED, "info": Severity.INFO}
_CODE_IN_PARENS = re.compile(r"\((\d+)\)\s*$")
_ERROR_NAME = re.compile(r"\b(CUDA_ERROR_[A-Z_]+)\b")


@dataclass(frozen=True)
class Pattern:
    id: str
    regex: re.Pattern[str]
    finding: str | None
    severity: str
    summary: str
    cause: str
    remedy: str
    report: str | None


@dataclass(frozen=True)
class LineMatch:
    line: str
    pattern: Pattern
    groups: dict[str, str]
    #: The finding this line supports (a cuInit code can redirect the pattern's own).
    finding: str | None


@dataclass
class Classification:
    matches: list[LineMatch] = field(default_factory=list)
    unrecognised: list[str] = field(default_factory=list)

    @property
    def harmless(self) -> list[LineMatch]:
        return [m for m in self.matches if m.finding is None]

    @property
    def meaningful(self) -> list[LineMatch]:
        return [m for m in self.matches if m.finding is not None]


@cache
def patterns() -> tuple[Pattern, ...]:
    out = []
    for raw in knowledge.data("log_patterns.json")["patterns"]:
        out.append(
            Pattern(
                id=raw["id"],
                regex=re.compile(raw["regex"]),
                finding=raw.get("finding"),
                severity=raw["severity"],
                summary=raw.get("summary", ""),
                cause=raw.get("cause", ""),
                remedy=raw.get("remedy", ""),
                report=raw.get("report"),
            )
        )
    return tuple(out)


@cache
def cuinit_codes() -> dict[int, dict[str, str]]:
    raw = knowledge.data("log_patterns.json")["cuinit_codes"]
    return {int(k): v for k, v in raw.items() if not k.startswith("_")}


@cache
def _error_codes_by_name() -> dict[str, int]:
    raw = knowledge.data("cuda_errors.json")
    return {v: int(k) for k, v in raw.items() if not k.startswith("_")}


def cuinit_code(detail: str) -> int | None:
    """``INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)`` -> 303;
    ``CUDA_ERROR_NO_DEVICE`` -> 100."""
    m = _CODE_IN_PARENS.search(detail.strip())
    if m:
        return int(m.group(1))
    n = _ERROR_NAME.search(detail)
    if n:
        return _error_codes_by_name().get(n.group(1))
    return None


def classify(lines: list[str] | tuple[str, ...]) -> Classification:
    result = Classification()
    table = patterns()
    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        for pattern in table:
            m = pattern.regex.search(line)
            if m is None:
                continue
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            target = pattern.finding
            if pattern.id == "cuinit-failed":
                code = cuinit_code(groups.get("detail", ""))
                if code is not None and code in cuinit_codes():
                    target = cuinit_codes()[code]["finding"]
                if code is not None:
                    groups["code"] = str(code)
            result.matches.append(LineMatch(line, pattern, groups, target))
            break
        else:
            result.unrecognised.append(line)
    return result


def _fill(text: str, groups: dict[str, str]) -> str:
    try:
        return text.format(**groups)
    except (KeyError, IndexError, ValueError):
        return text


def findings_from_log(lines: list[str] | tuple[str, ...]) -> list[Finding]:
    """One finding per cause the log supports, with its lines as evidence; harmless lines give none.

    A generic line ("Cannot dlopen some GPU libraries") does not add a cause when a specific line
    names the library (cuDNN missing is its own cause, not also "CUDA runtime missing")."""
    found = classify(lines)
    by_id: dict[str, list[LineMatch]] = {}
    for m in found.meaningful:
        by_id.setdefault(m.finding or "", []).append(m)
    generic = {"cannot-dlopen-gpu-libraries"}
    if "cuda-runtime-missing" in by_id and all(m.pattern.id in generic for m in by_id["cuda-runtime-missing"]):
        if any(k in by_id for k in ("cudnn-missing", "libcuda-missing")):
            del by_id["cuda-runtime-missing"]
    # A failed cuInit is explained by a more precise driver-layer line when the log has one.
    if "cuda-init-failed" in by_id and any(
        k in by_id for k in ("driver-library-mismatch", "libcuda-missing", "forward-compat-unsupported")
    ):
        del by_id["cuda-init-failed"]
    out: list[Finding] = []
    for cause_id, matches in by_id.items():
        first = matches[0]
        groups = dict(first.groups)
        summary = _fill(first.pattern.summary, groups)
        cause = _fill(first.pattern.cause, groups)
        remedy = _fill(first.pattern.remedy, groups)
        severity = _SEVERITY.get(first.pattern.severity, Severity.INFO)
        if first.pattern.id == "cuinit-failed" and "code" in groups:
            override = cuinit_codes().get(int(groups["code"]))
            if override:
                summary = override.get("summary", summary)
                remedy = override.get("remedy", remedy)
                cause = f"{cause} {summary}"
        evidence: dict[str, Any] = {
            "log_lines": [m.line for m in matches][:12],
            "patterns": sorted({m.pattern.id for m in matches}),
        }
        libraries = sorted({m.groups["library"] for m in matches if "library" in m.groups})
        if libraries:
            evidence["libraries"] = libraries
        reports = sorted({m.pattern.report for m in matches if m.pattern.report})
        if reports:
            evidence["reports"] = reports
        for key, value in groups.items():
            if key not in ("library",):
                evidence.setdefault(key, value)
        out.append(finding(cause_id, severity, summary=summary, cause=cause, remedy=remedy, evidence=evidence))
    return out


def explain(lines: list[str] | tuple[str, ...]) -> tuple[list[Finding], Classification, Finding | None]:
    """Findings of a log, its classification, and the root cause among them (lowest layer)."""
    findings = findings_from_log(lines)
    return findings, classify(lines), root_cause(findings)
