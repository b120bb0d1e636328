"""Rendering a diagnosis: the failure text of a check, the header, the summary section, the JSON report."""

from __future__ import annotations

import errno
import json
import os
import stat
from importlib import resources
from typing import Any

from gpucheck.diagnosis import Result, environment
from gpucheck.facts import Facts
from gpucheck.layers import independent_of
from gpucheck.model import Finding
from gpucheck.rules import cluster, performance
from gpucheck.rules.devicemap import device_map_lines
from gpucheck.settings import Settings, one_line, report_target

SCHEMA = "gpucheck-report/1"
#: The JSON Schema of the report, in the package (gpucheck/data/report.schema.json).
SCHEMA_FILE = "data/report.schema.json"
#: Temporary files beside the report while it is written.
TEMP_PREFIX = ".gpucheck-report-"
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
        if state.state == "blocked" and state.blocked_by is not None:
            detail = f"by {state.blocked_by}"
        elif state.finding_ids:
            detail = ", ".join(state.finding_ids)
        out.append((f"{state.layer:<{width}}  {state.state:<11} {detail}".rstrip(), _STATE_MARKUP[state.state]))
    out.append(("", {}))
    if rc is not None:
        out.append((f"root cause: {rc.id} ({rc.layer}): {rc.summary}", {"red": True, "bold": True}))
        out.extend((line, {}) for line in failure_text(rc).splitlines()[1:])
    # Faults that are not consequences of a broken layer they need: their checks answer them.
    others = [f for f in result.findings if f is not rc and f.is_fault and result.cause_blocked_by(f) is None]
    for f in others:
        lead = "also, not caused by the root cause" if independent_of(f, rc) else "also"
        out.append((f"{lead}: {f.id} ({f.layer}, {f.severity.value}): {f.summary}", {"yellow": True}))
    out.extend((line, {}) for line in performance_lines(result))
    if result.facts is not None:
        out.extend((line, {}) for line in cluster.cluster_summary(result.facts))
    markup = {"accelerated": {"green": True}, "degraded": {"yellow": True}}.get(result.verdict, {"red": True})
    out.append((f"verdict: {result.verdict}", {**markup, "bold": True}))
    return out


#: The headline figure of each kind of benchmark (``extra_info`` key, unit, format).
HEADLINE = {
    "matmul": ("tflops", "TFLOP/s"),
    "matpow": ("tflops", "TFLOP/s"),
    "matpow_fallback": ("slowdown", ""),
    "copy": ("gbps", "GB/s"),
    "conv": ("tflops", "TFLOP/s"),
    "launch": ("latency_us", "us per op"),
    "allreduce": ("busbw_gbps", "GB/s bus bandwidth"),
    "scaling": ("samples_per_s", "samples/s"),
}


def performance_lines(result: Result) -> list[str]:
    """The benchmarks' headline figures (``--gpucheck-benchmarks``), with their GPU model's expectation."""
    facts = result.facts
    pf = performance.performance(facts) if facts is not None else None
    if facts is None or pf is None or not pf.benchmarks:
        return []
    lines = ["", "performance (pytest-benchmark's extra_info has every figure):"]
    width = max(len(r.name) for r in pf.benchmarks)
    for run in pf.benchmarks:
        if run.error is not None:
            lines.append(f"  {run.name:<{width}}  not measured: {run.error[:100]}")
            continue
        key, unit = HEADLINE.get(run.kind, ("", ""))
        value = run.extra_info.get(key)
        text = f"{value:.3g} {unit}" if isinstance(value, float) else "-"
        if run.kind == "scaling" and isinstance(value, float):
            text = f"{value:,.0f} {unit}"
        if run.kind == "matpow_fallback" and isinstance(value, float):
            text = f"ran on {run.extra_info.get('device')}: {value:.2f}x the time of {run.extra_info.get('compared_with')}"
        if run.kind == "scaling" and isinstance(run.extra_info.get("efficiency"), float):
            text += f", {run.extra_info['efficiency']:.0%} efficiency"
            if not run.physical:
                text += " (logical devices: not judged)"
        exp = performance.expectation(facts, run)
        if exp is not None:
            text += f" ({exp.share:.0%} of the {exp.model}'s {exp.expected:.3g}{'' if exp.judged else ', not judged'})"
        lines.append(f"  {run.name:<{width}}  {text}")
    return lines


