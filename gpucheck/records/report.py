"""The records unit in the terminal summary: where the kernel log was read from, and its Xid records."""

from __future__ import annotations

from gpucheck.facts import Facts, facts_of
from gpucheck.records.facts import KernelLogRead, RecordsFacts
from gpucheck.records.facts import outcome as outcome_of


def records_summary(facts: Facts) -> list[str]:
    rf = facts_of(outcome_of(facts))
    if rf is None:
        return []
    if rf.log.source is None:
        return ["", "kernel log: not read (" + "; ".join(rf.log.tried) + ")"]
    head = f"kernel log ({rf.log.source}, {rf.log.records} records): "
    if not rf.xids:
        return ["", head + "no Xid or SXid record this boot", *read_notes(rf.log)]
    total = sum(r.count for r in rf.xids) + sum(d.count for d in rf.dropped) + sum(c.count for c in rf.uncatalogued)
    lines = ["", head + f"{total} Xid/SXid record(s)", *read_notes(rf.log), *dropped_notes(rf)]
    for r in rf.xids[:20]:
        who = f", {r.process or '?'} pid {r.pid}" if r.pid is not None else (f", {r.process}" if r.process else "")
        lines.append(f"  {r.kind} {r.code} on {r.device}{who}: {r.count}x, {r.last_text[:80]}")
    return lines


def dropped_notes(rf: RecordsFacts) -> list[str]:
    """What the child did not keep of the records: counted, the newest of each code kept."""
    notes = []
    if rf.dropped:
        processes = sum(d.records for d in rf.dropped)
        notes.append(f"  kept: the newest {rf.kept} process(es) of each code on each device; {processes} older one(s) "
                     f"counted, not kept ({sum(d.count for d in rf.dropped)} record(s))")
    if rf.uncatalogued:
        notes.append(f"  kept: the newest {rf.kept} code(s) not in NVIDIA's catalog on each device; "
                     f"{sum(c.codes for c in rf.uncatalogued)} older one(s) counted, not kept "
                     f"({sum(c.count for c in rf.uncatalogued)} record(s))")
    return notes


def read_notes(log: KernelLogRead) -> list[str]:
    """What the reading left out, each a line: the oldest records of a long log (the newest are kept), lines too long
    to be a record, lines that name an Xid the parser could not read, a source that did not end."""
    notes = []
    if log.truncated:
        notes.append(f"  truncated: the {log.dropped} oldest record(s) were dropped, the newest {log.records} kept")
    if log.overlong:
        notes.append(f"  skipped: {log.overlong} line(s) longer than any record of the kernel's")
    if log.unreadable:
        notes.append(f"  skipped: {log.unreadable} Xid/SXid line(s) the parser could not read")
    if log.unfinished:
        notes.append(f"  not read to its end: {log.unfinished}")
    return notes
