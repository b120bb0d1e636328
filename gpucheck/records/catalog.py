"""NVIDIA's Xid catalog (``data/xid_catalog.json``, with its source) and the class of each code: read by the rules and
by the records child, which keeps a bounded number of each code's records and counts the processes of the codes a
user program causes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from gpucheck.records.facts import XidRecord

#: Blackwell's NVLink records (``records.nvlink5``).
NVLINK5_XIDS = frozenset(range(144, 151))
_CAUSED_BY = "caused by previous Xid"
#: The class of the codes a user program causes (13, 31, 43 ...): ``xid-application-fault`` where nothing else is wrong.
APPLICATION = "application"


@cache
def xid_catalog() -> dict[str, Any]:
    data = json.loads(resources.files("gpucheck").joinpath("data/xid_catalog.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def xid_entry(code: int) -> Mapping[str, Any]:
    entry = xid_catalog()["xid"].get(str(code))
    return entry if isinstance(entry, dict) else {}


def xid_class(code: int) -> str | None:
    """A code's class: a cause id (``gpu-lost``, ``ecc-errors`` ...), ``application``, ``recovery`` (Xid 154), or None
    (no cause of its own)."""
    if code == 154:
        return "recovery"
    found = xid_entry(code).get("finding")
    return str(found) if found else None


def owned(r: XidRecord) -> bool:
    """The Xid records ``records.nvlinkrules`` judges, which ``records.rules`` leaves alone: Xid 144-150, and an Xid 45
    that names the Xid it followed."""
    return r.kind == "Xid" and (r.code in NVLINK5_XIDS or (r.code == 45 and _CAUSED_BY in r.first_text + r.last_text))
