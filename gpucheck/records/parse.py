"""Kernel-log lines to Xid records: pure. The lines come from /dev/kmsg (``PRI,SEQ,TS_USEC,FLAGS;MESSAGE``),
``journalctl -k -b -o short-monotonic`` or ``dmesg`` (``[  123.456789] MESSAGE``), or any syslog prefix before the
driver's own words; only the driver's words and the seconds since boot are read."""

from __future__ import annotations

import heapq
import re
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from gpucheck.records.catalog import APPLICATION, owned, xid_class, xid_entry
from gpucheck.records.facts import XidCodes, XidDropped, XidProcesses, XidRecord, process_label

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
#: Of each code on each device, the records of at most this many processes are kept (the newest): a finding lists at
#: most 20 records (``records.rules.LISTED``) and counts the rest, so every record a finding of one code lists is one
#: kept; more would only be carried, encoded, read back and judged to be counted (:func:`read_records`).
KEPT = 20
#: A /dev/kmsg record's microseconds since boot.
_USEC = re.compile(r"[0-9]{1,16}")


@dataclass(frozen=True)
class Line:
    """One message of the kernel log with its seconds since boot, when the source says."""

    text: str
    seconds: float | None = None


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Newest(Generic[K, V]):
    """At most ``limit`` records by key, the ones seen most recently: past the limit a new key evicts the key seen
    least recently, so a log with more distinct records than that keeps its newest (as the reading keeps its newest
    lines), never its oldest. Each write of a key is a sighting; ``values`` are in the order the kept keys were first
    seen; ``evicted`` counts the keys let go."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._items: dict[K, V] = {}
        self._seen: OrderedDict[K, None] = OrderedDict()
        self.evicted = 0

    def __contains__(self, key: K) -> bool:
        return key in self._items

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def __setitem__(self, key: K, value: V) -> None:
        if key in self._items:
            self._seen.move_to_end(key)
        else:
            if len(self._items) >= self._limit:
                oldest, _ = self._seen.popitem(last=False)
                del self._items[oldest]
                self.evicted += 1
            self._seen[key] = None
        self._items[key] = value

    def values(self) -> tuple[V, ...]:
        return tuple(self._items.values())


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


#: A record's key: (kind, code, device, pid, process).
_Key = tuple[str, int, str, int | None, str | None]


@dataclass(frozen=True)
class XidRead:
    """The Xid and SXid records of a log, bounded (:func:`read_records`): what ``RecordsFacts`` keeps of them."""

    xids: tuple[XidRecord, ...]
    dropped: tuple[XidDropped, ...]
    application_processes: tuple[XidProcesses, ...]
    unreadable: int
    uncatalogued: tuple[XidCodes, ...] = ()


def parse_records(lines: Iterable[Line]) -> tuple[tuple[XidRecord, ...], int]:
    """Every Xid and SXid in ``lines``, gathered by (kind, code, device, pid, process), in the order first seen, and
    how many lines that name an Xid or SXid could not be read (skipped: a code or pid of thousands of digits, a
    device that is no PCI address). Unbounded: the records child keeps :func:`read_records`'s."""
    found, _, unreadable = _gather(lines)
    return tuple(found.values()), unreadable


