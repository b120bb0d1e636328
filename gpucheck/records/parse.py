"""Kernel-log lines to Xid records: pure. The lines come from /dev/kmsg (``PRI,SEQ,TS_USEC,FLAGS;MESSAGE``),
``journalctl -k -b -o short-monotonic`` or ``dmesg`` (``[  123.456789] MESSAGE``), or any syslog prefix before the
driver's own words; only the driver's words and the seconds since boot are read."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from gpucheck.records.facts import XidRecord

#: ``NVRM: Xid (PCI:0000:07:00): 119, rest`` (also ``(0000:03:00)`` of old drivers, ``(PCI:0000:3b:00 GPU-I:00 ...)``
#: under MIG).
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<dev>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+(?:\.[0-9A-Fa-f]+)?)[^)]*\): "
                  r"(?P<code>\d+),?\s*(?P<rest>.*)$")
_SXID = re.compile(r"(?P<switch>nvidia-nvswitch\d+): SXid \((?:PCI:)?(?P<dev>[0-9A-Fa-f:.]+)\): (?P<code>\d+),?\s*"
                   r"(?P<rest>.*)$")
_PID = re.compile(r"\bpid=(?:(?P<pid>\d+)|'?<unknown>'?|'?N/A'?)")
_NAME = re.compile(r"\bname=(?P<name><unknown>|[^,]*?)(?:,|$)")
_RECOVERY = re.compile(r"GPU recovery action changed from (?:0x[0-9A-Fa-f]+ \([^)]*\) )?to (?P<to>0x[0-9A-Fa-f]+ \([^)]*\))")
#: ``[  123.456789]``: seconds since boot (dmesg, journalctl -o short-monotonic, a syslog line's kernel stamp).
_MONOTONIC = re.compile(r"\[\s*(?P<s>\d+\.\d+)\]")


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
    fields = header.split(",")
    try:
        usec = int(fields[2]) if len(fields) > 2 else None
    except ValueError:
        usec = None
    return Line(rest.split("\n", 1)[0], usec / 1e6 if usec is not None else None)


def text_line(line: str) -> Line:
    """A line of journalctl's or dmesg's output: its seconds since boot from the ``[ s.us]`` stamp, where it has one."""
    m = _MONOTONIC.search(line)
    return Line(line, float(m["s"]) if m else None)


def _process(rest: str) -> tuple[int | None, str | None]:
    pid_m, name_m = _PID.search(rest), _NAME.search(rest)
    pid = int(pid_m["pid"]) if pid_m and pid_m["pid"] else None
    name = name_m["name"].strip() if name_m else None
    return pid, (None if not name or name == "<unknown>" else name)


def _text_after(rest: str) -> str:
    """The driver's words after the pid and name fields."""
    out = _NAME.sub("", _PID.sub("", rest, count=1), count=1)
    return out.lstrip(", ").strip()


def records(lines: Iterable[Line]) -> tuple[XidRecord, ...]:
    """Every Xid and SXid in ``lines``, gathered by (kind, code, device, pid, process), in the order first seen. An
    SXid event prints its words (``Non-fatal, Link 44 ...``), its ``Data {...}`` and its ``Severity``: its words are
    counted, or its data lines where it printed no words."""
    found: dict[tuple[str, int, str, int | None, str | None], XidRecord] = {}
    details: dict[tuple[str, int, str, int | None, str | None], int] = {}
    for line, kind, m in _matches(lines):
        code, dev, rest = int(m["code"]), m["dev"].lower(), m["rest"].strip()
        pid, name = _process(rest) if kind == "Xid" else (None, None)
        key = (kind, code, dev, pid, name)
        if kind == "SXid" and rest.startswith(("Data {", "Severity ")):
            details[key] = details.get(key, 0) + rest.startswith("Data {")
            if key not in found:
                found[key] = XidRecord(kind, code, dev, None, None, 0, line.seconds, line.seconds, rest, rest,
                                       switch=m["switch"])
            continue
        text = _text_after(rest) if kind == "Xid" else rest
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
    return tuple(r if r.count else replace(r, count=max(details.get(k, 1), 1)) for k, r in found.items())


def _matches(lines: Iterable[Line]) -> Iterator[tuple[Line, str, re.Match[str]]]:
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


def _recovery(text: str) -> str | None:
    m = _RECOVERY.search(text)
    return m["to"] if m else None
