"""Kernel-log lines to Xid records: pure. The lines come from /dev/kmsg (``PRI,SEQ,TS_USEC,FLAGS;MESSAGE``),
``journalctl -k -b -o short-monotonic`` or ``dmesg`` (``[  123.456789] MESSAGE``), or any syslog prefix before the
driver's own words; only the driver's words and the seconds since boot are read."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from gpucheck.records.facts import XidRecord

#: A PCI address as the driver writes it: ``0000:07:00`` (a GPU: domain, bus, device), ``0000:04:00.0`` (an NVSwitch,
#: with its function), an 8-digit domain as NVML pads it. Nothing else: ``PCI:...``, ``:::`` or a run of hex digits is no
#: device, and its record is not read.
_PCI = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?(?=[\s)])"
#: An Xid or SXid code: NVIDIA's have at most 3 and 5 digits. A longer one is no code (and never reaches int()).
MAX_CODE_DIGITS = 6
#: A pid: Linux's are at most 4194304 (7 digits); a longer one makes the record unreadable.
MAX_PID_DIGITS = 10
#: Seconds since boot beyond a century are impossible: such a stamp is not read (the record has no time).
MAX_UPTIME_S = 100 * 365.25 * 86400
#: ``NVRM: Xid (PCI:0000:07:00): 119, rest`` (also ``(0000:03:00)`` of old drivers, ``(PCI:0000:3b:00 GPU-I:00 ...)``
#: under MIG).
_XID = re.compile(rf"NVRM: Xid \((?:PCI:)?(?P<dev>{_PCI})[^)]*\): (?P<code>\d{{1,{MAX_CODE_DIGITS}}})(?!\d),?\s*(?P<rest>.*)$",
                  re.ASCII)
_SXID = re.compile(rf"(?P<switch>nvidia-nvswitch\d{{1,4}}): SXid \((?:PCI:)?(?P<dev>{_PCI})\): "
                   rf"(?P<code>\d{{1,{MAX_CODE_DIGITS}}})(?!\d),?\s*(?P<rest>.*)$", re.ASCII)
#: What every Xid and SXid line holds: a line that holds it but neither pattern reads is counted as unreadable.
_MENTION = re.compile(r"(?:NVRM: Xid|: SXid) \(")
_PID = re.compile(r"\bpid=(?:(?P<pid>\d+)|'?<unknown>'?|'?N/A'?)", re.ASCII)
_NAME = re.compile(r"\bname=(?P<name><unknown>|[^,]*?)(?:,|$)")
_RECOVERY = re.compile(r"GPU recovery action changed from (?:0x[0-9A-Fa-f]+ \([^)]*\) )?to (?P<to>0x[0-9A-Fa-f]+ \([^)]*\))")
#: ``[  123.456789]``: seconds since boot (dmesg, journalctl -o short-monotonic, a syslog line's kernel stamp).
_MONOTONIC = re.compile(r"\[\s*(?P<s>\d{1,12}\.\d{1,9})\]", re.ASCII)
#: How much of a record's words is read, and how much of them a record keeps (the rules quote at most 300 characters).
_READ_TEXT = 2000
KEPT_TEXT = 300
#: A /dev/kmsg record's microseconds since boot.
_USEC = re.compile(r"[0-9]{1,16}")


@dataclass(frozen=True)
class Line:
    """One message of the kernel log with its seconds since boot, when the source says."""

    text: str
    seconds: float | None = None


def kmsg_record(record: str) -> Line | None:
    """One /dev/kmsg record (``6,1234,5678901,-;MESSAGE`` and continuation lines) as a Line; None if malformed."""
    header, sep, rest = record.partition(";")
    if not sep:
        return None
    fields = header.split(",", 3)
    usec = fields[2] if len(fields) > 2 else ""
    return Line(rest.split("\n", 1)[0], since_boot(int(usec) / 1e6) if _USEC.fullmatch(usec) else None)


def text_line(line: str) -> Line:
    """A line of journalctl's or dmesg's output: its seconds since boot from the ``[ s.us]`` stamp, where it has one."""
    m = _MONOTONIC.search(line)
    return Line(line, since_boot(float(m["s"])) if m else None)


def since_boot(seconds: float) -> float | None:
    """A stamp's seconds since boot, or None where no machine can have been up that long."""
    return seconds if 0 <= seconds <= MAX_UPTIME_S else None


