"""Rendering a diagnosis: the failure text of a check, the header, the summary section, the JSON report."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from gpucheck import frameworks, registry
from gpucheck.blocking import LayerState, independent_of
from gpucheck.diagnosis import Result, environment
from gpucheck.facts import Facts
from gpucheck.model import Finding, Severity, most_severe
from gpucheck.reportfile import one_line, write_report
from gpucheck.rules.devicemap import device_map_lines
from gpucheck.settings import Settings

SCHEMA = "gpucheck-report/1"
#: The JSON Schema of the report, in the package (gpucheck/data/report.schema.json).
SCHEMA_FILE = "data/report.schema.json"
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


def _detail_lines(f: Finding, full: bool = True) -> list[str]:
    """A finding's lines below its first: its cause and evidence (``full``), its remedy and action. Values come from
    the environment and from files (TF_CONFIG, a host name, a log): an escape sequence in one must reach the
    terminal as text, never as a command to it, so each line is one printable line."""
    lines = []
    if full:
        lines.append(f"  cause: {f.cause}")
        ev = _evidence_lines(f.evidence)
        if ev:
            lines.append("  evidence:")
            lines.extend(ev)
    lines.append(f"  remedy: {f.remedy}")
    lines.append(f"  action: {f.action}")
    return [one_line(line) for line in lines]


def failure_text(f: Finding) -> str:
    return "\n".join([one_line(f"{f.id} [{f.layer}, {f.severity.value}]: {f.summary}"), *_detail_lines(f)])


def root_cause_lines(rc: Finding, full: bool = True) -> list[str]:
    """The root cause as every summary gives it (the terminal's, the marked tests', ``gpucheck doctor``'s): its
    headline, then its cause and evidence (not with ``full=False``: the doctor's short summary), its remedy and
    action; each one printable line."""
    return [one_line(f"root cause: {rc.id} ({rc.layer}): {rc.summary}"), *_detail_lines(rc, full)]


def other_faults(result: Result) -> list[Finding]:
    """The faults beside the root cause that are not consequences of a broken layer they need: the summaries
    name each (their checks answer them)."""
    return [f for f in result.findings if f is not result.root_cause and f.is_fault and result.cause_blocked_by(f) is None]


def _not_loaded(name: str, error: str | None) -> str:
    """``libcuda.so.1: not found`` only where the loader found no such file; a file found that does not load
    (a truncated copy, a wrong architecture) says so, with the loader's words."""
    if error is None or "No such file" in error:
        return f"{name}: not found"
    return f"{name}: found but does not load ({error.removeprefix(name + ': ')})"


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
        parts.append(_not_loaded(cf.library.name, cf.library.error))
    parts += [view.header for view in facts.frameworks.values()]
    if not facts.frameworks:
        default = registry.framework_named(frameworks.DEFAULT)
        parts.append(f"{default.title if default else 'framework'}: not diagnosed (--gpucheck-framework=none)")
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
        if g.nvlink is not None and g.nvlink.links:
            bits.append(f"NVLink {g.nvlink.active} of {len(g.nvlink.links)} active")
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
        if state.state == "blocked" and state.blocked_by is not None:
            detail = f"by {state.blocked_by}"
        elif state.finding_ids:
            detail = ", ".join(state.finding_ids)
        out.append((f"{state.layer:<{width}}  {state.state:<11} {detail}".rstrip(), _STATE_MARKUP[state.state]))
    out.append(("", {}))
    if rc is not None:
        headline, *details = root_cause_lines(rc)
        # A degraded verdict names its root cause too (the lowest degraded finding), in the verdict's colour.
        out.append((headline, {"red" if rc.severity is Severity.BLOCKER else "yellow": True, "bold": True}))
        out.extend((line, {}) for line in details)
    for f in other_faults(result):
        lead = "also, not caused by the root cause" if independent_of(f, rc) else "also"
        out.append((f"{lead}: {f.id} ({f.layer}, {f.severity.value}): {f.summary}", {"yellow": True}))
    if result.facts is not None:
        out.extend((line, {}) for line in registry.summary_lines(result.facts))
    if len(result.frameworks) > 1:
        # Several frameworks: each one's own verdict (one's fault never blocks another's questions).
        for fw in result.frameworks:
            why = f" (root cause: {fw.root_cause.id})" if fw.root_cause is not None else ""
            broken = [f"{s.layer} {s.state}" for s in fw.layers if s.state not in ("ok", "not checked")]
            out.append((f"{fw.name}: {fw.verdict}{why}" + (f"; {', '.join(broken)}" if broken else ""), {}))
    markup = {"accelerated": {"green": True}, "degraded": {"yellow": True}}.get(result.verdict, {"red": True})
    out.append((f"verdict: {result.verdict}", {**markup, "bold": True}))
    action = node_action(result)
    if action != "none":
        out.append((f"recommended action: {action}", {}))
    return out


def node_action(result: Result) -> str:
    """The most severe recommended action of the run's findings: what a fleet's automation should do with the node."""
    return most_severe(f.action for f in result.findings)


def _layers_json(layers: tuple[LayerState, ...]) -> list[dict[str, Any]]:
    return [{"layer": s.layer, "state": s.state, "finding_ids": list(s.finding_ids)} for s in layers]


def _framework_names(result: Result, name: str) -> dict[str, str | None]:
    """How a framework of the report is written ("PyTorch") and the version diagnosed ("2.13.0+cpu"; None where it
    did not import), from its view: what ``gpucheck merge`` shows of each host's frameworks. Nothing where the facts
    stayed with another process (an xdist worker)."""
    view = result.facts.frameworks.get(name) if result.facts is not None else None
    return {"title": view.title, "version": view.version} if view is not None else {}


def framework_label(result: Result, name: str) -> str:
    """A framework of the run as a person reads it: "PyTorch 2.13.0+cpu" (its title and the version diagnosed; its
    name where its facts stayed with another process)."""
    named = _framework_names(result, name)
    return " ".join(str(v) for v in (named.get("title") or name, named.get("version")) if v)


def report_json(result: Result, checks: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    rc = result.root_cause
    return {
        "schema": SCHEMA,
        "verdict": result.verdict,
        "action": node_action(result),
        "root_cause": rc.to_json() if rc is not None else None,
        "findings": [
            {
                **f.to_json(),
                "blocked_by": b.id if (b := result.cause_blocked_by(f)) is not None else None,
                "independent_of_root_cause": independent_of(f, rc),
            }
            for f in result.findings
        ],
        "facts": result.facts_json(),
        "checks": checks,
        "layers": _layers_json(result.layers),
        # Each framework asked for, as it sees the stack (its findings and the lower stack's): additive to the schema.
        "frameworks": {
            fw.name: {
                "verdict": fw.verdict,
                "root_cause": fw.root_cause.id if fw.root_cause is not None else None,
                "layers": _layers_json(fw.layers),
                **_framework_names(result, fw.name),
            }
            for fw in result.frameworks
        },
        "complete": result.complete,
        "settings": {name: {"value": getattr(settings, name.replace("-", "_")), "source": source}
                     for name, source in settings.sources},
        "environment": environment(),
    }


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) every report follows, as the package ships it."""
    schema: dict[str, Any] = json.loads(resources.files("gpucheck").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
    return schema


def write_json(path: str, result: Result, checks: list[dict[str, Any]], settings: Settings) -> None:
    """Write the report to ``path`` (``gpucheck.reportfile.write_report``); ``ReportWriteError`` when it cannot."""
    data = report_json(result, checks, settings)
    write_report(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def machine_info(result: Result) -> dict[str, Any]:
    """What a saved benchmark ran on (``machine_info["gpucheck"]``, DESIGN.md "Contract: performance"):
    the driver, the CUDA driver API, what each diagnosed framework says (TensorFlow's: the CUDA and cuDNN it was
    built with, the CUDA runtime and cuDNN the loader finds, its version), and the GPUs NVML lists (else the CUDA
    driver's). None where unknown."""
    facts = result.facts
    info: dict[str, Any] = dict.fromkeys(
        ("driver", "cuda_driver", "cuda_build", "cuda_loaded", "cudnn_build", "cudnn_loaded", frameworks.DEFAULT), None
    )
    info["gpus"] = []
    if facts is None:
        return info
    nf, cf = facts.nvml.facts, facts.cuda.facts
    info["driver"] = facts.kernel.module_version or (nf.driver_version if nf is not None else None)
    api = cf.driver_version if cf is not None and cf.driver_version else (nf.cuda_driver_version if nf else None)
    info["cuda_driver"] = f"{api // 1000}.{api % 1000 // 10}" if api else None
    # Each diagnosed framework's own entries (the first's win where two name the same key).
    for view in reversed(facts.frameworks.values()):
        info.update(view.machine_info)
    if nf is not None and nf.gpus:
        info["gpus"] = [
            {
                "index": g.index,
                "name": g.name,
                "uuid": g.uuid,
                "pci_bus_id": g.pci_bus_id,
                "compute_capability": g.compute_capability,
                "memory_total": g.memory.total if g.memory is not None else None,
            }
            for g in nf.gpus
        ]
    elif cf is not None:
        info["gpus"] = [
            {
                "index": d.ordinal,
                "name": d.name,
                "uuid": d.uuid,
                "pci_bus_id": d.pci_bus_id,
                "compute_capability": f"{d.cc_major}.{d.cc_minor}" if d.cc_major is not None else None,
                "memory_total": d.memory_total,
            }
            for d in cf.devices
        ]
    return info


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
