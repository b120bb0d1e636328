"""Rendering a diagnosis: the failure text of a check, the header, the summary section, the JSON report."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from gpucheck.diagnosis import Result, environment
from gpucheck.facts import Facts
from gpucheck.model import Finding, independent_of
from gpucheck.rules.devicemap import device_map_lines
from gpucheck.settings import Settings

SCHEMA = "gpucheck-report/1"
_STATE_MARKUP: dict[str, dict[str, bool]] = {
    "ok": {"green": True},
    "broken": {"red": True, "bold": True},
    "degraded": {"yellow": True},
    "blocked": {"yellow": True},
    "not checked": {},
}


def _evidence_lines(evidence: dict[str, Any], limit: int = 12) -> list[str]:
    lines = []
    for key, value in list(evidence.items())[:limit]:
        if value in (None, [], {}, ""):
            continue
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            lines.append(f"    {key}:")
            lines.extend(f"      | {v}" for v in value[-12:])
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            lines.append(f"    {key}: {text}")
    return lines


def failure_text(f: Finding) -> str:
    lines = [f"{f.id} [{f.layer}, {f.severity.value}]: {f.summary}", f"  cause: {f.cause}"]
    ev = _evidence_lines(f.evidence)
    if ev:
        lines.append("  evidence:")
        lines.extend(ev)
    lines.append(f"  remedy: {f.remedy}")
    return "\n".join(lines)


def header_lines(result: Result) -> list[str]:
    facts = result.facts
    if facts is None:
        return ["gpucheck: diagnosis incomplete"]
    parts: list[str] = []
    gpus = facts.hardware.nvidia_gpus
    if gpus:
        parts.append(f"{len(gpus)} NVIDIA GPU(s) on the bus ({', '.join(g.bus_id for g in gpus)})")
    elif facts.hardware.readable:
        parts.append("no NVIDIA GPU")
    else:
        parts.append("PCI bus not readable")
    drv = facts.kernel.module_version or (facts.nvml.facts.driver_version if facts.nvml.facts else None)
    parts.append(f"driver {drv}" if drv else "driver: none loaded")
    cf = facts.cuda.facts
    if cf is not None and cf.driver_version:
        parts.append(f"CUDA driver API {cf.driver_version // 1000}.{cf.driver_version % 1000 // 10}")
    elif cf is not None and not cf.library.loaded:
        parts.append("libcuda.so.1: not found")
    tf = facts.framework.facts if facts.framework is not None else None
    if facts.framework is None:
        parts.append("TensorFlow: not diagnosed (--gpucheck-framework=none)")
    elif tf is not None and tf.importable:
        bi = tf.build_info
        build = (
            f"CUDA {bi.get('cuda_version')}, cuDNN {bi.get('cudnn_version')}" if tf.is_cuda_build else "CPU-only build"
        )
        parts.append(f"TensorFlow {tf.version} ({build}) sees {len(tf.gpus)} GPU(s)")
    elif tf is not None:
        parts.append("TensorFlow: not importable")
    else:
        parts.append(f"TensorFlow probe: {facts.framework.exit.status}")
    lines = ["gpucheck: " + "; ".join(parts)]
    lines.extend(inventory_lines(facts))
    lines.extend(device_map_lines(facts))
    rc = result.root_cause
    lines.append(f"gpucheck verdict: {result.verdict}" + (f" (root cause: {rc.id})" if rc else ""))
    return lines


def inventory_lines(facts: Facts, limit: int = 16) -> list[str]:
    """The GPUs as NVML lists them, one line each; nothing when NVML did not answer."""
    nf = facts.nvml.facts
    if nf is None or nf.init is None or nf.init.code != 0:
        return []
    cuda = nf.cuda_driver_version
    head = f"gpucheck: NVML {nf.nvml_version or '?'} (driver {nf.driver_version or '?'}" + (
        f", CUDA {cuda // 1000}.{cuda % 1000 // 10})" if cuda else ")"
    ) + f" lists {nf.device_count or 0} GPU(s)"
    lines = [head]
    for g in nf.gpus[:limit]:
        if g.handle_error is not None:
            lines.append(f"gpucheck:   GPU {g.index}: unreachable ({g.handle_error.name})")
            continue
        bits = [g.name or "?", g.pci_bus_id or "?"]
        if g.compute_capability:
            bits.append(f"cc {g.compute_capability}")
        if g.memory is not None:
            bits.append(f"{g.memory.free / 2**30:.1f} of {g.memory.total / 2**30:.1f} GiB free")
        if g.mig is not None and g.mig.current == 1:
            bits.append(f"MIG on ({len(g.mig.instances)} instance(s))")
        if g.pcie is not None and g.pcie.gen is not None and g.pcie.width is not None:
            bits.append(f"PCIe Gen{g.pcie.gen} x{g.pcie.width}")
        if g.temperature_c is not None:
            bits.append(f"{g.temperature_c} C")
        lines.append(f"gpucheck:   GPU {g.index}: " + ", ".join(bits))
    if len(nf.gpus) > limit:
        lines.append(f"gpucheck:   ... and {len(nf.gpus) - limit} more (all in the JSON report's facts)")
    return lines


def summary_lines(result: Result) -> list[tuple[str, dict[str, bool]]]:
    out: list[tuple[str, dict[str, bool]]] = []
    rc = result.root_cause
    width = max((len(s.layer) for s in result.layers), default=10)
    for state in result.layers:
        detail = ""
        if state.state == "blocked" and rc is not None:
            detail = f"by {rc.id}"
        elif state.finding_ids:
            detail = ", ".join(state.finding_ids)
        out.append((f"{state.layer:<{width}}  {state.state:<11} {detail}".rstrip(), _STATE_MARKUP[state.state]))
    out.append(("", {}))
    if rc is not None:
        out.append((f"root cause: {rc.id} ({rc.layer}): {rc.summary}", {"red": True, "bold": True}))
        out.extend((line, {}) for line in failure_text(rc).splitlines()[1:])
    others = [f for f in result.findings if f is not rc and f.is_fault and result.blocked_by(f.layer) is None]
    for f in others:
        out.append((f"also: {f.id} ({f.layer}, {f.severity.value}): {f.summary}", {"yellow": True}))
    for f in result.findings:
        if f.is_fault and independent_of(f, rc):
            out.append(
                (f"also, not caused by the root cause (its check waits for it): {f.id} ({f.layer}, "
                 f"{f.severity.value}): {f.summary}", {"yellow": True})
            )
    markup = {"accelerated": {"green": True}, "degraded": {"yellow": True}}.get(result.verdict, {"red": True})
    out.append((f"verdict: {result.verdict}", {**markup, "bold": True}))
    return out


def report_json(result: Result, checks: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    rc = result.root_cause
    return {
        "schema": SCHEMA,
        "verdict": result.verdict,
        "root_cause": rc.to_json() if rc is not None else None,
        "findings": [
            {
                **f.to_json(),
                "blocked_by": b.id if (b := result.blocked_by(f.layer)) is not None else None,
                "independent_of_root_cause": independent_of(f, rc),
            }
            for f in result.findings
        ],
        "facts": result.facts_json(),
        "checks": checks,
        "layers": [{"layer": s.layer, "state": s.state, "finding_ids": list(s.finding_ids)} for s in result.layers],
        "complete": result.complete,
        "settings": {name: {"value": getattr(settings, name.replace("-", "_")), "source": source}
                     for name, source in settings.sources},
        "environment": environment(),
    }


def write_json(path: str, result: Result, checks: list[dict[str, Any]], settings: Settings) -> None:
    """Write the report atomically: a temporary file beside the target, then a rename."""
    data = report_json(result, checks, settings)
    target = os.path.abspath(path)
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".gpucheck-report-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
