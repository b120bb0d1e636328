"""The machine's own records: the kernel log's Xid and SXid records (health), Fabric Manager on an NVSwitch
machine (driver).

What each Xid code means, its likely causes and NVIDIA's actions come from ``data/xid_catalog.json`` (NVIDIA's Xid
catalog, with its source). A GPU's records are judged together: the hardware-class codes name a cause of their own
(79 ``gpu-lost``, 48/63/64/92/94/95 ``ecc-errors``, 74 ``nvlink-degraded``, 119/120 ``gsp-firmware-error``); the codes
a user program causes (13, 31, 43, 45 ...) are ``xid-application-fault`` (info) only when the driver names the process
and nothing else is wrong with the GPU, otherwise the evidence of what is; Xid 154, the driver's recovery action, is
the ``recovery_action`` of every finding of its GPU (which raises their action, ``gpucheck.model.finding``), or
``xid-recovery-required`` where nothing else names the fault; any other code is the note ``xid-recorded``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from gpucheck.facts import Facts, ProbeOutcome, facts_of
from gpucheck.model import UNREAD_KEY, Finding, Severity, finding
from gpucheck.pci import BusId, pci_key
from gpucheck.records.catalog import owned, xid_class
from gpucheck.records.catalog import xid_catalog as xid_catalog
from gpucheck.records.catalog import xid_entry as xid_entry
from gpucheck.records.facts import FabricFacts, RecordsFacts, XidCodes, XidDropped, XidRecord, process_label
from gpucheck.records.facts import outcome as outcome_of
from gpucheck.rules.common import CUDA_SYSTEM_NOT_READY, child_evidence, label, nvswitches
from gpucheck.rules.nvlink import nvlink_rules
from gpucheck.rules.nvml import answered, ecc_findings, lost
from gpucheck.settings import Settings

RECOVERY_ACTION = "recovery_action"
#: At most this many records are listed in a finding's evidence, and processes or codes in its words: the rest are
#: counted, so that a log of 16,000 faulting processes makes a finding of the same size as one of 20.
LISTED = 20
#: At most this many PCI addresses of a kernel log are judged one by one (a machine has at most 16 or so GPUs).
MAX_DEVICES = 64
#: The ids the kernel log answers (the check file asks these).
LOG_IDS = ("gsp-firmware-error", "xid-recovery-required", "xid-application-fault", "xid-recorded", "records-unread")
#: The ecc-errors codes that leave the GPU unusable until it is reset or serviced (a failed row remap, an error that
#: could not be contained); the others are degraded (contained, corrected, or pending the next reset).
_ECC_BLOCKERS = frozenset({64, 95})
#: No record dropped (facts whose records were all kept).
_NONE_DROPPED: Mapping[int, XidDropped] = MappingProxyType({})


def _kind(r: XidRecord) -> str | None:
    """A record's class: a cause id, "application", "recovery" (Xid 154), or None (no cause of its own)."""
    return xid_class(r.code)


def records_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """The kernel log's findings, per GPU: ``gpu-lost`` (79, unless NVML already says the GPU is lost),
    ``ecc-errors`` (48, 63, 64, 92, 94, 95, ...), ``nvlink-degraded`` (74; a Fatal SXid), ``gsp-firmware-error``
    (119, 120), ``xid-recovery-required`` (Xid 154 asks for a reset or a reboot and no other record names the
    fault), ``xid-application-fault`` (info), ``xid-recorded`` (info)."""
    found = outcome_of(facts)
    unread = records_unread(found) if found is not None else []
    rf = facts_of(found)
    if rf is None:
        return unread
    out: list[Finding] = list(unread)
    devices: dict[str, list[XidRecord]] = {}
    for r in rf.xids:
        if r.kind == "Xid" and not owned(r):  # Blackwell's NVLink records and the Xid 45 naming its cause: nvlinkrules
            devices.setdefault(r.device, []).append(r)
    # The records the child did not keep (more processes of one code on one device than it keeps), counted per code.
    dropped: dict[str, dict[int, XidDropped]] = {}
    for d in rf.dropped:
        if d.kind == "Xid" and not d.owned:
            dropped.setdefault(d.device, {})[d.code] = d
    processes = {p.device: p.processes for p in rf.application_processes}
    folded = {c.device: c for c in rf.uncatalogued}
    nvlink_now = _nvlink_down_now(facts, settings)
    # NVML's GPUs first; a log that names more PCI addresses than any machine has GPUs is judged for the first
    # MAX_DEVICES of them, the others are one note: the findings stay bounded whatever the log holds.
    ordered = sorted(devices, key=lambda d: _gpu_of(facts, d) is None)
    for device in ordered[:MAX_DEVICES]:
        out += _gpu_findings(facts, device, devices[device], nvlink_now, dropped.get(device, {}), processes.get(device),
                             folded.get(device))
    if len(ordered) > MAX_DEVICES:
        rest = ordered[MAX_DEVICES:]
        more: list[XidDropped | XidCodes] = [x for d in rest for x in dropped.get(d, {}).values()]
        more += [c for d in rest for c in _folded(folded.get(d))]
        out.append(_too_many_devices([r for d in rest for r in devices[d]], len(ordered), more))
    out += _sxid_findings(facts, rf)
    return out


