"""Device numbering: nvidia-smi's index (NVML, PCI bus order), the CUDA ordinal (CUDA_DEVICE_ORDER,
default FASTEST_FIRST, then CUDA_VISIBLE_DEVICES) and each diagnosed framework's ``GPU:N``, side by side.

The rows are joined on the PCI bus id, which NVML and the CUDA driver both report; a framework's names come from
what its unit says of the CUDA devices it registers (``Facts.frameworks``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucheck.facts import Facts, gpu_index
from gpucheck.model import Finding, Severity, finding
from gpucheck.pci import BusId, pci_key
from gpucheck.settings import Settings


@dataclass(frozen=True)
class DeviceRow:
    pci_bus_id: str | None
    name: str | None
    nvml_index: int | None
    cuda_ordinal: int | None
    #: Each diagnosed framework's name for the GPU ("GPU:1"), by framework ("tensorflow"); None where it
    #: registers no such GPU (or its ordinals cannot be told).
    frameworks: dict[str, str | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "pci_bus_id": self.pci_bus_id,
            "name": self.name,
            "nvidia-smi": self.nvml_index,
            "cuda": self.cuda_ordinal,
            **self.frameworks,
        }


def _framework_names(facts: Facts) -> dict[str, dict[int, str]]:
    """Each diagnosed framework's CUDA ordinal -> its GPU name (``Facts.frameworks``, what its unit says)."""
    return {
        name: {g.cuda_ordinal: g.device for g in view.gpus if g.cuda_ordinal is not None}
        for name, view in facts.frameworks.items()
    }


def device_map(facts: Facts) -> list[DeviceRow]:
    cf = facts.cuda.facts
    nf = facts.nvml.facts
    nvml = [g for g in (getattr(nf, "gpus", ()) or ()) if getattr(g, "handle_error", None) is None]
    cuda_rows = [(d.ordinal, pci_key(d.pci_bus_id), d) for d in (cf.devices if cf is not None else ())]
    names = _framework_names(facts)

    def named(ordinal: int | None) -> dict[str, str | None]:
        return {fw: (by.get(ordinal) if ordinal is not None else None) for fw, by in names.items()}

    rows: list[DeviceRow] = []
    seen: set[BusId] = set()
    for g in nvml:
        key = pci_key(g.pci_bus_id)
        match = next((r for r in cuda_rows if key is not None and r[1] == key), None)
        if key is not None:
            seen.add(key)
        ordinal = match[0] if match else None
        rows.append(DeviceRow(g.pci_bus_id, g.name, g.index, ordinal, named(ordinal)))
    for ordinal, key, dev in cuda_rows:
        if key is not None and key in seen:
            continue
        rows.append(DeviceRow(dev.pci_bus_id, dev.name, None, ordinal, named(ordinal)))
    return rows


def _indices(row: DeviceRow) -> list[int]:
    """The GPU numbers the frameworks give the row's GPU."""
    return [i for name in row.frameworks.values() if name and (i := gpu_index(name)) is not None]


def device_map_lines(facts: Facts) -> list[str]:
    """One header line: each GPU's numbers side by side, when the CUDA driver enumerated devices."""
    rows = [r for r in device_map(facts) if r.cuda_ordinal is not None or r.nvml_index is not None]
    if not rows or facts.cuda.facts is None or not facts.cuda.facts.devices:
        return []

    def show(v: object) -> str:
        return "-" if v is None else str(v)

    titles = "".join(f" / {view.title}" for view in facts.frameworks.values())
    cells = [
        f"{r.pci_bus_id or '?'} {show(r.nvml_index)}/{show(r.cuda_ordinal)}"
        + "".join(f"/{name or '-'}" for name in r.frameworks.values())
        for r in rows
    ]
    return [f"gpucheck: GPU numbering (nvidia-smi / CUDA{titles}): " + ", ".join(cells)]


def device_map_rules(facts: Facts, settings: Settings) -> list[Finding]:
    rows = device_map(facts)
    differ = [
        r for r in rows
        if r.nvml_index is not None
        and (
            (r.cuda_ordinal is not None and r.cuda_ordinal != r.nvml_index)
            or any(i != r.nvml_index for i in _indices(r))
        )
    ]
    if not differ:
        return []
    vis = facts.visibility
    first = differ[0]
    reasons = []
    if vis.cuda_visible_devices is not None:
        reasons.append(f"CUDA_VISIBLE_DEVICES={vis.cuda_visible_devices!r} renumbers the GPUs it leaves from 0")
    if vis.cuda_device_order != "PCI_BUS_ID":
        reasons.append(
            "CUDA numbers devices fastest first (CUDA_DEVICE_ORDER="
            + (vis.cuda_device_order or "unset, so FASTEST_FIRST")
            + "), nvidia-smi by PCI bus id"
        )
    other = next((name for name in first.frameworks.values() if name), None) or f"CUDA device {first.cuda_ordinal}"
    return [
        finding(
            "device-order-differs",
            Severity.INFO,
            summary=(
                f"nvidia-smi's GPU {first.nvml_index} ({first.name}, {first.pci_bus_id}) is {other} here"
                + (f", and {len(differ) - 1} more GPU(s) are numbered differently" if len(differ) > 1 else "")
                + "."
            ),
            cause="; ".join(reasons) + "." if reasons else "The CUDA driver enumerates the GPUs in another order.",
            remedy=(
                "`export CUDA_DEVICE_ORDER=PCI_BUS_ID` so CUDA and TensorFlow number GPUs as nvidia-smi does; pick "
                "GPUs by UUID (`CUDA_VISIBLE_DEVICES=GPU-<uuid>`, `nvidia-smi -L`) to be sure which card a job gets."
            ),
            evidence={
                "devices": [r.to_json() for r in rows],
                "CUDA_VISIBLE_DEVICES": vis.cuda_visible_devices,
                "CUDA_DEVICE_ORDER": vis.cuda_device_order,
            },
        )
    ]
