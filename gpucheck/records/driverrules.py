"""The GPUs the driver could not take, and the kernel log's words about the driver taking them.

A GPU on the PCI bus that no driver holds while the nvidia module is loaded (``rules.common.unheld_gpus``) is one the
driver's probe failed on; one it holds that NVML does not list while the kernel log says the driver could not
initialise it (RmInitAdapter failed) is one it could not take either. Each is ``gpu-init-failed``, a blocker of the
kernel layer about that GPU alone (``PCI 0000:b3:00.0``: NVML does not list it, so the other GPUs' questions stay
answered). Its evidence is what the driver wrote of it (``records.driverlog``): it fell off the bus as it was probed,
RmInitAdapter failed, the platform gave it no BAR space, the probe failed with an error; where the log says nothing of
it, or could not be read, the finding says so and names what is known. What needs the kernel layer (cuInit finding no
device) is then its consequence, and its missing ``/dev/nvidia0`` no finding of its own (``rules.host``): the device
node of a GPU whose probe failed is no container's fault.

A GPU the driver holds but cannot use, which NVML lists as lost, is NVML's ``gpu-lost``; the driver's words about it
(RmInitAdapter failed, fallen off the bus, Xid 79) are added to that finding's evidence (:func:`explain`), so the one
finding carries the kernel's own explanation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucheck.facts import Facts, NvmlGpu, PciDevice, facts_of
from gpucheck.model import Finding, Severity, finding
from gpucheck.pci import pci_key
from gpucheck.records.driverlog import (
    BAR_INVALID,
    BAR_UNASSIGNED,
    FALLEN,
    KINDS,
    PROBE_FAILED,
    PROBE_ROUTINE,
    RM_INIT,
)
from gpucheck.records.facts import DriverRecord, RecordsFacts
from gpucheck.records.facts import outcome as outcome_of
from gpucheck.rules.common import unheld_gpus
from gpucheck.rules.nvml import answered, lost
from gpucheck.settings import Settings

#: What the finding says a GPU went through, by the first kind of its records (``driverlog.KINDS`` order).
_WHAT: dict[str, str] = {
    FALLEN: "it fell off the bus as the driver probed it",
    BAR_INVALID: "the platform gave it no address space for a PCI region (BAR), so the driver refused it",
    BAR_UNASSIGNED: "the kernel could not assign one of its PCI regions (BAR), so the driver could not map it",
    RM_INIT: "the driver could not initialise it (RmInitAdapter failed)",
    PROBE_FAILED: "the driver's probe of it failed",
    PROBE_ROUTINE: "the driver says its probe failed, without naming why for this GPU",
}
_REMEDY_LOST = (
    "Drain the node and reboot it (NVIDIA's immediate action for a GPU fallen off the bus, Xid 79: RESTART_BM); if it "
    "recurs or stays off the bus after a cold boot, check the card's seating, riser, power cables and cooling, and "
    "contact the vendor (an RMA)."
)
_REMEDY_BAR = (
    "The platform gave the GPU no address space for its PCI regions: turn on \"Above 4G decoding\" (and enough MMIO "
    "space or Resizable BAR) in the system BIOS; in a VM give the guest a 64-bit MMIO window large enough for its GPUs "
    "(VMware: pciPassthru.use64bitMMIO=TRUE and pciPassthru.64bitMMIOSizeGB; QEMU/OVMF: a larger X-PciMmio64Mb); "
    "`pci=realloc` on the kernel command line can help. Then reboot."
)
_REMEDY_INIT = (
    "Reboot the node (a cold boot or power cycle where a reboot does not clear it); if the driver still cannot "
    "initialise the GPU, check its power and seating, update the system BIOS and the driver, and send "
    "`sudo nvidia-bug-report.sh`'s output to NVIDIA or the vendor."
)
_REMEDY: dict[str, str] = {
    FALLEN: _REMEDY_LOST, BAR_INVALID: _REMEDY_BAR, BAR_UNASSIGNED: _REMEDY_BAR, RM_INIT: _REMEDY_INIT,
    PROBE_FAILED: _REMEDY_INIT, PROBE_ROUTINE: _REMEDY_INIT,
}
_REMEDY_UNKNOWN = (
    "Read the kernel log for what the driver said of it (`sudo dmesg | grep -iE 'nvrm|nvidia|{bus}'`); `lspci -k -s "
    "{bus}` shows it bound to no driver. Reload the driver or reboot; if it stays unbound, reseat or service the card."
)


def records_of(facts: Facts) -> RecordsFacts | None:
    return facts_of(outcome_of(facts))


def unheld_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """``gpu-init-failed``: each GPU on the bus that the loaded driver does not hold, with what the kernel log says of
    it (or that it says nothing, or could not be read); and each it holds but could not initialise, by the log, that
    NVML does not list."""
    rf = records_of(facts)
    records = rf.driver if rf is not None else ()
    general = [r for r in records if r.device is None and r.minor is None]
    out = [_not_held(facts, dev, _records_of(facts, records, dev), general, rf) for dev in unheld_gpus(facts)]
    out += [_not_held(facts, dev, mine, [], rf, held=True) for dev, mine in _held_not_listed(facts, records)]
    return out


def _records_of(facts: Facts, records: tuple[DriverRecord, ...], dev: PciDevice) -> list[DriverRecord]:
    """The records about ``dev``: those naming its address, and an old driver's naming its device minor number."""
    bus = _bus(dev.bus_id)
    minors = {g.minor for g in facts.kernel.driver_gpus or () if _bus(g.bus_id) == bus and g.minor is not None}
    return [r for r in records if r.device == bus or (r.device is None and r.minor is not None and r.minor in minors)]