def read_records(lines: Iterable[Line], keep: int = KEPT) -> XidRead:
    """:func:`parse_records` bounded: of each code on each device, the records of at most ``keep`` processes, those
    whose last record is the newest; the others counted exactly per code and device (``XidDropped``), and, for each
    GPU that lost some, the distinct processes its application-fault records name (``XidProcesses``). A record naming
    no process (an Xid 79, 119, an SXid) is one per code and device and always kept, so a rare record is never lost
    among many ordinary ones. Linear in the lines; what it returns is bounded by the codes and devices named."""
    found, last, unreadable = _gather(lines)
    groups: dict[tuple[str, int, str, bool], list[_Key]] = {}
    for key, r in found.items():
        if r.pid is not None or r.process is not None:
            groups.setdefault((*key[:3], owned(r)), []).append(key)
    gone: set[_Key] = set()
    dropped: list[XidDropped] = []
    for (kind, code, device, is_owned), keys in groups.items():
        if len(keys) <= keep:
            continue
        newest = set(heapq.nlargest(keep, keys, key=last.__getitem__))
        old = [k for k in keys if k not in newest]
        gone.update(old)
        rs = [found[k] for k in old]
        firsts = [r.first_s for r in rs if r.first_s is not None]
        lasts = [r.last_s for r in rs if r.last_s is not None]
        dropped.append(XidDropped(kind, code, device, len(rs), sum(r.count for r in rs), min(firsts, default=None),
                                  max(lasts, default=None), is_owned))
    lost = {d.device for d in dropped if d.kind == "Xid" and not d.owned and xid_class(d.code) == APPLICATION}
    labels: dict[str, set[str]] = {}
    for r in found.values():
        if r.device in lost and r.kind == "Xid" and (r.pid is not None or r.process is not None) and not owned(r) \
                and xid_class(r.code) == APPLICATION:
            labels.setdefault(r.device, set()).add(process_label(r))
    processes = tuple(XidProcesses(device, len(names)) for device, names in labels.items())
    # Codes NVIDIA's catalog does not have (one finding for them all, ``records.rules``): of each device, the records
    # of the newest ``keep`` such codes are kept, the others counted together, what was dropped of them included.
    newest_of: dict[str, dict[int, int]] = {}
    keys_of: dict[str, list[_Key]] = {}
    for k, r in found.items():
        if r.kind == "Xid" and not owned(r) and not xid_entry(r.code):
            codes = newest_of.setdefault(r.device, {})
            codes[r.code] = max(codes.get(r.code, -1), last[k])
            keys_of.setdefault(r.device, []).append(k)
    folded: list[XidCodes] = []
    for device, codes in newest_of.items():
        if len(codes) <= keep:
            continue
        newest_codes = set(heapq.nlargest(keep, codes, key=codes.__getitem__))
        old = [k for k in keys_of[device] if found[k].code not in newest_codes and k not in gone]
        gone.update(old)
        rs = [found[k] for k in old]
        folds = {d for d in dropped if d.kind == "Xid" and not d.owned and d.device == device and d.code in codes
                 and d.code not in newest_codes}
        more = [d for d in dropped if d in folds]
        dropped = [d for d in dropped if d not in folds]
        firsts = [s for s in [r.first_s for r in rs] + [d.first_s for d in more] if s is not None]
        lasts = [s for s in [r.last_s for r in rs] + [d.last_s for d in more] if s is not None]
        folded.append(XidCodes(device, len(codes) - keep, len(rs) + sum(d.records for d in more),
                               sum(r.count for r in rs) + sum(d.count for d in more), min(firsts, default=None),
                               max(lasts, default=None)))
    kept = tuple(r for k, r in found.items() if k not in gone)
    return XidRead(kept, tuple(dropped), processes, unreadable, tuple(folded))


def _gather(lines: Iterable[Line]) -> tuple[dict[_Key, XidRecord], dict[_Key, int], int]:
    """The records of ``lines`` gathered, in the order first seen; the index of each one's last line; the count of
    unreadable lines. An SXid event prints its words (``Non-fatal, Link 44 ...``), its ``Data {...}`` and its
    ``Severity``: its words are counted, or its data lines where it printed no words. Linear in the lines."""
    found: dict[_Key, XidRecord] = {}
    last: dict[_Key, int] = {}
    details: dict[_Key, int] = {}
    unreadable = 0
    for index, (line, kind, m) in enumerate(_matches(lines)):
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
        last[key] = index
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
    for key, r in found.items():
        if not r.count:
            found[key] = replace(r, count=max(details.get(key, 1), 1))
    return found, last, unreadable


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