def report_json(result: Result, checks: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    rc = result.root_cause
    return {
        "schema": SCHEMA,
        "verdict": result.verdict,
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
        "layers": [{"layer": s.layer, "state": s.state, "finding_ids": list(s.finding_ids)} for s in result.layers],
        "complete": result.complete,
        "settings": {name: {"value": getattr(settings, name.replace("-", "_")), "source": source}
                     for name, source in settings.sources},
        "environment": environment(),
    }


class ReportWriteError(OSError):
    """The report could not be written; ``str()`` is the sentence to show ("cannot write the report to
    PATH: why"), naming the path the user gave, never a temporary file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(one_line(f"cannot write the report to {path}: {reason}"))
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) every report follows, as the package ships it."""
    schema: dict[str, Any] = json.loads(resources.files("gpucheck").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
    return schema


def write_json(path: str, result: Result, checks: list[dict[str, Any]], settings: Settings) -> None:
    """Write the report to ``path`` (see :func:`write_report`); :class:`ReportWriteError` when it cannot."""
    data = report_json(result, checks, settings)
    write_report(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def write_report(path: str, text: str) -> None:
    """Write ``text`` to ``path`` the way its kind asks (``gpucheck.settings.report_target``):

    - a new path or an existing regular file: atomically, a temporary file in the same directory renamed
      over it, so a reader never sees half a report. A new file's mode follows the umask, as with
      ``open(path, "w")``; an existing file keeps its mode (and, where allowed, its owner and group).
    - a symlink: followed, and the same rules applied to what it points at; the link itself stays.
    - a character device (``/dev/null``, a terminal): written through, never replaced.
    - a FIFO: written through when a process reads it. It is opened without blocking, so a FIFO that no
      process has open for reading is an error (ENXIO) instead of a run that never ends.
    - a directory, a block device or a socket: refused.

    Every failure is a :class:`ReportWriteError` naming ``path``.
    """
    data = text.encode("utf-8")
    try:
        target = report_target(path)
    except ValueError as exc:
        raise ReportWriteError(path, str(exc)) from None
    if target.kind == "fifo":
        _write_through(path, target.path, data, fifo=True)
    elif target.kind == "device":
        _write_through(path, target.path, data, fifo=False)
    else:
        _write_atomically(path, target.path, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_through(given: str, path: str, data: bytes, fifo: bool) -> None:
    # O_NONBLOCK for the open only: a FIFO without a reader fails with ENXIO instead of blocking, and a
    # device that waits in open (a serial line without carrier) does not hang the run. O_TRUNC is ignored
    # for FIFOs and devices; it empties a regular file reached through a /proc magic link.
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if fifo else os.O_TRUNC)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if fifo and exc.errno == errno.ENXIO:
            raise ReportWriteError(
                given, "it is a FIFO that no process reads (start its reader before the run ends)"
            ) from None
        raise ReportWriteError(given, f"it cannot be opened for writing ({exc.strerror})") from None
    try:
        os.set_blocking(fd, True)
        _write_all(fd, data)
    except OSError as exc:
        raise ReportWriteError(given, f"writing failed ({exc.strerror})") from None
    finally:
        os.close(fd)


def _write_atomically(given: str, path: str, data: bytes) -> None:
    directory, name = os.path.split(path)
    try:
        old: os.stat_result | None = os.stat(path)
    except OSError:
        old = None
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise ReportWriteError(given, f"{directory} cannot be created ({exc.strerror})") from None
    fd, tmp = _create_temporary(given, directory, name)
    try:
        try:
            if old is not None:
                _keep_owner_and_mode(fd, old)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise ReportWriteError(given, f"writing failed ({exc.strerror})") from None
        raise


def _create_temporary(given: str, directory: str, name: str) -> tuple[int, str]:
    """A new file beside the target, created as ``open(path, "w")`` creates one: mode 0o666 less the
    umask (the kernel applies it, and a default ACL), not mkstemp's 0o600."""
    for _ in range(100):
        # The target's name, shortened: the temporary one must fit in NAME_MAX too.
        tmp = os.path.join(directory, f"{TEMP_PREFIX}{name[:64]}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise ReportWriteError(given, f"no file can be created in {directory} ({exc.strerror})") from None
    raise ReportWriteError(given, f"no unused temporary name in {directory}")


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            pass  # Not root: the report is ours now, as an editor's save would make it.
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def machine_info(result: Result) -> dict[str, Any]:
    """What a saved benchmark ran on (``machine_info["gpucheck"]``, DESIGN.md "Contract: performance"):
    the driver, the CUDA driver API, the CUDA and cuDNN TensorFlow was built with, the CUDA runtime and
    cuDNN the loader finds, TensorFlow, and the GPUs NVML lists (else the CUDA driver's). None where unknown."""
    facts = result.facts
    info: dict[str, Any] = dict.fromkeys(
        ("driver", "cuda_driver", "cuda_build", "cuda_loaded", "cudnn_build", "cudnn_loaded", "tensorflow"), None
    )
    info["gpus"] = []
    if facts is None:
        return info
    nf, cf = facts.nvml.facts, facts.cuda.facts
    info["driver"] = facts.kernel.module_version or (nf.driver_version if nf is not None else None)
    api = cf.driver_version if cf is not None and cf.driver_version else (nf.cuda_driver_version if nf else None)
    info["cuda_driver"] = f"{api // 1000}.{api % 1000 // 10}" if api else None
    tf = facts.framework.facts if facts.framework is not None else None
    if tf is not None and tf.importable:
        info["tensorflow"] = tf.version
        if tf.is_cuda_build:
            info["cuda_build"] = _text(tf.build_info.get("cuda_version"))
            info["cudnn_build"] = _text(tf.build_info.get("cudnn_version"))
    lf = facts.libraries.facts if facts.libraries is not None else None
    loaded = {lib.key: lib.version for lib in (lf.libraries if lf is not None else ()) if lib.loaded}
    info["cuda_loaded"] = loaded.get("cudart")
    info["cudnn_loaded"] = loaded.get("cudnn")
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