def _held_not_listed(facts: Facts, records: tuple[DriverRecord, ...]) -> list[tuple[PciDevice, list[DriverRecord]]]:
    """GPUs the driver holds (bound to nvidia) that NVML, which answered, does not list (not even as a lost GPU of
    unknown address), whose initialisation the kernel log says failed. Without such words a GPU NVML does not list is
    no fault: a container's NVML lists only the GPUs it was given."""
    nf = answered(facts)
    if nf is None or any(g.pci_bus_id is None for g in nf.gpus):
        return []
    listed = {_bus(g.pci_bus_id) for g in nf.gpus}
    out = []
    for dev in facts.hardware.nvidia_gpus:
        if dev.driver != "nvidia" or _bus(dev.bus_id) in listed:
            continue
        mine = [r for r in _records_of(facts, records, dev) if r.kind in (RM_INIT, FALLEN)]
        if mine:
            out.append((dev, mine))
    return out


def _bus(bus_id: str | None) -> str | None:
    key = pci_key(bus_id)
    return key.text if key is not None else None


def record_json(r: DriverRecord) -> dict[str, Any]:
    return {"kind": r.kind, "pci": r.device, "minor": r.minor, "detail": r.detail, "count": r.count,
            "first_s": r.first_s, "last_s": r.last_s, "text": r.text, "form": r.form}


def _log_note(facts: Facts, rf: RecordsFacts | None) -> str | None:
    """Why the kernel log could not be read here, or None where it was."""
    if rf is None:
        out = outcome_of(facts)
        return facts.not_run.get("records", "the records probe did not run") if out is None else (
            f"the records probe ended {out.exit.status} before it said anything")
    if rf.log.source is None:
        return "; ".join(rf.log.tried) or "no source could be read"
    return None


def _when(rs: list[DriverRecord]) -> str:
    count = sum(r.count for r in rs)
    stamps = [s for r in rs for s in (r.first_s, r.last_s) if s is not None]
    span = f", {min(stamps):.0f} s to {max(stamps):.0f} s after boot" if stamps else ""
    return f"{count} time{'s' if count != 1 else ''} this boot{span}"


