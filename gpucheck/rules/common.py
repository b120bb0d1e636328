"""Helpers that several rule modules share: how a probe child ended, a library's version from its
file name, whether a GPU is on the bus, and the one CUDA result code more than one layer reads."""

from __future__ import annotations

import os.path
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpucheck.facts import ChildExit, Facts, NumericCheck, NvmlGpu, PciDevice
from gpucheck.model import Finding, Severity, finding

#: cuInit's CUDA_ERROR_NO_DEVICE: the driver layer and the visibility layer both read it.
CUDA_NO_DEVICE = 100
#: cuInit's CUDA_ERROR_SYSTEM_NOT_READY: on an NVSwitch machine, Fabric Manager has not set up the fabric
#: (``fabric-manager-not-running``, the records unit's); elsewhere the driver rules' ``cuda-init-failed``.
CUDA_SYSTEM_NOT_READY = 802

def label(gpu: NvmlGpu) -> str:
    """A GPU as findings name it in prose: ``GPU 3 (NVIDIA H100 80GB HBM3, 00000000:5D:00.0)``."""
    parts = [p for p in (gpu.name, gpu.pci_bus_id) if p]
    return f"GPU {gpu.index}" + (f" ({', '.join(parts)})" if parts else "")


_LIB_VERSION = re.compile(r"\.so\.(\d+\.\d+(?:\.\d+)?)$")


def library_version(path: str | None) -> str | None:
    """``/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15`` -> ``550.54.15`` (how TensorFlow reads it too)."""
    if not path:
        return None
    m = _LIB_VERSION.search(os.path.basename(path))
    return m.group(1) if m else None


def driver_enumerated_gpus(facts: Facts) -> int:
    """How many GPUs a driver call enumerated (CUDA or NVML), 0 when none answered."""
    counts = [0]
    if facts.cuda.facts is not None and facts.cuda.facts.device_count:
        counts.append(facts.cuda.facts.device_count)
    if facts.nvml.facts is not None and facts.nvml.facts.device_count:
        counts.append(facts.nvml.facts.device_count)
    return max(counts)


def gpus_on_bus(facts: Facts) -> bool:
    """An NVIDIA GPU is on the PCI bus, a driver call enumerated one, or WSL's /dev/dxg stands for one."""
    return bool(facts.hardware.nvidia_gpus) or driver_enumerated_gpus(facts) > 0 or facts.hardware.wsl_dxg


def module_loaded(facts: Facts) -> bool:
    """The nvidia kernel module is loaded, as /proc's version file or /sys/module/nvidia shows it."""
    return facts.kernel.version_line is not None or facts.kernel.module_in_sysfs


def unheld_gpus(facts: Facts) -> tuple[PciDevice, ...]:
    """The GPUs on the PCI bus that no driver holds while the nvidia module is loaded: the driver's probe of each
    failed (the records unit's ``gpu-init-failed`` names why, from the kernel log). A GPU bound to another driver
    (vfio-pci for a VM) is someone's choice, not a failed probe."""
    if not module_loaded(facts):
        return ()
    return tuple(d for d in facts.hardware.nvidia_gpus if d.driver is None)


def none_held(facts: Facts) -> bool:
    """Every GPU on the bus is one the loaded driver does not hold (:func:`unheld_gpus`): no ``/dev/nvidia<N>`` can
    exist and cuInit finds no device, consequences of the failed probes, not faults of their own."""
    unheld = unheld_gpus(facts)
    return bool(unheld) and len(unheld) == len(facts.hardware.nvidia_gpus)


#: PCI class 0x0680 ("other bridge"): an NVIDIA function of this class is an NVSwitch, never a GPU.
NVSWITCH_CLASS_PREFIX = "0x0680"


def nvswitches(facts: Facts) -> tuple[PciDevice, ...]:
    """The NVSwitches on the PCI bus (NVIDIA functions of class 0x0680): HGX/DGX machines, where CUDA needs Fabric
    Manager. They are never GPUs (``HardwareFacts.nvidia_gpus`` holds class 0x03 only)."""
    return tuple(d for d in facts.hardware.nvidia_devices if d.pci_class.lower().startswith(NVSWITCH_CLASS_PREFIX))


