"""Blackwell's NVLink records (Xid 144-150) judged one by one, and the Xid 45 records that name the Xid they followed.

Per GPU: a record the driver calls Fatal is ``nvlink-degraded`` (degraded, as NVML's reading of links down and the
log's Xid 74), its action NVIDIA's resolution for the record's unit, error status and sub-code
(``data/nvlink5_xids.json``: ``RESET_GPU`` is ``reset-gpu``); where NVML's ``nvlink-degraded`` names the GPU now (its
links down), the records are that finding's evidence (:func:`explain`), not a second finding of one fault. Records that
are all Nonfatal are one note (``xid-recorded``): the link recovered, NVIDIA's resolution is to ignore them unless they
recur.

An Xid 45 that says ``caused by previous Xid N`` is the driver tearing down a program's channel after fault N: it is
evidence of N, attached to the finding that names N on that GPU (:func:`explain`), never ``xid-application-fault``.
Where no finding names N (its record is not in this boot's log), it is a note saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucheck.facts import Facts, facts_of
from gpucheck.model import Finding, Severity, finding, most_severe
from gpucheck.pci import pci_key
from gpucheck.records.catalog import owned
from gpucheck.records.facts import FollowUp, NvlinkXid
from gpucheck.records.facts import outcome as outcome_of
from gpucheck.records.nvlink5 import NVLINK5_XIDS, RESOLUTION_ACTIONS, decode, follow_up_json, record_json
from gpucheck.rules.common import label
from gpucheck.rules.nvlink import nvlink_rules
from gpucheck.rules.nvml import answered
from gpucheck.settings import Settings

RECOVERY_ACTION = "recovery_action"
#: The codes whose follow-ups an NVLink finding (NVML's or the log's) carries.
_NVLINK_CODES = NVLINK5_XIDS | {74}


def _gpu(facts: Facts, device: str) -> Any:
    """NVML's GPU at the kernel log's ``0018:01:00``, or None."""
    key = pci_key(device + ".0")
    nf = answered(facts)
    if key is None or nf is None:
        return None
    return next((g for g in nf.gpus if (k := pci_key(g.pci_bus_id)) is not None and k[:3] == key[:3]), None)


def _down_now(facts: Facts, settings: Settings) -> frozenset[str]:
    """The GPUs NVML's own ``nvlink-degraded`` names (links down or fabric short, now)."""
    nf = answered(facts)
    if nf is None:
        return frozenset()
    return frozenset(f.subject for f in nvlink_rules(nf, settings, facts.kernel.nvlink_disabled) if f.subject)


def nvlink5_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """``nvlink-degraded`` for a GPU whose NVLink5 records include a Fatal one (NVML does not name it already);
    ``xid-recorded`` for one whose records are all Nonfatal, and for an Xid 45 whose cause no finding names."""
    rf = facts_of(outcome_of(facts))
    if rf is None or not (rf.nvlink or rf.follow_ups):
        return []
    down = _down_now(facts, settings)
    out: list[Finding] = []
    devices = list(dict.fromkeys([r.device for r in rf.nvlink] + [f.device for f in rf.follow_ups]))
    for device in devices:
        gpu = _gpu(facts, device)
        subject = gpu.id if gpu is not None else None
        who = label(gpu) if gpu is not None else f"The GPU at PCI {device}"
        recs = [r for r in rf.nvlink if r.device == device]
        follows = [f for f in rf.follow_ups if f.device == device]
        logged = {x.code for x in rf.xids if x.kind == "Xid" and x.device == device and not owned(x)}
        fatal = [r for r in recs if r.fatal]
        nvml_names = subject is not None and subject in down
        mine = [f for f in follows if f.cause in {r.xid for r in recs}]
        if fatal and not nvml_names:
            out.append(_fatal(who, device, recs, mine, subject))
        elif recs and not fatal:
            out.append(_nonfatal(who, device, recs, mine, subject))
        # A follow-up whose cause no finding carries (the cause's record is not in the log, NVML does not name it).
        carried = {r.xid for r in recs} | logged | (_NVLINK_CODES if nvml_names else frozenset())
        orphans = [f for f in follows if f.cause not in carried]
        if orphans:
            out.append(_orphans(who, device, orphans, subject))
    return out


def _recovery(recs: list[NvlinkXid]) -> str:
    actions = [RESOLUTION_ACTIONS.get(str(row.get("resolution")), "reset-gpu") if (row := decode(r)) else "reset-gpu"
               for r in recs if r.fatal]
    return most_severe(actions)


def _units(recs: list[NvlinkXid]) -> str:
    return ", ".join(f"Xid {r.xid}.{r.subcode} {r.unit} {'Fatal' if r.fatal else 'Nonfatal'} on link {r.link}"
                     for r in recs[:6])