def _more(rs: list[XidRecord], dropped: Mapping[int, XidDropped]) -> list[XidDropped]:
    """What the child did not keep of the records ``rs`` stand for: the dropped records of each code whose records
    naming a process are among ``rs`` (a record naming none is always kept)."""
    codes = dict.fromkeys(r.code for r in rs if r.pid is not None or r.process is not None)
    return [dropped[c] for c in codes if c in dropped]


def _folded(codes: XidCodes | None) -> list[XidCodes]:
    return [codes] if codes is not None else []


def _records(rs: list[XidRecord], more: Sequence[XidDropped | XidCodes]) -> int:
    """How many gathered records (one per code, device and process) ``rs`` and ``more`` are: exact."""
    return len(rs) + sum(d.records for d in more)


def _too_many_devices(rest: list[XidRecord], devices: int, more: list[XidDropped | XidCodes]) -> Finding:
    """``xid-recorded``: the records of the PCI addresses past the first :data:`MAX_DEVICES`, counted."""
    return finding(
        "xid-recorded",
        Severity.INFO,
        summary=f"The kernel log names {devices} PCI addresses in its Xid records, more than any machine has GPUs: "
        f"the records of the last {devices - MAX_DEVICES} are counted, not judged one by one ({_when(rest, more)}).",
        cause="A log of another machine, or one written to look like a kernel log, names more GPUs than are here.",
        remedy="Read the kernel log itself (`sudo dmesg | grep 'NVRM: Xid'`).",
        evidence={"source": "kernel log", "xids": [_record_json(r) for r in rest[:LISTED]],
                  "records": _records(rest, more)},
    )


def _sxid_findings(facts: Facts, rf: RecordsFacts) -> list[Finding]:
    """Each NVSwitch's SXid records: one finding per switch and id (:func:`_sxid_finding` of its first record, the
    others' codes counted in its evidence), so that thousands of codes make two findings, not thousands. Where no
    NVSwitch is on a readable PCI bus, an SXid (a log of another machine, a line written to look like one) is a note
    and never drains the node."""
    switchless = facts.hardware.readable and not nvswitches(facts)
    first: dict[tuple[str | None, str], Finding] = {}
    codes: dict[tuple[str | None, str], dict[str, int]] = {}
    for r in rf.xids:
        if r.kind != "SXid":
            continue
        f = _sxid_finding(r, rf)
        if switchless and f.severity is not Severity.INFO:
            f = finding("xid-recorded", Severity.INFO, summary=f"{f.summary} No NVSwitch is on this machine's PCI bus: "
                        "a note, not a fault.", cause=f.cause, remedy="Nothing to do on this machine.",
                        evidence={k: v for k, v in f.evidence.items() if k != RECOVERY_ACTION}, subject=f.subject)
        key = (f.subject, f.id)
        first.setdefault(key, f)
        counted = codes.setdefault(key, {})
        counted[str(r.code)] = counted.get(str(r.code), 0) + r.count
    out = []
    for key, f in first.items():
        if len(codes[key]) > 1:
            f = replace(f, evidence={**f.evidence, "codes": dict(list(codes[key].items())[:LISTED]),
                                     "records": len(codes[key])})
        out.append(f)
    return out