class Unreadable(ValueError):
    """A record the parser cannot read (a pid of thousands of digits): skipped and counted."""


def process(rest: str) -> tuple[int | None, str | None]:
    """The ``pid=`` and ``name=`` of a record's text (None where absent or ``<unknown>``); Unreadable for a pid of
    more digits than any pid has."""
    pid_m, name_m = _PID.search(rest), _NAME.search(rest)
    if pid_m and pid_m["pid"] and len(pid_m["pid"]) > MAX_PID_DIGITS:
        raise Unreadable(f"a pid of {len(pid_m['pid'])} digits")
    pid = int(pid_m["pid"]) if pid_m and pid_m["pid"] else None
    name = name_m["name"].strip()[:64] if name_m else None
    return pid, (None if not name or name == "<unknown>" else name)


def _text_after(rest: str) -> str:
    """The driver's words after the pid and name fields."""
    out = _NAME.sub("", _PID.sub("", rest, count=1), count=1)
    return out.lstrip(", ").strip()


def records(lines: Iterable[Line]) -> tuple[XidRecord, ...]:
    """Every Xid and SXid in ``lines`` (:func:`parse_records`, without the count of unreadable ones)."""
    return parse_records(lines)[0]


def parse_records(lines: Iterable[Line]) -> tuple[tuple[XidRecord, ...], int]:
    """Every Xid and SXid in ``lines``, gathered by (kind, code, device, pid, process), in the order first seen, and
    how many lines that name an Xid or SXid could not be read (skipped: a code or pid of thousands of digits, a
    device that is no PCI address). An SXid event prints its words (``Non-fatal, Link 44 ...``), its ``Data {...}``
    and its ``Severity``: its words are counted, or its data lines where it printed no words. Linear in the lines."""
    found: dict[tuple[str, int, str, int | None, str | None], XidRecord] = {}
    details: dict[tuple[str, int, str, int | None, str | None], int] = {}
    unreadable = 0
    for line, kind, m in _matches(lines):
        if m is None:
            unreadable += 1
            continue
        code, dev, rest = int(m["code"]), m["dev"].lower(), m["rest"][:_READ_TEXT].strip()
        try:
            pid, name = process(rest) if kind == "Xid" else (None, None)
        except Unreadable:
            unreadable += 1
            continue
        key = (kind, code, dev, pid, name)
        if kind == "SXid" and rest.startswith(("Data {", "Severity ")):
            details[key] = details.get(key, 0) + rest.startswith("Data {")
            if key not in found:
                found[key] = XidRecord(kind, code, dev, None, None, 0, line.seconds, line.seconds, rest[:KEPT_TEXT],
                                       rest[:KEPT_TEXT], switch=m["switch"])
            continue
        text = (_text_after(rest) if kind == "Xid" else rest)[:KEPT_TEXT]
        rec = _recovery(text) if kind == "Xid" and code == 154 else None
        fatal = kind == "SXid" and rest.startswith("Fatal")
        old = found.get(key)
        if old is None or old.count == 0:
            first_s = old.first_s if old is not None else line.seconds
            found[key] = XidRecord(kind, code, dev, pid, name, 1, first_s, line.seconds, text, text, rec,
                                   m["switch"] if kind == "SXid" else None, fatal)
        else:
            found[key] = replace(
                old,
                count=old.count + 1,
                last_s=line.seconds if line.seconds is not None else old.last_s,
                last_text=text,
                recovery_action=rec or old.recovery_action,
                fatal=old.fatal or fatal,
            )
    return tuple(r if r.count else replace(r, count=max(details.get(k, 1), 1)) for k, r in found.items()), unreadable


def _matches(lines: Iterable[Line]) -> Iterator[tuple[Line, str, re.Match[str] | None]]:
    """Each line that names an Xid or SXid, with its kind and match (None: it names one the patterns cannot read)."""
    for line in lines:
        if "Xid" not in line.text:
            continue
        m = _XID.search(line.text)
        if m is not None:
            yield line, "Xid", m
            continue
        m = _SXID.search(line.text)
        if m is not None:
            yield line, "SXid", m
        elif _MENTION.search(line.text):
            yield line, "?", None


def _recovery(text: str) -> str | None:
    m = _RECOVERY.search(text)
    return m["to"] if m else None