def _fatal(who: str, device: str, recs: list[NvlinkXid], follows: list[FollowUp], subject: str | None) -> Finding:
    fatal = [r for r in recs if r.fatal]
    action = _recovery(fatal)
    row = decode(fatal[0])
    apps = sorted({f"{f.process or '?'} (pid {f.pid})" for f in follows if f.pid is not None})
    return finding(
        "nvlink-degraded",
        Severity.DEGRADED,
        summary=f"{who} logged a Fatal NVLink error ({_units(fatal)}), {sum(r.count for r in fatal)} time(s) this boot"
        + (f"; the driver tore down the work of {', '.join(apps)} after it (Xid 45)" if apps else "") + ".",
        cause=f"The driver wrote `{fatal[0].text[:200]}`: a Blackwell NVLink unit reported a Fatal error, NVIDIA's "
        f"resolution for it (the Xid catalog's XID 144-150 decode) is {row.get('resolution') if row else 'not listed'}.",
        remedy="Drain the GPU and reset it (`sudo nvidia-smi -r -i <gpu>`), or as NVIDIA's resolution asks; read "
        "`nvidia-smi nvlink -s` after; if Fatal NVLink errors recur on the same link, have the link, cable cartridge or "
        "NVSwitch tray inspected.",
        evidence={"pci": device, "source": "kernel log", "nvlink_records": [record_json(r) for r in recs[:20]],
                  "followed_by": [follow_up_json(f) for f in follows[:20]], RECOVERY_ACTION: action},
        subject=subject,
    )


def _nonfatal(who: str, device: str, recs: list[NvlinkXid], follows: list[FollowUp], subject: str | None) -> Finding:
    return finding(
        "xid-recorded",
        Severity.INFO,
        summary=f"{who} logged Nonfatal NVLink errors ({_units(recs)}), {sum(r.count for r in recs)} time(s) this boot.",
        cause="Each record says Nonfatal: the NVLink unit corrected or contained the error and the link stayed up. "
        "NVIDIA's resolutions: " + ", ".join(sorted({str(row.get('resolution')) for r in recs if (row := decode(r))}) or
                                             {"not in the decode sheet"}) + ".",
        remedy="Nothing to do unless they recur or turn Fatal; then follow NVIDIA's Xid catalog (XID 144-150 decode).",
        evidence={"pci": device, "source": "kernel log", "nvlink_records": [record_json(r) for r in recs[:20]],
                  "followed_by": [follow_up_json(f) for f in follows[:20]]},
        subject=subject,
    )


def _orphans(who: str, device: str, follows: list[FollowUp], subject: str | None) -> Finding:
    causes = sorted({f.cause for f in follows})
    procs = sorted({f"{f.process or '?'} (pid {f.pid})" for f in follows if f.pid is not None})
    return finding(
        "xid-recorded",
        Severity.INFO,
        summary=f"{who}: the driver tore down the work of {', '.join(procs) or 'a program'} after Xid "
        f"{', '.join(map(str, causes))} (Xid 45 'caused by previous Xid'), whose own record is not in this boot's log.",
        cause="Xid 45 is the driver cleaning up a program's channel after another fault; the line names that fault, so "
        "it is no fault of the program's (NVIDIA's catalog: 'Not Solo: IGNORE (follow other Xid)').",
        remedy="Follow the Xid it names (`sudo dmesg | grep -E 'Xid'` over a longer span, or the node's earlier logs).",
        evidence={"pci": device, "source": "kernel log", "followed_by": [follow_up_json(f) for f in follows[:20]]},
        subject=subject,
    )


def explain(facts: Facts, f: Finding) -> Mapping[str, Any]:
    """The kernel log's NVLink records and Xid 45 follow-ups for the finding that names their cause on that GPU:
    NVML's ``nvlink-degraded`` (links down now) gets the GPU's NVLink5 records and the follow-ups of NVLink codes;
    a finding whose evidence lists Xid N (``xids``) gets the follow-ups of N."""
    rf = facts_of(outcome_of(facts))
    from_log = f.evidence.get("source") == "kernel log" and f.id == "nvlink-degraded"  # the records say it already
    if rf is None or not (rf.nvlink or rf.follow_ups) or f.subject is None or from_log:
        return {}
    nf = answered(facts)
    gpu = next((g for g in nf.gpus if g.id == f.subject), None) if nf is not None else None
    key = pci_key(gpu.pci_bus_id) if gpu is not None else None
    if key is None:
        return {}
    device = f"{key.domain:04x}:{key.bus:02x}:{key.device:02x}"
    out: dict[str, Any] = {}
    if f.id == "nvlink-degraded":
        recs = [r for r in rf.nvlink if r.device == device]
        follows = [x for x in rf.follow_ups if x.device == device and x.cause in _NVLINK_CODES]
        if recs:
            out["nvlink_records"] = [record_json(r) for r in recs[:20]]
            if any(r.fatal for r in recs):
                out[RECOVERY_ACTION] = _recovery(recs)
    else:
        named = {x.get("xid") for x in f.evidence.get("xids", []) if isinstance(x, dict)}
        follows = [x for x in rf.follow_ups if x.device == device and x.cause in named]
    if follows:
        out["followed_by"] = [follow_up_json(x) for x in follows[:20]]
    return out