def records_unread(found: ProbeOutcome[RecordsFacts]) -> list[Finding]:
    """``records-unread``: the records probe crashed, was killed or timed out, or the kernel log did not end. A source
    that could not be read is "not checked", never "healthy": the finding keeps the verdict from ``accelerated``, and
    its evidence's ``unread`` makes ``gpucheck doctor`` exit 2 where nothing else makes the node not usable."""
    exit_, rf = found.exit, found.facts
    if exit_.status in ("crashed", "timeout", "error"):
        how = {"timeout": f"was killed at its time limit ({exit_.error})", "error": f"could not start ({exit_.error})"}
        why = how.get(exit_.status, f"died ({exit_.signal or f'exit code {exit_.returncode}'}"
                      f"{f': {exit_.error}' if exit_.error else ''})")
        evidence = child_evidence(exit_)
    elif rf is not None and rf.log.unfinished is not None:
        why = f"read {rf.log.source} no further: {rf.log.unfinished}"
        evidence = {"log": rf.log.source, "unfinished": rf.log.unfinished}
    else:
        return []
    return [
        finding(
            "records-unread",
            Severity.DEGRADED,
            summary=f"This boot's kernel log was not read to its end: the records probe {why}.",
            cause="A fault the driver recorded (a GPU fallen off the bus, a GSP firmware error) may be in what was "
            "not read, so the GPUs' health is not known: this is not checked, never healthy.",
            remedy="Read the log yourself (`sudo dmesg | grep -E 'NVRM: Xid|SXid'`). A probe killed by SIGKILL may "
            "have been the OOM killer (`journalctl -k | grep -i oom`); if the log is only slow to read, raise "
            "--gpucheck-timeout.",
            evidence={UNREAD_KEY: "kernel log", **evidence},
        )
    ]


def _gpu_of(facts: Facts, device: str) -> Any:
    """NVML's GPU at the kernel log's ``0000:07:00`` (no function: the function is 0 for a GPU), or None."""
    key = pci_key(device if "." in device else device + ".0")
    nf = answered(facts)
    if key is None or nf is None:
        return None
    found = next((g for g in nf.gpus if _same_device(pci_key(g.pci_bus_id), key)), None)
    if found is not None:
        return found
    # A GPU NVML cannot reach has no bus id to compare: the one lost GPU of unknown address is the one the log names.
    unknown = [g for g in nf.gpus if pci_key(g.pci_bus_id) is None and lost(g)]
    return unknown[0] if len(unknown) == 1 else None


def _same_device(a: BusId | None, b: BusId) -> bool:
    return a is not None and a[:3] == b[:3]


def _record_json(r: XidRecord) -> dict[str, Any]:
    entry = xid_entry(r.code)
    return {
        "xid": r.code,
        "mnemonic": entry.get("mnemonic"),
        "description": entry.get("description"),
        "pci": r.device,
        "pid": r.pid,
        "process": r.process,
        "count": r.count,
        "first_s": r.first_s,
        "last_s": r.last_s,
        "first": r.first_text[:300],
        "last": r.last_text[:300],
        "nvidia_immediate_action": entry.get("immediate_action"),
        "nvidia_investigatory_action": entry.get("investigatory_action"),
        "likely_causes": entry.get("likely_causes"),
    }


def _nvlink_down_now(facts: Facts, settings: Settings) -> frozenset[str]:
    """The GPUs NVML's own ``nvlink-degraded`` names (links down or fabric short, now)."""
    nf = answered(facts)
    if nf is None:
        return frozenset()
    return frozenset(f.subject for f in nvlink_rules(nf, settings, facts.kernel.nvlink_disabled) if f.subject)


