"""Device numbering: nvidia-smi's index (NVML, PCI bus order), the CUDA ordinal (CUDA_DEVICE_ORDER,
default FASTEST_FIRST, then CUDA_VISIBLE_DEVICES) and TensorFlow's ``GPU:N``, side by side.

TensorFlow numbers the CUDA devices it registers in CUDA ordinal order, leaving out those whose compute
capability its build does not cover (gpu_device.cc, 'Ignoring visible gpu device'). The rows are joined
on the PCI bus id, which NVML and the CUDA driver both report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucheck import knowledge
from gpucheck.facts import Facts, facts_of, gpu_index
from gpucheck.model import Finding, Severity, finding
from gpucheck.pci import BusId, pci_key
from gpucheck.settings import Settings


@dataclass(frozen=True)
class DeviceRow:
    pci_bus_id: str | None
    name: str | None
    nvml_index: int | None
    cuda_ordinal: int | None
    tensorflow: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "pci_bus_id": self.pci_bus_id,
            "name": self.name,
            "nvidia-smi": self.nvml_index,
            "cuda": self.cuda_ordinal,
            "tensorflow": self.tensorflow,
        }


def _tf_names(facts: Facts, cuda_rows: list[tuple[int, BusId | None, Any]]) -> dict[int, str]:
    """CUDA ordinal -> TensorFlow's GPU:N. TensorFlow's own word first: its "Created device ... GPU:N ...
    pci bus id: X" lines (the TensorFlow child's set-up), joined to the CUDA devices on the bus id. Else, when
    TensorFlow did not create its devices, from the order: its count must match the devices its build covers."""
    tf = facts_of(facts.framework)
    if tf is None or not tf.gpus:
        return {}
    setup = facts_of(facts.tf_setup)
    created = setup.created_devices if setup is not None else ()
    if created:
        by_bus = {pci_key(bus): name for name, bus in created}
        return {ordinal: by_bus[key] for ordinal, key, _dev in cuda_rows if key is not None and key in by_bus}
    archs = knowledge.parse_archs(tf.build_info.get("cuda_compute_capabilities") or [])
    covered = []
    for ordinal, _key, dev in cuda_rows:
        if archs and dev.cc_major is not None and dev.cc_minor is not None:
            if knowledge.judge_arch(dev.cc_major, dev.cc_minor, archs).status == "unsupported":
                continue
        covered.append(ordinal)
    if len(covered) != len(tf.gpus):
        return {}
    return {ordinal: f"GPU:{n}" for n, ordinal in enumerate(covered)}


def device_map(facts: Facts) -> list[DeviceRow]:
    cf = facts.cuda.facts
    nf = facts.nvml.facts
    nvml = [g for g in (getattr(nf, "gpus", ()) or ()) if getattr(g, "handle_error", None) is None]
    cuda_rows = [(d.ordinal, pci_key(d.pci_bus_id), d) for d in (cf.devices if cf is not None else ())]
    tf_of = _tf_names(facts, cuda_rows)
    rows: list[DeviceRow] = []
    seen: set[BusId] = set()
    for g in nvml:
        key = pci_key(g.pci_bus_id)
        match = next((r for r in cuda_rows if key is not None and r[1] == key), None)
        if key is not None:
            seen.add(key)
        ordinal = match[0] if match else None
        rows.append(
            DeviceRow(g.pci_bus_id, g.name, g.index, ordinal, tf_of.get(ordinal) if ordinal is not None else None)
        )
    for ordinal, key, dev in cuda_rows:
        if key is not None and key in seen:
            continue
        rows.append(DeviceRow(dev.pci_bus_id, dev.name, None, ordinal, tf_of.get(ordinal)))
    return rows


def _tf_index(row: DeviceRow) -> int | None:
    return gpu_index(row.tensorflow) if row.tensorflow else None


def device_map_lines(facts: Facts) -> list[str]:
    """One header line: each GPU's numbers side by side, when the CUDA driver enumerated devices."""
    rows = [r for r in device_map(facts) if r.cuda_ordinal is not None or r.nvml_index is not None]
    if not rows or facts.cuda.facts is None or not facts.cuda.facts.devices:
        return []

    def show(v: object) -> str:
        return "-" if v is None else str(v)

    cells = [
        f"{r.pci_bus_id or '?'} {show(r.nvml_index)}/{show(r.cuda_ordinal)}/{r.tensorflow or '-'}" for r in rows
    ]
    return ["gpucheck: GPU numbering (nvidia-smi / CUDA / TensorFlow): " + ", ".join(cells)]


def device_map_rules(facts: Facts, settings: Settings) -> list[Finding]:
    rows = device_map(facts)
    differ = [
        r for r in rows
        if r.nvml_index is not None
        and (
            (r.cuda_ordinal is not None and r.cuda_ordinal != r.nvml_index)
            or (_tf_index(r) is not None and _tf_index(r) != r.nvml_index)
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
    other = first.tensorflow or f"CUDA device {first.cuda_ordinal}"
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