#: Error and fatal log lines: absl's ("E0000 00:00:..."), TensorFlow 1.x/2.x's ("2026-... : F file.cc:37] ..."),
#: and Python's own "Fatal Python error" (faulthandler).
_SEVERE_LINE = re.compile(r"^(?:[EF]\d{4} |\d{4}-\d\d-\d\d [\d:.]+: [EF] )|Fatal Python error")
_TRACE_LINE = re.compile(r"^(?:  File \"|Current thread 0x|Thread 0x|Extension modules:|\s*$)")


def child_evidence(exit_: ChildExit) -> dict[str, Any]:
    """How a probe child ended, with the lines that say why: severe log lines first, then the tail
    of its output without Python's stack frames."""
    return {
        "severe_lines": [ln for ln in exit_.stderr_tail if _SEVERE_LINE.search(ln)][-10:],
        "status": exit_.status,
        "returncode": exit_.returncode,
        "signal": exit_.signal,
        "last_call": exit_.last_stage,
        "duration_s": exit_.duration_s,
        "output_tail": [ln for ln in exit_.stderr_tail if not _TRACE_LINE.match(ln)][-15:],
        "error": exit_.error,
    }


@dataclass(frozen=True)
class FrameworkProbe:
    """How a framework's findings about its own probe child name it: its title, the call it starts with, a command
    a person runs to see where it stops, and what its fatal log lines say (empty where it has none)."""

    title: str
    first_call: str
    try_it: str
    fatal_lines: str = ""


def framework_probe_failure(probe: FrameworkProbe, exit_: ChildExit, timeout: float) -> Finding:
    """A framework's probe child that reported nothing: ``framework-hung`` (killed at its time limit) or
    ``framework-crashed`` (it died, could not run or ended without reporting)."""
    return _framework_hung(probe, exit_, timeout) if exit_.status == "timeout" else framework_crashed(probe, exit_)


def _framework_hung(probe: FrameworkProbe, exit_: ChildExit, timeout: float) -> Finding:
    """``framework-hung``: the framework's probe was killed at its time limit before it reported."""
    return finding(
        "framework-hung",
        Severity.BLOCKER,
        summary=f"{probe.title} did not finish {exit_.last_stage or 'starting'} within {timeout:g} s.",
        cause=(
            f"The {probe.title} probe was killed with its process group after {timeout:g} s in "
            f"{exit_.last_stage or 'start-up'}; no lower driver call hung on its own."
        ),
        remedy=(
            f"Run `{probe.try_it}` to see where it stops; a slow first start (PTX JIT compilation) needs a larger "
            "--gpucheck-timeout."
        ),
        evidence=child_evidence(exit_),
    )


def framework_crashed(probe: FrameworkProbe, exit_: ChildExit) -> Finding:
    """``framework-crashed``: the framework's probe died, could not run, or ended without reporting."""
    how = exit_.signal or (f"exit code {exit_.returncode}" if exit_.returncode is not None else exit_.error)
    return finding(
        "framework-crashed",
        Severity.BLOCKER,
        summary=f"The {probe.title} probe process died ({how}) in {exit_.last_stage or 'start-up'}.",
        cause=(
            f"Python running `{exit_.last_stage or probe.first_call}` ended with {how} before it could "
            f"report; {probe.title}'s last output is in the evidence."
        ),
        remedy=(
            f"Read the last lines of output in the evidence: {probe.fatal_lines}an illegal-instruction signal means "
            "the wheel needs CPU features this machine lacks."
        ),
        evidence=child_evidence(exit_),
    )


def probe_failure(name: str, library: str, exit_: ChildExit, timeout: float) -> Finding | None:
    """A driver probe child that hung or died is a finding of its own: ``driver-hung`` (it timed out),
    ``driver-call-crashed`` (it died) or ``diagnosis-incomplete`` (it could not start)."""
    where = exit_.last_stage or "start-up"
    if exit_.status == "timeout":
        return _driver_hung(name, where, exit_, timeout)
    if exit_.status == "crashed":
        return _driver_call_crashed(name, library, where, exit_)
    if exit_.status == "error":
        return _diagnosis_incomplete(name, exit_)
    return None


def _driver_hung(name: str, where: str, exit_: ChildExit, timeout: float) -> Finding:
    """``driver-hung``: the probe child was killed at its time limit."""
    return finding(
        "driver-hung",
        Severity.BLOCKER,
        summary=f"A driver call ({where}) did not return within {timeout:g} s.",
        cause=(
            f"The {name} probe hung in {where} and was killed with its process group after {timeout:g} s: the GPU "
            "or the driver is in a bad state, and every CUDA program (TensorFlow too) will hang the same way."
        ),
        remedy=(
            "Look at `sudo dmesg` for Xid errors and at `nvidia-smi`; stop what holds the GPU, then reset it "
            "(`sudo nvidia-smi -r -i <gpu>`) or reboot. If the machine is only slow, raise --gpucheck-timeout."
        ),
        evidence=child_evidence(exit_),
    )