def _gpu_findings(facts: Facts, device: str, recs: list[XidRecord], nvlink_now: frozenset[str],
                  dropped: Mapping[int, XidDropped] = _NONE_DROPPED, processes: int | None = None,
                  folded: XidCodes | None = None) -> list[Finding]:
    """One GPU's findings from its records (``dropped``: its records the child did not keep, by code; ``processes``:
    the distinct processes its application-fault records name, kept or not, where some were dropped; ``folded``: its
    records of codes not in NVIDIA's catalog beyond those kept, counted together)."""
    gpu = _gpu_of(facts, device)
    subject = gpu.id if gpu is not None else None
    who = label(gpu) if gpu is not None else f"The GPU at PCI {device}"
    recovery = [r for r in recs if _kind(r) == "recovery" and r.recovery_action]
    action = max(recovery, key=lambda r: r.last_s or 0.0).recovery_action if recovery else None
    pending = action is not None and not action.startswith("0x0 ")
    base: dict[str, Any] = {"gpu": gpu.index if gpu is not None else None, "pci": device, "source": "kernel log"}
    if action is not None:
        base[RECOVERY_ACTION] = action
        base["xid_154"] = _record_json(recovery[-1])
    by_cause: dict[str, list[XidRecord]] = {}
    for r in recs:
        kind = _kind(r)
        if kind in ("gpu-lost", "ecc-errors", "nvlink-degraded", "gsp-firmware-error"):
            by_cause.setdefault(kind, []).append(r)
    if "gpu-lost" in by_cause and gpu is not None and lost(gpu):
        del by_cause["gpu-lost"]  # NVML's gpu-lost says it, for this GPU, now
    others = [r for r in recs if _kind(r) is None]
    if "ecc-errors" in by_cause and gpu is not None and _nvml_says_as_much(gpu, by_cause["ecc-errors"]):
        # NVML's ecc-errors says it for this GPU, with the counters as they are now: the log's records are notes of
        # when, not a second finding of the same fault.
        others += by_cause.pop("ecc-errors")
    if "nvlink-degraded" in by_cause and subject is not None and subject in nvlink_now:
        # NVML's nvlink-degraded names the links down now: the log's Xid 74 is a note of when, not a second finding.
        others += by_cause.pop("nvlink-degraded")
    apps = [r for r in recs if _kind(r) == "application"]
    also = {"also_logged": [_record_json(r) for r in (apps + others)[:LISTED]]}
    out = [_cause(cause, who, rs, {**base, **also}, subject, dropped) for cause, rs in by_cause.items()]
    if out or any(_kind(r) == "gpu-lost" for r in recs):
        return out
    if pending:
        return [_recovery_required(who, recs, action or "", base, subject, dropped, folded)]
    named = [r for r in apps if r.pid is not None or r.process is not None]
    if named and not others:
        out.append(_application(who, named, base, subject, dropped, processes))
    # One note per code NVIDIA's catalog has, one for every code it has not: bounded however many codes and
    # processes the log holds (a set per record, never a list: linear).
    unnamed = [r for r in apps if r.pid is None and r.process is None]
    by_code: dict[int | None, list[XidRecord]] = {}
    for r in others + unnamed:
        by_code.setdefault(r.code if xid_entry(r.code) else None, []).append(r)
    out += [_recorded(who, rs, base, subject, dropped, folded if code is None else None)
            for code, rs in by_code.items()]
    return out


def _nvml_says_as_much(gpu: Any, rs: list[XidRecord]) -> bool:
    """NVML's ``ecc-errors`` for ``gpu`` is at least as severe as the log's would be (a log's Xid 64/95, which NVML's
    counters may not show, keeps its own blocker)."""
    nvml = ecc_findings(gpu)
    return bool(nvml) and (nvml[0].severity is Severity.BLOCKER or not _ECC_BLOCKERS & {r.code for r in rs})


def _when(rs: list[XidRecord], more: Sequence[XidDropped | XidCodes] = ()) -> str:
    count = sum(r.count for r in rs) + sum(d.count for d in more)
    spans = [(r.first_s, r.last_s) for r in rs] + [(d.first_s, d.last_s) for d in more]
    stamps = [s for span in spans for s in span if s is not None]
    span = f", {min(stamps):.0f} s to {max(stamps):.0f} s after boot" if stamps else ""
    return f"{count} time{'s' if count != 1 else ''} this boot{span}"


_CAUSE_TEXT: dict[str, tuple[str, str]] = {
    "gpu-lost": (
        "fell off the bus (Xid 79)",
        "Drain the node and reboot it (NVIDIA: RESTART_BM); if it recurs, check the slot, riser, power and cooling "
        "and contact support (an RMA).",
    ),
    "ecc-errors": (
        "logged memory errors",
        "Drain the GPU and reset it (`sudo nvidia-smi -r -i <gpu>`) so that pending row remaps and page retirements "
        "take effect; a remap failure or recurring uncorrectable errors mean the GPU needs service.",
    ),
    "nvlink-degraded": (
        "logged NVLink errors (Xid 74)",
        "Read `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e`; reset the GPU, and on an NVSwitch machine restart "
        "Fabric Manager; reseat or service the link if the errors come back.",
    ),
    "gsp-firmware-error": (
        "has a GSP firmware fault (Xid 119/120): jobs on it hang while nvidia-smi and NVML may still answer",
        "Drain the GPU and reset it (`sudo nvidia-smi -r -i <gpu>`) or reboot; if it recurs, update the driver "
        "(NVIDIA: INVESTIGATE_SW), or as NVIDIA's documented workaround load the driver with "
        "`NVreg_EnableGpuFirmware=0` where the driver branch allows it.",
    ),
}


