"""Kernel-log lines to the driver's records of taking a GPU: pure. When the nvidia driver cannot probe or initialise a
GPU on the bus it says so in its own words, without an Xid number (``records.parse`` reads those). The forms, each
seen in a public report (``tests/logs/kmsg-driver/INDEX.md``) and in gpud's and NVSentinel's kmsg matchers:

- fallen off the bus as it was probed: a newer driver's one message over three lines (``NVRM: The NVIDIA GPU
  0000:b3:00.0`` / ``NVRM: (PCI ID: 10de:26b5) installed in this system has`` / ``NVRM: fallen off the bus and is not
  responding to commands.``), the same on one line, an older driver's ``NVRM: GPU at 0000:01:00.0 has fallen off the
  bus.``, and ``NVRM: GPU 0000:a1:00.0: GPU has fallen off the bus.`` beside an Xid 79;
- ``NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)`` with ``rm_init_adapter failed, device minor
  number 5``, and an older driver's ``NVRM: RmInitAdapter failed! (0x26:0xffff:1375)`` with ``rm_init_adapter failed
  for device bearing minor number 0``;
- ``NVRM: The NVIDIA probe routine failed for 2 device(s).``;
- the PCI regions: the driver's ``NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:`` / ``NVRM:
  BAR1 is 0M @ 0x0 (PCI:0000:14:00.0)``, the kernel's ``nvidia: probe of 0000:14:00.0 failed with error -1`` and
  ``pci 0000:01:00.0: BAR 1 [mem size 0x10000000 64bit pref]: failed to assign`` (older kernels: ``BAR 1: no space
  for [mem size ...]``).

A message of several lines is one /dev/kmsg record whose newlines the kernel writes as ``\\x0a``; dmesg and
journalctl print its further lines indented, without a time stamp. Both are read as one message here. Every number
read is bounded in digits, so a hostile line costs no more than any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace

from gpucheck.pci import pci_key
from gpucheck.records.facts import DriverRecord
from gpucheck.records.parse import Line, Newest

FALLEN, RM_INIT, PROBE_ROUTINE, BAR_INVALID, BAR_UNASSIGNED, PROBE_FAILED = (
    "fallen-off-the-bus", "rm-init-adapter-failed", "probe-routine-failed", "bar-invalid", "bar-unassigned",
    "probe-failed",
)
#: The kinds in the order a finding names them when one GPU has several: what the driver saw first of the GPU.
KINDS = (FALLEN, BAR_INVALID, BAR_UNASSIGNED, RM_INIT, PROBE_FAILED, PROBE_ROUTINE)
#: At most this many distinct records are kept (each is one GPU's one kind): more GPUs than a machine has. Past it,
#: the ones seen most recently are kept (``parse.Newest``).
MAX_RECORDS = 4096
_TEXT = 300

_BDF = r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
#: Only the lines that may be one of the forms are looked at closely.
_WORDS = ("NVRM:", "nvidia: probe of", "BAR ")
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (FALLEN, re.compile(rf"NVRM: The NVIDIA GPU (?P<dev>{_BDF})(?: \(PCI ID: (?P<detail>[0-9A-Fa-f]{{4}}:[0-9A-Fa-f]{{4}})\))?"
                        r" installed in this system has fallen off the bus")),
    (FALLEN, re.compile(rf"NVRM: GPU at (?:PCI:)?(?P<dev>{_BDF}) has fallen off the bus")),
    (FALLEN, re.compile(rf"NVRM: GPU (?P<dev>{_BDF}): GPU has fallen off the bus")),
    (RM_INIT, re.compile(rf"NVRM: (?:GPU (?P<dev>{_BDF}): )?RmInitAdapter failed! "
                         r"\((?P<detail>0x[0-9A-Fa-f]{1,8}:0x[0-9A-Fa-f]{1,8}:\d{1,6})\)")),
    ("minor", re.compile(rf"NVRM: (?:GPU (?P<dev>{_BDF}): )?rm_init_adapter failed(?:, device minor number"
                         r"| for device bearing minor number) (?P<minor>\d{1,6})(?!\d)")),
    (PROBE_ROUTINE, re.compile(r"NVRM: The NVIDIA probe routine failed for (?P<detail>\d{1,6}) device\(s\)")),
    (BAR_INVALID, re.compile(r"NVRM: This PCI I/O region assigned to your NVIDIA device is invalid: "
                             rf"(?P<detail>BAR\d is \d{{1,9}}[KMG]? @ 0x[0-9A-Fa-f]{{1,16}}) \(PCI:(?P<dev>{_BDF})\)")),
    (PROBE_FAILED, re.compile(rf"\bnvidia: probe of (?P<dev>{_BDF}) failed with error (?P<detail>-?\d{{1,6}})(?!\d)")),
    (BAR_UNASSIGNED, re.compile(rf"\b(?:pci|nvidia) (?P<dev>{_BDF}): (?P<detail>BAR \d{{1,2}})(?: \[[^\]]{{0,120}}\])?: "
                                r"(?P<what>can't assign; no space|failed to assign|no space for|can't reserve)")),
)
#: A further line of a message of several lines: a kmsg record's escaped newline, or an indented line of dmesg's or
#: journalctl's that carries the driver's prefix again.
_CONTINUED = re.compile(r"\s*(?:\\x0a|\n)\s*NVRM:\s*")


def driver_records(lines: Iterable[Line]) -> tuple[DriverRecord, ...]:
    """Every record of the forms above in ``lines``, gathered by (kind, GPU), in the order first seen (past
    MAX_RECORDS of them, the ones seen most recently). A GPU's
    RmInitAdapter failures (each attempt writes a pair of lines) are one record with the minor number its second line
    names; an old driver's name no GPU, so they are gathered by that minor number."""
    found: Newest[tuple[str, str | None, int | None], DriverRecord] = Newest(MAX_RECORDS)
    #: An old driver's ``RmInitAdapter failed!`` waiting for its ``rm_init_adapter ... minor number N`` line.
    pending: tuple[Line, str, str | None, str] | None = None

    def add(key: tuple[str, str | None, int | None], line: Line, form: str, detail: str | None, text: str) -> None:
        old = found.get(key)
        if old is not None:
            last = line.seconds if line.seconds is not None else old.last_s
            found[key] = replace(old, count=old.count + 1, last_s=last, detail=old.detail or detail)
        else:
            found[key] = DriverRecord(key[0], key[1], key[2], detail, 1, line.seconds, line.seconds, text[:_TEXT], form)

    for line, form, kind, m in _matches(lines):
        dev, detail, text = _device(m.groupdict().get("dev")), m.groupdict().get("detail"), _words(line.text)
        if pending is not None and not (kind == "minor" and dev is None):
            add((RM_INIT, None, None), *pending)  # an old RmInitAdapter line no minor number followed
            pending = None
        if kind == RM_INIT and dev is None:
            pending = (line, form, detail, text)
        elif kind == "minor":
            minor = int(m["minor"])
            if dev is None:
                first, first_form, code, words = pending if pending is not None else (line, form, None, "")
                add((RM_INIT, None, minor), first, first_form, code, f"{words} / {text}" if words else text)
                pending = None
            elif (RM_INIT, dev, None) in found:
                old = found[(RM_INIT, dev, None)]
                found[(RM_INIT, dev, None)] = replace(old, minor=old.minor if old.minor is not None else minor)
            else:
                add((RM_INIT, dev, None), line, form, None, text)
                found[(RM_INIT, dev, None)] = replace(found[(RM_INIT, dev, None)], minor=minor)
        else:
            if kind == BAR_UNASSIGNED:
                detail = f"{detail}: {m['what']}"
            add((kind, dev, None), line, form, detail, text)
    if pending is not None:
        add((RM_INIT, None, None), *pending)
    return tuple(found.values())


