"""Visibility layer: do CUDA_VISIBLE_DEVICES and friends let the process see the GPUs."""

from __future__ import annotations

from gpucheck.facts import Facts
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.common import CUDA_NO_DEVICE
from gpucheck.settings import Settings


def visibility_rules(facts: Facts, settings: Settings) -> list[Finding]:
    vis = facts.visibility
    if vis.cuda_visible_devices is None:
        return []
    value = vis.cuda_visible_devices
    dropped = [e for e in vis.entries if not e.honoured]
    cf = facts.cuda.facts
    cuinit_no_device = cf is not None and cf.init is not None and cf.init.code == CUDA_NO_DEVICE
    evidence = {
        "CUDA_VISIBLE_DEVICES": value,
        "entries": [{"entry": e.text, "kind": e.kind, "used": e.honoured, "why_not": e.reason} for e in vis.entries],
        "gpus_on_host": vis.device_count,
        "cuInit": cf.init.code if cf is not None and cf.init is not None else None,
    }
    first_bad = next((e for e in dropped if e.reason and not e.reason.startswith("after")), None)
    why = f" ({first_bad.text!r}: {first_bad.reason})" if first_bad else ""
    if vis.hides_all or (cuinit_no_device and (vis.device_count or 0) > 0):
        count = vis.device_count
        return [
            finding(
                "devices-hidden-by-env",
                Severity.BLOCKER,
                summary=f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from this process.",
                cause=(
                    ("An empty CUDA_VISIBLE_DEVICES shows no device" if not value.strip() else
                     f"The CUDA driver stops reading CUDA_VISIBLE_DEVICES at its first invalid entry{why}, "
                     "so no device is left")
                    + (f" although the host has {count} GPU(s)." if count else ".")
                ),
                remedy=(
                    "Unset it (`unset CUDA_VISIBLE_DEVICES`) or list devices that exist"
                    + (f": indices 0 to {count - 1} or GPU-<uuid>" if count else "")
                    + "; check where it is set (shell profile, job script, container env, scheduler)."
                ),
                evidence=evidence,
            )
        ]
    if dropped:
        return [
            finding(
                "devices-hidden-by-env",
                Severity.DEGRADED,
                summary=f"CUDA_VISIBLE_DEVICES={value!r} names devices that do not exist; the driver ignores "
                f"{', '.join(repr(e.text) for e in dropped)}.",
                cause=f"The CUDA driver stops reading the list at its first invalid entry{why}: that entry and "
                "every one after it are hidden.",
                remedy="Name only devices that exist (indices from 0, or GPU-<uuid> from `nvidia-smi -L`).",
                evidence=evidence,
            )
        ]
    return []