def _cause(cause: str, who: str, rs: list[XidRecord], evidence: dict[str, Any], subject: str | None,
           dropped: Mapping[int, XidDropped]) -> Finding:
    what, remedy = _CAUSE_TEXT[cause]
    more = _more(rs, dropped)
    codes = sorted({r.code for r in rs})
    severity = Severity.DEGRADED
    if cause in ("gpu-lost", "gsp-firmware-error") or (cause == "ecc-errors" and _ECC_BLOCKERS & set(codes)):
        severity = Severity.BLOCKER
    first = rs[0]
    described = "; ".join(f"Xid {c} ({xid_entry(c).get('description', 'no description in the catalog')})" for c in codes)
    return finding(
        cause,
        severity,
        summary=f"{who} {what}: the kernel log records {described}, {_when(rs, more)}.",
        cause=f"The driver wrote `NVRM: Xid (PCI:{first.device}): {first.code}, {first.first_text[:200]}`."
        + (f" Its recovery action is now {evidence[RECOVERY_ACTION]} (Xid 154)." if RECOVERY_ACTION in evidence else ""),
        remedy=remedy,
        evidence={**evidence, "xids": [_record_json(r) for r in rs[:LISTED]], "records": _records(rs, more)},
        subject=subject,
    )


def _recovery_required(who: str, recs: list[XidRecord], action: str, base: dict[str, Any], subject: str | None,
                       dropped: Mapping[int, XidDropped], folded: XidCodes | None) -> Finding:
    others = list({r.code: r for r in recs if r.code != 154}.values())
    more: list[XidDropped | XidCodes] = [*_more(recs, dropped), *_folded(folded)]
    after = _first([f"Xid {r.code}" for r in others], len(others) + (folded.codes if folded else 0)) or (
        "no other Xid in this boot's log")
    return finding(
        "xid-recovery-required",
        Severity.BLOCKER,
        summary=f"{who}: the driver says it needs {action} (Xid 154, after {after}).",
        cause="The driver changed the GPU's recovery action (Xid 154): until that is done, work on the GPU fails or "
        "hangs. " + "; ".join(f"Xid {r.code} ({xid_entry(r.code).get('description', '?')})" for r in others[:LISTED]),
        remedy="Drain the GPU and do what the driver asks: reset the GPU (`sudo nvidia-smi -r -i <gpu>`) for "
        "'GPU Reset Required', reboot the node for 'Node Reboot Required'.",
        evidence={**base, "xids": [_record_json(r) for r in recs[:LISTED]], "records": _records(recs, more)},
        subject=subject,
    )


def _application(who: str, rs: list[XidRecord], base: dict[str, Any], subject: str | None,
                 dropped: Mapping[int, XidDropped], processes: int | None) -> Finding:
    """``processes``: how many distinct processes there are in all where the child did not keep some of them."""
    procs = sorted({process_label(r) for r in rs})
    codes = sorted({r.code for r in rs})
    return finding(
        "xid-application-fault",
        Severity.INFO,
        summary=f"{who}: {_first(procs, processes)} faulted on it (Xid {_first([str(c) for c in codes])}); nothing else is "
        "wrong with the GPU in the kernel log.",
        cause="; ".join(f"Xid {c}: {xid_entry(c).get('description', '?')}" for c in codes[:LISTED])
        + ". These are most often the program's own fault (an illegal address, an illegal instruction, a killed "
        "job), not the GPU's: NVIDIA's action is RESTART_APP, the node stays in service.",
        remedy="Debug the program (run it under `compute-sanitizer`, or with CUDA_LAUNCH_BLOCKING=1 to find the "
        "kernel); look at the GPU only if other programs fault on it too.",
        evidence={**base, "xids": [_record_json(r) for r in rs[:LISTED]], "records": _records(rs, _more(rs, dropped))},
        subject=subject,
    )


def _first(names: list[str], total: int | None = None) -> str:
    """At most ``LISTED`` of ``names``, and how many more there are (of ``total`` in all, where given: names of which
    only some were kept)."""
    total = len(names) if total is None else max(total, len(names))
    more = f" and {total - min(len(names), LISTED)} more" if total > min(len(names), LISTED) else ""
    return ", ".join(names[:LISTED]) + more


