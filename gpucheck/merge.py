"""``gpucheck merge REPORT.json...``: many hosts' reports (``--gpucheck-json`` on each node, e.g. through
``srun`` or a Kubernetes Job) joined into one table and one JSON, hosts whose root causes agree grouped.

Exit status: 0 every host accelerated, 1 at least one not, 2 unusable input (one sentence). Standard
library only: it reads the reports' JSON (schema ``gpucheck-report/1``), nothing else.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from gpucheck import registry
from gpucheck.jsonfile import Unreadable, dig, read_json

ALL_ACCELERATED, NOT_ACCELERATED, UNUSABLE = 0, 1, 2
SCHEMA = "gpucheck-report/1"


class UnusableReport(Exception):
    """A report that cannot be merged, with the sentence that says why."""


@dataclass(frozen=True)
class Host:
    host: str
    path: str
    verdict: str
    root_cause: str | None
    root_cause_summary: str | None
    #: Faults other than the root cause (ids).
    also: list[str]
    gpus: list[str]
    driver: str | None
    tensorflow: str | None
    complete: bool
    #: Key figures where the run measured them: the cluster's all-reduce (``allreduce_latency_ms``,
    #: ``allreduce_busbw_gbps``, this host's task), the best matmul (``matmul_tflops``, and its device).
    figures: dict[str, Any]


def read(path: str) -> Host:
    try:
        report = read_json(path, "a gpucheck report")
    except Unreadable as exc:
        raise UnusableReport(str(exc)) from None
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        raise UnusableReport(f"{path} is not a gpucheck report (no \"schema\": \"{SCHEMA}\"; made by --gpucheck-json)")
    verdict = report.get("verdict")
    if verdict not in ("accelerated", "degraded", "not-accelerated"):
        raise UnusableReport(f"{path} has no verdict")
    rc = report.get("root_cause") if isinstance(report.get("root_cause"), dict) else None
    findings = [f for f in report.get("findings") or [] if isinstance(f, dict)]
    also = [
        str(f.get("id")) for f in findings
        if f.get("severity") in ("blocker", "degraded") and (rc is None or f.get("id") != rc.get("id"))
    ]
    facts = report.get("facts") if isinstance(report.get("facts"), dict) else {}
    gpus = [
        str(g.get("name")) for g in dig(facts, "nvml", "facts", "gpus") or [] if isinstance(g, dict) and g.get("name")
    ]
    driver = dig(facts, "kernel", "module_version") or dig(facts, "nvml", "facts", "driver_version")
    host = dig(report, "environment", "host") or os.path.splitext(os.path.basename(path))[0]
    return Host(
        host=str(host),
        path=path,
        verdict=verdict,
        root_cause=str(rc.get("id")) if rc else None,
        root_cause_summary=str(rc.get("summary")) if rc and rc.get("summary") else None,
        also=list(dict.fromkeys(also)),
        gpus=gpus,
        driver=str(driver) if driver else None,
        tensorflow=dig(facts, "framework", "facts", "version"),
        complete=bool(report.get("complete", True)),
        figures=registry.figures(facts),
    )


def figures_text(figures: dict[str, Any]) -> str:
    return "; ".join(registry.figures_text(figures)) or "-"


def _gpus(names: list[str]) -> str:
    if not names:
        return "none"
    counts = Counter(names)
    return ", ".join(f"{c}x {n.removeprefix('NVIDIA ')}" for n, c in counts.items())


def groups(hosts: Sequence[Host]) -> list[tuple[str, list[Host]]]:
    """Hosts by root cause (the healthy ones under "accelerated", degraded ones by their first fault), the
    largest group first."""
    by: dict[str, list[Host]] = {}
    for h in hosts:
        key = h.root_cause or (h.also[0] if h.verdict == "degraded" and h.also else h.verdict)
        by.setdefault(key, []).append(h)
    return sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def merge(paths: Sequence[str]) -> list[Host]:
    if not paths:
        raise UnusableReport("no report given: gpucheck merge REPORT.json [REPORT.json ...]")
    return [read(p) for p in paths]


def exit_status(hosts: Sequence[Host]) -> int:
    return ALL_ACCELERATED if all(h.verdict == "accelerated" for h in hosts) else NOT_ACCELERATED


def text_report(hosts: Sequence[Host], out: TextIO) -> None:
    rows = [
        [h.host, h.verdict + ("" if h.complete else " (incomplete)"), h.root_cause or ", ".join(h.also) or "-",
         _gpus(h.gpus), h.driver or "-", h.tensorflow or "-", figures_text(h.figures)]
        for h in hosts
    ]
    headers = ["host", "verdict", "root cause", "GPUs", "driver", "TensorFlow", "key figures"]
    widths = [max(len(headers[i]), *(len(r[i]) for r in rows)) for i in range(len(headers))]
    out.write("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
    out.write("\nHosts grouped by root cause:\n")
    for key, members in groups(hosts):
        summary = next((h.root_cause_summary for h in members if h.root_cause_summary), None)
        out.write(f"  {key} ({len(members)} host{'s' if len(members) != 1 else ''}): {', '.join(h.host for h in members)}\n")
        if summary and len(members) == len([m for m in members if m.root_cause == key]):
            out.write(f"    e.g. {summary}\n")
    bad = [h for h in hosts if h.verdict != "accelerated"]
    out.write(
        f"\n{len(hosts) - len(bad)} of {len(hosts)} host{'s' if len(hosts) != 1 else ''} accelerated"
        + (f"; not accelerated: {', '.join(h.host for h in bad)}.\n" if bad else ".\n")
    )


def json_report(hosts: Sequence[Host]) -> dict[str, Any]:
    return {
        "schema": "gpucheck-fleet/1",
        "hosts": [asdict(h) for h in hosts],
        "groups": [{"cause": key, "hosts": [h.host for h in members]} for key, members in groups(hosts)],
        "accelerated": sum(h.verdict == "accelerated" for h in hosts),
        "not_accelerated": sum(h.verdict != "accelerated" for h in hosts),
        "exit_status": exit_status(hosts),
    }