def _driver_call_crashed(name: str, library: str, where: str, exit_: ChildExit) -> Finding:
    """``driver-call-crashed``: the probe child died of a signal or an exit code."""
    how = exit_.signal or f"exit code {exit_.returncode}"
    return finding(
        "driver-call-crashed",
        Severity.BLOCKER,
        summary=f"{library} crashed the process that called {where} ({how}).",
        cause=(
            f"The {name} probe died with {how} in {where}: the user-space driver is broken or does not match "
            "this system; every CUDA program will die the same way."
        ),
        remedy=(
            "Reinstall the NVIDIA driver (user-space libraries and kernel module of one version) and reboot; "
            "check `sudo dmesg` for Xid errors."
        ),
        evidence=child_evidence(exit_),
    )


def _diagnosis_incomplete(name: str, exit_: ChildExit) -> Finding:
    """``diagnosis-incomplete``: the probe child could not be started."""
    return finding(
        "diagnosis-incomplete",
        Severity.BLOCKER,
        summary=f"The {name} probe could not run.",
        cause=exit_.error or "the probe process could not be started",
        remedy="Check that the Python running pytest can start a child process of itself.",
        evidence=child_evidence(exit_),
    )


def numerical_mismatch(device: str, items: Sequence[NumericCheck]) -> Finding | None:
    """``numerical-mismatch`` for ``device`` where any of its checks computed a result outside its tolerance; None
    where none did. Every check of the device is in the evidence."""
    wrong = [c for c in items if not c.ok and c.exception is None]
    if not wrong:
        return None
    return finding(
        "numerical-mismatch",
        Severity.BLOCKER,
        summary=f"{device} computes wrong results: "
        + ", ".join(f"{c.op} in {c.precision}" for c in wrong) + " disagree with the float64 CPU reference.",
        cause="On fresh random inputs, " + "; ".join(
            f"{c.op} ({c.shape}, {c.precision}) on {c.ran_on} is off by "
            f"{format(c.error, '.3g') if c.error is not None else 'an unknown amount'} (tolerance {c.tolerance:g})"
            for c in wrong
        ) + ". A GPU that returns wrong numbers is faulty (memory errors, overclocking, a driver or library bug), not slow.",
        remedy="Check ECC errors and clocks (`nvidia-smi -q -d ECC,CLOCK`), run `compute-sanitizer` or the vendor's "
        "diagnostics (`dcgmi diag -r 3`), and try another driver; do not train on this GPU meanwhile.",
        evidence={"device": device, "checks": [
            {"op": c.op, "precision": c.precision, "error": c.error, "tolerance": c.tolerance, "ran_on": c.ran_on}
            for c in items
        ]},
        subject=device,
    )


def numeric_raised(framework: str, device: str, c: NumericCheck, remedy: str) -> Finding:
    """``placement-failed`` for a numerics check that raised on ``device`` (``framework`` as its words name it)."""
    return finding(
        "placement-failed",
        Severity.BLOCKER,
        summary=f"{c.op} in {c.precision} cannot run on {device}.",
        cause=f"{framework} raised while running {c.op} ({c.shape}) on {device}: {c.exception}",
        remedy=remedy,
        evidence={"device": device, "op": c.op, "precision": c.precision, "error": c.exception},
        subject=f"{c.op} on {device}",
    )


def numerics_findings(framework: str, checks: Sequence[NumericCheck], remedy: str) -> list[Finding]:
    """A framework's numerics step judged, device by device: ``numerical-mismatch`` where results are off, and
    ``placement-failed`` for each check that raised (``remedy`` says what a raising check needs, in its terms)."""
    out: list[Finding] = []
    by_device: dict[str, list[NumericCheck]] = {}
    for c in checks:
        by_device.setdefault(c.device, []).append(c)
    for device, items in by_device.items():
        mismatch = numerical_mismatch(device, items)
        if mismatch is not None:
            out.append(mismatch)
        out.extend(numeric_raised(framework, device, c, remedy) for c in items if c.exception is not None)
    return out