def _recorded(who: str, rs: list[XidRecord], base: dict[str, Any], subject: str | None,
              dropped: Mapping[int, XidDropped], folded: XidCodes | None = None) -> Finding:
    """The note of one code NVIDIA's catalog has, or of every code it has not, on one GPU, with their counts
    (``folded``: the records of codes not in the catalog beyond those kept, counted together)."""
    r = rs[0]
    counted = {d.code: d.count for d in _more(rs, dropped)}
    more: list[XidDropped | XidCodes] = [*_more(rs, dropped), *_folded(folded)]
    entry = xid_entry(r.code)
    codes = list(dict.fromkeys(x.code for x in rs))
    what = (f"Xid {r.code} ({entry['description']})" if entry.get("description") else
            f"Xid {_first([str(c) for c in codes], len(codes) + (folded.codes if folded else 0))} (not in NVIDIA’s catalog)")
    return finding(
        "xid-recorded",
        Severity.INFO,
        summary=f"{who}: the kernel log records {what}, {_when(rs, more)}.",
        cause=f"`NVRM: Xid (PCI:{r.device}): {r.code}, {r.first_text[:200]}`. NVIDIA's immediate action: "
        f"{entry.get('immediate_action') or 'none given'}; investigatory: {entry.get('investigatory_action') or 'none given'}.",
        remedy="Nothing to do unless it recurs; then follow NVIDIA's Xid catalog "
        "(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) for this code.",
        evidence={**base, "xids": [_record_json(x) for x in rs[:LISTED]], "records": _records(rs, more),
                  "codes": {str(c): sum(x.count for x in rs if x.code == c) + counted.get(c, 0) for c in codes[:LISTED]}},
        subject=subject,
    )


def _sxid_finding(r: XidRecord, rf: RecordsFacts) -> Finding:
    """An NVSwitch's SXid: ``nvlink-degraded`` when the driver says Fatal, when the Fabric Manager guide calls the code
    always fatal, or when the guide says the GPUs' NVLink traffic stalls (11004, 12028, listed as non-fatal); else the
    note ``xid-recorded``. The guide's recovery from a fatal SXid is a restart that resets the GPUs and NVSwitches, so
    the finding's action is ``reboot``."""
    table = xid_catalog()["sxid"]
    entry = table.get(str(r.code))
    entry = entry if isinstance(entry, dict) else {}
    name, cls, impact = entry.get("name"), entry.get("class"), entry.get("impact")
    subject = f"NVSwitch {r.device}"
    evidence = {"sxid": r.code, "name": name, "class": cls, "impact": impact, "nvswitch": r.switch, "pci": r.device,
                "count": r.count, "first_s": r.first_s, "last_s": r.last_s, "first": r.first_text[:300],
                "fatal": r.fatal, "source": "kernel log"}
    called = f"{r.code}{f' ({name})' if name else ''}"
    if r.fatal or cls == "always fatal" or entry.get("stalls_traffic"):
        how = ("a Fatal SXid" if r.fatal else "an SXid the Fabric Manager guide calls always fatal" if cls == "always fatal"
               else "an SXid whose impact, by the Fabric Manager guide, is stalled NVLink traffic")
        if r.fatal and cls == "non-fatal" and not entry.get("stalls_traffic"):
            # The guide's impact of the code's non-fatal form ("can be safely ignored") is not this record's.
            impact = f"The Fabric Manager guide lists SXid {r.code} as non-fatal; the driver wrote this one Fatal."
        return finding(
            "nvlink-degraded",
            Severity.DEGRADED,
            summary=f"{subject} ({r.switch}) logged {how}, {called}: NVLink traffic through it stalls, {_when([r])}.",
            cause=" ".join(str(x) for x in (table.get("_meaning"), impact) if x),
            remedy="Drain the node and restart it to reset the GPUs and NVSwitches (Fabric Manager user guide); if the "
            "same SXid comes back, have the NVSwitch baseboard inspected.",
            evidence={**evidence, RECOVERY_ACTION: "reboot"},
            subject=subject,
        )
    return finding(
        "xid-recorded",
        Severity.INFO,
        summary=f"{subject} ({r.switch}) logged a non-fatal SXid {called}, {_when([r])}.",
        cause="A non-fatal NVSwitch error: the switch corrected or contained it. " + (impact or str(table.get("_meaning"))),
        remedy="Nothing to do unless it recurs or turns Fatal.",
        evidence=evidence,
        subject=subject,
    )


