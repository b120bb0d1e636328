"""Blackwell's NVLink records, one by one, and the Xid 45 records that name their cause: pure.

An NVLink5 Xid (144-150) record says its unit, its own fatality and where it happened::

    NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 ...)

Its sub-code is bits 20-25 of the first number (intrinfo), and NVIDIA's "XID 144-150 Decode" sheet
(``data/nvlink5_xids.json``) gives, for the unit, the error status and an intrinfo bit pattern, the resolution
(``RESET_GPU``, ``IGNORE``, ``XID_154_EVAL``) and the severity; the record's own word (Fatal, Nonfatal) is its fatality
(gpud's ``ExtractNVRMXidInfoExtended`` and ``lookupNVLinkRule`` read them so). An Xid 45 that says ``caused by previous
Xid 149`` is the channel the driver tore down after that fault (open-gpu-kernel-modules#1150): evidence of it.
Every number is bounded in digits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import cache
from importlib import resources
from typing import Any

from gpucheck.records.catalog import NVLINK5_XIDS as NVLINK5_XIDS
from gpucheck.records.facts import FollowUp, NvlinkXid
from gpucheck.records.parse import Line, Newest, Unreadable, process

#: At most this many distinct records of each form are kept; past it, the ones seen most recently (``parse.Newest``).
MAX_RECORDS = 4096
_TEXT = 300
_DEV = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
_EXTENDED = re.compile(
    rf"NVRM: Xid \(PCI:(?P<dev>{_DEV})\): (?P<xid>14[4-9]|150)(?!\d)(?:, pid=[^,]{{0,40}}, name=[^,]{{0,80}})?, "
    r"(?P<unit>[A-Z][A-Z0-9_]{0,40}(?:/[A-Z][A-Z0-9_]{0,40})?)\s+(?P<sev>Nonfatal|Fatal)\s+XC[01]\s+i\d{1,3}\s+"
    r"Link\s+(?P<link>-?\d{1,3})(?!\d)\s+\((?P<intr>0x[0-9A-Fa-f]{1,8})\s+(?P<status>0x[0-9A-Fa-f]{1,8})\b")
_FOLLOW = re.compile(
    rf"NVRM: Xid \((?:PCI:)?(?P<dev>{_DEV})[^)]{{0,80}}\): 45(?!\d),(?P<rest>.{{0,400}}?)caused by previous Xid "
    r"(?P<cause>\d{1,3})(?!\d)")


def subcode(intrinfo: int) -> int:
    """NVIDIA's sub-code of an NVLink5 record: bits 20-25 of intrinfo."""
    return (intrinfo >> 20) & 0x3F


def nvlink_records(lines: Iterable[Line]) -> tuple[tuple[NvlinkXid, ...], tuple[FollowUp, ...]]:
    """Every NVLink5 record and every Xid 45 naming the Xid it followed in ``lines``, each gathered by all it says (past
    MAX_RECORDS of a form, the ones seen most recently)."""
    found: Newest[tuple[Any, ...], NvlinkXid] = Newest(MAX_RECORDS)
    follow: Newest[tuple[Any, ...], FollowUp] = Newest(MAX_RECORDS)
    for line in lines:
        text = line.text
        if "NVRM: Xid" not in text:
            continue
        m = _EXTENDED.search(text)
        if m is not None:
            intr, status = int(m["intr"], 16), int(m["status"], 16)
            key = (m["dev"].lower(), int(m["xid"]), m["unit"], m["sev"] == "Fatal", int(m["link"]), intr, status)
            old = found.get(key)
            if old is not None:
                found[key] = replace(old, count=old.count + 1, last_s=line.seconds or old.last_s)
            else:
                found[key] = NvlinkXid(key[1], key[0], key[2], key[3], key[4], intr, subcode(intr), status, 1,
                                       line.seconds, line.seconds, text[m.start():][:_TEXT])
            continue
        m = _FOLLOW.search(text)
        if m is not None:
            try:
                pid, name = process(m["rest"])
            except Unreadable:
                pid, name = None, None
            fkey = (m["dev"].lower(), int(m["cause"]), pid, name)
            prev = follow.get(fkey)
            if prev is not None:
                follow[fkey] = replace(prev, count=prev.count + 1, last_s=line.seconds or prev.last_s)
            else:
                follow[fkey] = FollowUp(fkey[0], fkey[1], pid, name, 1, line.seconds, line.seconds,
                                        text[m.start():][:_TEXT])
    return tuple(found.values()), tuple(follow.values())


@cache
def decode_table() -> tuple[Mapping[str, Any], ...]:
    data = json.loads(resources.files("gpucheck").joinpath("data/nvlink5_xids.json").read_text(encoding="utf-8"))
    return tuple(data["rows"])


def _pattern(pattern: str, value: int) -> bool:
    if len(pattern) != 32:
        return False
    return all(c == "-" or ((value >> (31 - i)) & 1) == (c == "1") for i, c in enumerate(pattern))


def _unit_matches(row_unit: str, unit: str) -> bool:
    aliases = [a for a in re.split(r"[/,() ]+", row_unit) if a] + [row_unit]
    return unit.upper() in {a.upper() for a in aliases}


def decode(r: NvlinkXid) -> Mapping[str, Any] | None:
    """The row of NVIDIA's decode sheet for ``r`` (its xid, unit, error status and intrinfo), or None."""
    for row in decode_table():
        if (row["xid"] == r.xid and _unit_matches(str(row["unit"]), r.unit) and int(row["error_status"], 16) == r.error_status
                and (_pattern(str(row["intrinfo_v2"]), r.intrinfo) or _pattern(str(row["intrinfo_v1"]), r.intrinfo))):
            return row
    return None


#: NVIDIA's resolution buckets as actions (``model.ACTIONS``).
RESOLUTION_ACTIONS = {"RESET_GPU": "reset-gpu", "RESTART_BM": "reboot", "IGNORE": "none", "XID_154_EVAL": "none",
                      "CONTACT_SUPPORT": "service-hardware"}


def record_json(r: NvlinkXid) -> dict[str, Any]:
    row = decode(r)
    return {
        "xid": r.xid, "pci": r.device, "unit": r.unit, "fatal": r.fatal, "link": r.link, "subcode": r.subcode,
        "intrinfo": f"0x{r.intrinfo:08x}", "error_status": f"0x{r.error_status:08x}", "count": r.count,
        "first_s": r.first_s, "last_s": r.last_s, "text": r.text,
        "nvidia_resolution": row.get("resolution") if row else None,
        "nvidia_investigatory": row.get("investigatory") if row else None,
        "nvidia_severity": row.get("severity") if row else None,
    }


def follow_up_json(f: FollowUp) -> dict[str, Any]:
    return {"xid": 45, "pci": f.device, "caused_by_xid": f.cause, "pid": f.pid, "process": f.process,
            "count": f.count, "first_s": f.first_s, "last_s": f.last_s, "text": f.text}
