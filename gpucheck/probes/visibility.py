"""Visibility environment variables, parsed the way the CUDA driver and the container runtime read them.

What the CUDA driver does with ``CUDA_VISIBLE_DEVICES`` (CUDA C Programming
Guide, "CUDA Environment Variables"; behaviour confirmed in ../shared/PITFALLS.md):

- a comma-separated list of device indices (in CUDA order), ``GPU-<uuid prefix>``
  or ``MIG-<id>`` entries;
- parsing stops at the first invalid entry: that entry and every entry after it
  are hidden (``-1`` is the idiom for "no GPU");
- an empty value hides every device: ``cuInit`` then returns 100
  (``CUDA_ERROR_NO_DEVICE``).

``NVIDIA_VISIBLE_DEVICES`` is read by the NVIDIA container runtime when a
container starts (``all``, ``none``, ``void``, a list); inside the container it
explains why there are no device nodes. ``CUDA_DEVICE_ORDER`` is
``FASTEST_FIRST`` (default) or ``PCI_BUS_ID``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from gpucheck.facts import VisibilityFacts, VisibleEntry

_INDEX = re.compile(r"[+-]?\d+")
_UUID = re.compile(r"GPU-[0-9a-fA-F-]+")
_MIG = re.compile(r"MIG-[\w/-]+")
VALID_ORDERS = ("FASTEST_FIRST", "PCI_BUS_ID")


def parse_cuda_visible_devices(value: str, device_count: int | None) -> tuple[VisibleEntry, ...]:
    entries: list[VisibleEntry] = []
    stopped_by: str | None = None
    seen: set[str] = set()
    for raw in value.split(","):
        text = raw.strip()
        if stopped_by is not None:
            entries.append(VisibleEntry(text, _kind(text), _index(text), False, f"after invalid entry {stopped_by!r}"))
            continue
        kind = _kind(text)
        idx = _index(text)
        reason = None
        if kind == "invalid":
            reason = "not an index, GPU- UUID or MIG- id" if text else "empty entry"
        elif kind == "index" and idx is not None and idx < 0:
            kind, reason = "invalid", "negative index"
        elif kind == "index" and idx is not None and device_count is not None and idx >= device_count:
            kind, reason = "invalid", f"no device {idx} (the host has {device_count})"
        elif text in seen:
            kind, reason = "invalid", "repeated entry"
        if kind == "invalid":
            stopped_by = text
            entries.append(VisibleEntry(text, kind, idx, False, reason))
            continue
        seen.add(text)
        entries.append(VisibleEntry(text, kind, idx, True, None))
    return tuple(entries)


def _kind(text: str) -> str:
    if _INDEX.fullmatch(text):
        return "index"
    if _UUID.fullmatch(text):
        return "uuid"
    if _MIG.fullmatch(text):
        return "mig"
    return "invalid"


def _index(text: str) -> int | None:
    return int(text) if _INDEX.fullmatch(text) else None


def probe_visibility(device_count: int | None, environ: Mapping[str, str] | None = None) -> VisibilityFacts:
    env = os.environ if environ is None else environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER")
    notes: list[str] = []
    entries: tuple[VisibleEntry, ...] = ()
    hides_all = False
    visible: int | None = device_count
    if cvd is not None:
        entries = parse_cuda_visible_devices(cvd, device_count)
        honoured = [e for e in entries if e.honoured]
        hides_all = not honoured
        visible = len(honoured) if device_count is not None else None
        if cvd.strip() != cvd or any(" " in e.text for e in entries):
            notes.append("CUDA_VISIBLE_DEVICES has spaces in it")
    if order is not None and order not in VALID_ORDERS:
        notes.append(f"CUDA_DEVICE_ORDER={order!r} is not one of {', '.join(VALID_ORDERS)}; the driver uses FASTEST_FIRST")
    if (
        device_count is not None
        and device_count > 1
        and order != "PCI_BUS_ID"
        and any(e.kind == "index" for e in entries)
    ):
        notes.append(
            "CUDA_VISIBLE_DEVICES uses indices in CUDA's FASTEST_FIRST order, which can differ from nvidia-smi's"
            " PCI order; set CUDA_DEVICE_ORDER=PCI_BUS_ID to make them agree"
        )
    return VisibilityFacts(
        cuda_visible_devices=cvd,
        nvidia_visible_devices=nvd,
        cuda_device_order=order,
        entries=entries,
        hides_all=hides_all,
        visible_count=visible,
        device_count=device_count,
        notes=tuple(notes),
    )