def _words(text: str) -> str:
    """The driver's (or the kernel's) words of a message, its further lines joined, without the log's prefix."""
    return _CONTINUED.sub(" ", text[max(text.find(_start(text)), 0):]).strip()


def _start(text: str) -> str:
    """Where the driver's (or the kernel's) words begin in a line with a syslog, dmesg or journalctl prefix."""
    for words in ("NVRM:", "nvidia: probe of", "pci ", "nvidia "):
        if words in text:
            return words
    return text[:1]


def _device(text: str | None) -> str | None:
    key = pci_key(text)
    return key.text if key is not None else None


def _messages(lines: Iterable[Line]) -> Iterator[tuple[Line, str]]:
    """Each message with its form: a kmsg record's escaped newlines and dmesg's indented further lines joined."""
    pending: Line | None = None
    for line in lines:
        text = line.text
        if pending is not None and line.seconds is None and text[:1].isspace() and text.lstrip().startswith("NVRM:"):
            pending = Line(pending.text + "\n" + text.strip(), pending.seconds)
            continue
        if pending is not None:
            yield pending, ("multi-line" if "\n" in pending.text or "\\x0a" in pending.text else "one-line")
        pending = line
    if pending is not None:
        yield pending, ("multi-line" if "\n" in pending.text or "\\x0a" in pending.text else "one-line")


def _matches(lines: Iterable[Line]) -> Iterator[tuple[Line, str, str, re.Match[str]]]:
    for line, form in _messages(lines):
        if not any(w in line.text for w in _WORDS):
            continue
        text = _CONTINUED.sub(" ", line.text)
        for kind, pattern in _PATTERNS:
            m = pattern.search(text)
            if m is not None:
                yield line, form, kind, m
                break