# --- Fabric Manager -----------------------------------------------------------------------------------------------


def fabric_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """``fabric-manager-not-running``: cuInit returned CUDA_ERROR_SYSTEM_NOT_READY (802) where NVSwitches are on the
    PCI bus (the driver rules leave 802 to this rule there)."""
    cf = facts.cuda.facts
    init = cf.init if cf is not None else None
    switches = nvswitches(facts)
    if init is None or init.code != CUDA_SYSTEM_NOT_READY or not switches:
        return []
    rf = facts_of(outcome_of(facts))
    fab = rf.fabric if rf is not None else None
    module = facts.kernel.module_version
    evidence: dict[str, Any] = {
        "cuInit": init.code, "name": init.name, "message": init.message,
        "nvswitches": [d.bus_id for d in switches], "driver": module,
    }
    seen, remedy = _service_seen(fab, module)
    evidence.update(seen)
    return [
        finding(
            "fabric-manager-not-running",
            Severity.BLOCKER,
            summary=f"cuInit fails with {init.name or init.code} on this NVSwitch machine ({len(switches)} NVSwitches): "
            "Fabric Manager has not set up the NVLink fabric.",
            cause=f"cuInit() returned {init.code} ({init.name}): on HGX/DGX systems CUDA cannot initialise until the "
            "nvidia-fabricmanager service, of exactly the driver's version, has configured the NVSwitches. "
            + str(seen.get("fabric_manager")),
            remedy=remedy,
            evidence=evidence,
        )
    ]


def _service_seen(fab: FabricFacts | None, module: str | None) -> tuple[dict[str, Any], str]:
    start = ("Start it: `sudo systemctl enable --now nvidia-fabricmanager`, then `journalctl -u nvidia-fabricmanager` "
             "if it does not stay up.")
    if fab is None:
        return {"fabric_manager": "Its state could not be read (the records probe did not run)."}, start
    seen: dict[str, Any] = {
        "unit": {"load": fab.unit_load_state, "active": fab.unit_active_state, "sub": fab.unit_sub_state,
                 "result": fab.unit_result, "error": fab.unit_error},
        "processes": list(fab.processes), "fabric_manager_version": fab.version, "binary": fab.binary,
        "version_error": fab.version_error, "nvswitch_nodes": list(fab.nvswitch_nodes),
    }
    if fab.version is None and fab.binary is None:
        seen["fabric_manager"] = f"Fabric Manager is not installed ({fab.version_error})."
        branch = module.split(".")[0] if module else "<driver branch>"
        return seen, (f"Install Fabric Manager of the driver's version {module or ''} (`sudo apt install "
                      f"nvidia-fabricmanager-{branch}` or the driver's `cuda-drivers-fabricmanager-{branch}`), then "
                      "`sudo systemctl enable --now nvidia-fabricmanager`.")
    if fab.version and module and fab.version != module:
        seen["fabric_manager"] = (f"Fabric Manager {fab.version} is installed but the driver is {module}: it refuses "
                                  "to run with a driver of another version.")
        return seen, (f"Install Fabric Manager {module} (the driver's exact version) and restart it "
                      "(`sudo systemctl restart nvidia-fabricmanager`), or reboot after a driver upgrade.")
    if fab.processes:
        seen["fabric_manager"] = (f"Fabric Manager runs ({fab.processes[0]}) but the fabric is not ready: it may still "
                                  "be starting, or it failed to configure the NVSwitches.")
        return seen, "Wait for it, then read `journalctl -u nvidia-fabricmanager` and /var/log/fabricmanager.log."
    state = fab.unit_active_state or "not known"
    seen["fabric_manager"] = f"Fabric Manager {fab.version or ''} is installed but not running (unit state: {state})."
    return seen, start


def not_checked(facts: Facts, settings: Settings) -> dict[str, str]:
    """Why the kernel log was not looked at: the child did not run, or no source could be read."""
    out = outcome_of(facts)
    if out is None:
        return dict.fromkeys(LOG_IDS, facts.not_run.get("records", "the records probe did not run"))
    rf = facts_of(out)
    if rf is None:
        return dict.fromkeys(LOG_IDS, f"the records probe ended {out.exit.status} before it said anything")
    if rf.log.source is None:
        return dict.fromkeys(LOG_IDS, "the kernel log could not be read: " + "; ".join(rf.log.tried))
    return {}