def _not_held(facts: Facts, dev: PciDevice, mine: list[DriverRecord], general: list[DriverRecord],
              rf: RecordsFacts | None, held: bool = False) -> Finding:
    bus = _bus(dev.bus_id) or dev.bus_id
    pci_id = f"{dev.vendor.removeprefix('0x')}:{dev.device.removeprefix('0x')}" if dev.device else None
    who = f"The GPU at PCI {bus}" + (f" ({pci_id})" if pci_id else "")
    listed = facts.kernel.driver_gpus
    evidence: dict[str, Any] = {
        "pci": bus, "pci_id": pci_id, "bound_driver": dev.driver, "nvidia_module": facts.kernel.module_version,
        "in_proc_driver_nvidia_gpus": None if listed is None else any(_bus(g.bus_id) == bus for g in listed),
    }
    note = _log_note(facts, rf)
    first = next((k for k in KINDS if any(r.kind == k for r in mine)), None)
    routine = [r for r in general if r.kind == PROBE_ROUTINE]
    if first is None and routine:
        first = PROBE_ROUTINE
    told = mine + routine + [r for r in general if r.kind != PROBE_ROUTINE]
    if told:
        evidence.update(source="kernel log", log=rf.log.source if rf is not None else None,
                        kernel_log=[record_json(r) for r in told[:20]])
        if routine:
            evidence["probe_failed_for_devices"] = max(int(r.detail or 0) for r in routine)
    else:
        evidence.update(source="sysfs", log=note or (rf.log.source if rf is not None else None))
    if first is not None:
        shown = [r for r in mine if r.kind == first] or routine
        detail = next((r.detail for r in shown if r.detail), None)
        # (A fallen GPU's detail is its PCI ID, named already; the count line's is named in the evidence.)
        what = _WHAT[first] + (f" ({detail})" if detail and first not in (PROBE_ROUTINE, FALLEN) else "")
        state = ("is held by the nvidia driver, but NVML does not list it" if held
                 else "is on the bus, but the nvidia driver does not hold it")
        summary = f"{who} {state}: {what}; {_when(shown)}."
        cause = "The kernel log: " + " | ".join(f"`{r.text}`" for r in told[:4]) + "."
        remedy = _REMEDY[first]
    else:
        said = (f"the kernel log could not be read ({note})" if note is not None
                else "the kernel log says nothing of it this boot")
        summary = f"{who} is on the bus, but the nvidia driver does not hold it; {said}."
        cause = (f"The nvidia module {facts.kernel.module_version or ''} is loaded, yet the GPU is bound to no driver "
                 "(sysfs) and NVML does not list it: the driver's probe of it failed. " + said[0].upper() + said[1:]
                 + ", so why is not known here.")
        remedy = _REMEDY_UNKNOWN.format(bus=bus)
    return finding("gpu-init-failed", Severity.BLOCKER, summary=summary, cause=cause, remedy=remedy, evidence=evidence,
                   subject=f"PCI {bus}")


# --- the driver's words for a GPU NVML finds lost -------------------------------------------------------------------


def explain(facts: Facts, f: Finding) -> Mapping[str, Any]:
    """The kernel log's words about the GPU of NVML's ``gpu-lost`` (RmInitAdapter failed, fallen off the bus, its Xid
    79), as ``kernel_log`` evidence; and, for ``driver-not-loaded``, the driver's probe failures that kept it from
    loading (``None of the NVIDIA devices were initialized``)."""
    rf = records_of(facts)
    if rf is None or not (rf.driver or rf.xids):
        return {}
    if f.id == "driver-not-loaded":
        return {"kernel_log": [record_json(r) for r in rf.driver[:20]]} if rf.driver else {}
    if f.id != "gpu-lost" or f.subject is None or not f.subject.startswith("GPU-"):
        return {}
    nf = answered(facts)
    gpu = next((g for g in nf.gpus if g.id == f.subject), None) if nf is not None else None
    bus = _lost_bus(facts, gpu) if gpu is not None else None
    if bus is None:
        return {}
    minors = {g.minor for g in facts.kernel.driver_gpus or () if _bus(g.bus_id) == bus and g.minor is not None}
    told: list[dict[str, Any]] = [record_json(r) for r in rf.driver if r.device == bus or (
        r.device is None and r.minor is not None and r.minor in minors)]
    told += [{"kind": "xid", "xid": x.code, "pci": x.device, "count": x.count, "first_s": x.first_s,
              "last_s": x.last_s, "text": x.first_text[:300]}
             for x in rf.xids if x.kind == "Xid" and x.code == 79 and _bus(x.device + ".0") == bus]
    return {"kernel_log": told[:20]} if told else {}


def _lost_bus(facts: Facts, gpu: NvmlGpu) -> str | None:
    """The bus address of NVML's lost GPU: its own where NVML could read it, else the one GPU the driver holds on the
    bus that no other GPU NVML lists has."""
    own = _bus(gpu.pci_bus_id)
    if own is not None:
        return own
    nf = answered(facts)
    if nf is None or not lost(gpu):
        return None
    known = {_bus(g.pci_bus_id) for g in nf.gpus}
    left = [b for d in facts.hardware.nvidia_gpus if d.driver == "nvidia" and (b := _bus(d.bus_id)) not in known]
    return left[0] if len(left) == 1 else None


def summary_lines(facts: Facts) -> list[str]:
    """The driver's records of taking the GPUs, one line each, in the terminal summary (after the Xid lines)."""
    rf = records_of(facts)
    if rf is None or not rf.driver:
        return []
    lines = [f"  driver: {sum(r.count for r in rf.driver)} record(s) of taking a GPU"]
    for r in rf.driver[:20]:
        where = r.device or (f"minor {r.minor}" if r.minor is not None else "no GPU named")
        lines.append(f"  {r.kind} on {where}: {r.count}x, {r.text[:100]}")
    return lines
