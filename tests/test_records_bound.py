"""Issue 37's acceptance for the kernel log: "16,000 faulting processes in the kernel log cost at most twice what
1,000 cost". The rules were linear already; what the records child kept was not bounded: every process's record went
into the facts, through the child's JSON, the parent's decoding, the rules and the report. The child keeps, of each
code on each device, the records of the newest ``KEPT`` processes and counts the others exactly
(``RecordsFacts.dropped``, ``application_processes``); a record that names no process (an Xid 79, 119, an SXid) is
always kept, so a rare severe record is never lost among many ordinary ones, before or after them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpucheck.records.parse import KEPT, Line, parse_records, read_records, text_line
from gpucheck.records.rules import LISTED
from tests.test_hostile_records import (
    XID13,
    calls,
    doctor,
    faulting_processes,
    one_gpu_records,
    records_facts,
    unknown_codes,
    with_log,
    with_records,
)
from tests.test_kernel_log import kmsg_text

#: The real Xid 79 line (tests/logs/kmsg/xid79-open-gpu-kernel-modules-1151.log) on the fake machine's GPU.
XID79 = "NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus."
#: The real Xid 119 line of tests/logs/kmsg/xid119-dcgm-144.log (it names a process: nv-hostengine, pid 2357).
XID119 = ("NVRM: Xid (PCI:0000:07:00): 119, pid=2357, name=nv-hostengine, Timeout after 6s of waiting for RPC response "
          "from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).")
#: The real Xid 154 line of tests/logs/kmsg/gsp-heartbeat-154-open-gpu-kernel-modules-1200.log, on this GPU.
XID154 = "NVRM: Xid (PCI:0000:07:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
#: A real Xid 45 that names the Xid it followed (tests/logs/kmsg-nvlink5), on this GPU, process by process.
XID45 = "NVRM: Xid (PCI:0000:07:00): 45, pid={pid}, name=python3, Ch 00000001 caused by previous Xid 13"
#: Xid 43 (a program's channel stopped) from the same processes as :data:`XID13`: the processes are counted once.
XID43 = "NVRM: Xid (PCI:0000:07:00): 43, pid={pid}, name=python3, Ch 00000008"


def lines(messages: list[str]) -> list[Line]:
    return [text_line(f"[{1000 + i}.000000] {m}") for i, m in enumerate(messages)]


def test_the_bound_is_at_least_what_a_finding_lists() -> None:
    assert LISTED <= KEPT <= 50


def test_the_facts_of_16000_processes_hold_the_bound_and_count_the_rest() -> None:
    read = read_records(lines(faulting_processes(16_000)))
    assert len(read.xids) == KEPT
    # The newest are kept, in the order first seen.
    assert [r.pid for r in read.xids] == list(range(10_000 + 16_000 - KEPT, 10_000 + 16_000))
    (d,) = read.dropped
    assert (d.kind, d.code, d.device, d.records, d.count, d.owned) == ("Xid", 13, "0000:07:00", 16_000 - KEPT,
                                                                        16_000 - KEPT, False)
    assert (d.first_s, d.last_s) == (1000.0, 1000.0 + 16_000 - KEPT - 1)
    assert [(p.device, p.processes) for p in read.application_processes] == [("0000:07:00", 16_000)]
    # Below the bound nothing is dropped, and what is kept is what parse_records gathers.
    few = read_records(lines(faulting_processes(KEPT)))
    assert few.xids == parse_records(lines(faulting_processes(KEPT)))[0] and not few.dropped
    assert not few.application_processes


def test_a_process_that_faults_again_is_newest_by_its_last_record() -> None:
    """The newest are those whose LAST record is newest: a process that faulted first and again at the end is kept."""
    messages = [*faulting_processes(100), XID13.format(pid=10_000)]
    read = read_records(lines(messages))
    kept = {r.pid: r for r in read.xids}
    assert 10_000 in kept and kept[10_000].count == 2 and len(kept) == KEPT
    assert read.dropped[0].records == 100 - KEPT and read.dropped[0].count == 100 - KEPT


def test_processes_of_several_codes_are_counted_once() -> None:
    """The same 500 processes each with an Xid 13 and an Xid 43: 500 processes, not 1,000."""
    messages = [m for i in range(500) for m in (XID13.format(pid=10_000 + i), XID43.format(pid=10_000 + i))]
    read = read_records(lines(messages))
    assert sorted((d.code, d.records) for d in read.dropped) == [(13, 500 - KEPT), (43, 500 - KEPT)]
    assert [p.processes for p in read.application_processes] == [500]


def test_follow_ups_are_dropped_apart_and_say_so() -> None:
    """An Xid 45 naming the Xid it followed is judged from ``follow_ups`` (records.nvlinkrules), never as a program's
    fault: what is dropped of them is counted apart (``owned``), and not among the processes of application faults."""
    messages = [m for i in range(100) for m in (XID13.format(pid=10_000 + i), XID45.format(pid=10_000 + i))]
    read = read_records(lines(messages))
    assert sorted((d.code, d.owned, d.records) for d in read.dropped) == [(13, False, 100 - KEPT), (45, True, 100 - KEPT)]
    assert [p.processes for p in read.application_processes] == [100]


def test_thousands_of_codes_not_in_the_catalog_are_counted_together() -> None:
    """A code has up to 6 digits: of each device the child keeps the newest ``KEPT`` codes NVIDIA's catalog does not
    have, and counts the others together (what it dropped of their processes included); catalogued codes stay."""
    messages = [f"NVRM: Xid (PCI:0000:07:00): {1000 + c}, pid={10_000 + p}, name=x, y" for p in range(30) for c in range(100)]
    read = read_records(lines([XID119, *messages, XID79]))
    assert sorted({r.code for r in read.xids}) == [79, 119, *range(1000 + 100 - KEPT, 1100)]
    assert len(read.xids) == 2 + KEPT * KEPT
    (folded,) = read.uncatalogued
    assert (folded.device, folded.codes) == ("0000:07:00", 100 - KEPT)
    assert (folded.records, folded.count) == ((100 - KEPT) * 30, (100 - KEPT) * 30)
    assert sorted((d.code, d.records) for d in read.dropped) == [(c, 30 - KEPT) for c in range(1100 - KEPT, 1100)]


def kept(base: Any, messages: list[str]) -> Any:
    """``base`` (records facts) with what the child keeps of ``messages`` (``read_records``)."""
    read = read_records(lines(messages))
    return replace(base, xids=read.xids, kept=KEPT, dropped=read.dropped,
                   application_processes=read.application_processes, uncatalogued=read.uncatalogued)


@pytest.fixture
def both(fake_machine: Callable[[dict[str, Any]], Path]) -> Callable[[list[str]], tuple[list[Any], list[Any]]]:
    """The records rules over the facts of a real diagnosis of a fake one-GPU machine, the kernel log's records those of
    the messages given: every record (``parse_records``) and what the child keeps (``read_records``)."""
    rules_over = one_gpu_records(fake_machine)

    def over(messages: list[str]) -> tuple[list[Any], list[Any]]:
        every = rules_over(lambda base: replace(base, xids=parse_records(lines(messages))[0]))()
        return every, rules_over(lambda base: kept(base, messages))()

    return over


def counts(findings: list[Any]) -> list[tuple[Any, ...]]:
    """What a finding counts: its id and severity, its records, its listed codes' counts (which codes it lists, the
    first 20 kept, differs: the newest are kept), the times and the processes or codes its words count ("16000 times
    this boot", "and 15980 more")."""
    return [(f.id, f.severity, f.evidence.get("records"), sorted(f.evidence.get("codes", {}).values()),
             re.findall(r"(\d+) times? this boot", f.summary), re.findall(r"and (\d+) more", f.summary))
            for f in findings]


MIXES: dict[str, Callable[[], list[str]]] = {
    "processes": lambda: faulting_processes(16_000),
    "codes": lambda: unknown_codes(8_000),
    "79 after": lambda: [*faulting_processes(16_000), XID79],
    "79 before": lambda: [XID79, *faulting_processes(16_000)],
    "119 before": lambda: [XID119, *faulting_processes(16_000)],
    "119 after": lambda: [*faulting_processes(16_000), XID119],
    "13 and 43": lambda: [m for i in range(3_000) for m in (XID13.format(pid=10_000 + i), XID43.format(pid=10_000 + i))],
    "154 after": lambda: [*faulting_processes(16_000), XID154],
    "45 after 13": lambda: [m for i in range(3_000) for m in (XID13.format(pid=10_000 + i), XID45.format(pid=10_000 + i))],
    "codes and 154": lambda: [*unknown_codes(8_000), XID154],
    "codes from many": lambda: [f"NVRM: Xid (PCI:0000:07:00): {1000 + c}, pid={10_000 + p}, name=x, y"
                                for p in range(40) for c in range(100)],
    "unknown code from many": lambda: [f"NVRM: Xid (PCI:0000:07:00): 999, pid={10_000 + i}, name=x, y" for i in range(900)],
}


@pytest.mark.parametrize("mix", MIXES.values(), ids=MIXES.keys())
def test_the_findings_count_what_was_dropped_exactly(mix: Callable[[], list[str]], both: Any) -> None:
    """The findings over what the child keeps count what the findings over every record count: records, codes,
    times, processes; only which records they list (the newest) differs."""
    every, kept = both(mix())
    assert counts(kept) == counts(every)


@pytest.mark.parametrize("order", ["after", "before"])
@pytest.mark.parametrize(("severe", "cause"), [(XID79, "gpu-lost"), (XID119, "gsp-firmware-error")], ids=["79", "119"])
def test_a_severe_record_among_16000_ordinary_ones_is_named(severe: str, cause: str, order: str, both: Any) -> None:
    ordinary = faulting_processes(16_000)
    _, kept = both([*ordinary, severe] if order == "after" else [severe, *ordinary])
    (f,) = [f for f in kept if f.id == cause]
    assert f.severity.value == "blocker"
    # The Xid 13 records are the finding's "also logged", and counted in no other finding.
    assert [x.id for x in kept] == [cause]


def test_the_rules_cost_no_more_for_16000_processes_than_for_1000(
    fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """Over what the child keeps the rules' cost stops growing: 16,000 processes cost the operations of 1,000 (with
    room: twice). Over every record they stay linear (tests/test_hostile_records.py)."""
    rules_over = one_gpu_records(fake_machine)

    def judge(n: int) -> Callable[[], object]:
        return rules_over(lambda base: kept(base, faulting_processes(n)))

    small, large = calls(judge(1_000)), calls(judge(16_000))
    assert large <= 2 * small, (small, large)


@pytest.mark.parametrize("order", ["after", "before"])
def test_16000_processes_and_an_xid_79_through_doctor(
    order: str, tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """The child's JSON says what it dropped and that the newest were kept; the verdict names the Xid 79 whether it
    came before or after 16,000 Xid 13 records; the report is the size of one of 1,000 processes."""
    ordinary = faulting_processes(16_000)
    messages = [*ordinary, XID79] if order == "after" else [XID79, *ordinary]
    with_log(fake_machine, ["0000:07:00.0"], with_records(kmsg_text(), *messages))
    done = doctor("--json", "-", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert report["root_cause"]["id"] == "gpu-lost" and done.returncode == 1, done.stderr[-2000:]
    rf = records_facts(report)
    assert rf["kept"] == KEPT and len(rf["xids"]) == KEPT + 1
    assert [(d["code"], d["records"], d["count"]) for d in rf["dropped"]] == [(13, 16_000 - KEPT, 16_000 - KEPT)]
    assert rf["application_processes"] == [{"device": "0000:07:00", "processes": 16_000}]
    (lost,) = [f for f in report["findings"] if f["id"] == "gpu-lost"]
    assert lost["evidence"]["records"] == 1 and "Xid 79" in lost["summary"]
    assert len(done.stdout) < 200_000, len(done.stdout)


# --- what read_records keeps, drops and counts, exactly (in-process: tests/mutation/run_mutmut.py runs these) ---------


def test_a_record_naming_only_its_pid_or_only_its_name_is_a_process_of_its_own() -> None:
    """A record names its process by pid, by name, or both (the real Xid 63 gives only ``pid=1896``; some drivers
    write ``pid='<unknown>'`` with a name): either is a process, bounded and counted as such; a record naming neither
    is always kept."""
    by_pid = [f"NVRM: Xid (PCI:0000:07:00): 13, pid={10_000 + i}, Graphics Exception" for i in range(30)]
    by_name = [f"NVRM: Xid (PCI:0000:07:00): 43, pid='<unknown>', name=job{i}, Ch 00000008" for i in range(30)]
    neither = "NVRM: Xid (PCI:0000:07:00): 31, pid='<unknown>', name=<unknown>, Ch 00000008"
    read = read_records(lines([*by_pid, *by_name, neither]))
    assert sorted((d.code, d.records, d.count) for d in read.dropped) == [(13, 30 - KEPT, 30 - KEPT),
                                                                          (43, 30 - KEPT, 30 - KEPT)]
    assert [r.pid for r in read.xids if r.code == 13] == list(range(10_000 + 30 - KEPT, 10_030))
    assert [r.process for r in read.xids if r.code == 43] == [f"job{i}" for i in range(30 - KEPT, 30)]
    assert [(r.code, r.pid, r.process) for r in read.xids if r.code == 31] == [(31, None, None)]
    assert [(p.device, p.processes) for p in read.application_processes] == [("0000:07:00", 60)]
    assert read.unreadable == 0 and read_records(lines([XID13.format(pid="9" * 11)])).unreadable == 1


def test_what_is_dropped_keeps_its_times_or_says_it_has_none() -> None:
    """The dropped records' first and last times since boot; none where their lines had no stamp."""
    stamped = read_records(lines(faulting_processes(25)))
    (d,) = stamped.dropped
    assert (d.first_s, d.last_s) == (1000.0, 1004.0)
    bare = read_records([text_line(m) for m in faulting_processes(25)])
    (b,) = bare.dropped
    assert (b.records, b.first_s, b.last_s) == (5, None, None)


def test_follow_ups_alone_make_no_count_of_a_programs_processes() -> None:
    """Only a GPU that lost records of programs' own faults gets its processes counted (``XidProcesses``): Xid 45s that
    name the Xid they followed (``owned``), dropped by the hundred, do not make the five Xid 13 processes a count."""
    messages = [XID45.format(pid=20_000 + i) for i in range(100)] + [XID13.format(pid=10_000 + i) for i in range(5)]
    read = read_records(lines(messages))
    assert [(d.code, d.owned) for d in read.dropped] == [(45, True)] and read.application_processes == ()


def unknown(code: int, pid: int | None = None) -> str:
    return f"NVRM: Xid (PCI:0000:07:00): {code}, " + (f"pid={pid}, name=x, " if pid is not None else "") + "y"


def test_the_newest_codes_not_in_the_catalog_are_kept_by_their_last_record() -> None:
    """Of a device's codes NVIDIA's catalog has not, the ``keep`` whose last record is newest are kept (not the highest
    codes, not the last process's), the others counted together with their times; exactly ``keep`` codes fold
    nothing; each device on its own."""
    # Code 2001 first (two processes, the first of which faults again last), then 2000 and 2002.
    messages = [unknown(2001, 1), unknown(2001, 2), unknown(2000), unknown(2002), unknown(2001, 1)]
    read = read_records(lines(messages), keep=2)
    assert sorted({r.code for r in read.xids}) == [2001, 2002]
    (folded,) = read.uncatalogued
    assert (folded.device, folded.codes, folded.records, folded.count, folded.first_s, folded.last_s) == (
        "0000:07:00", 1, 1, 1, 1002.0, 1002.0)
    first_kept = read_records(lines([unknown(2000), unknown(1999)]), keep=1)
    assert [r.code for r in first_kept.xids] == [1999] and first_kept.uncatalogued[0].codes == 1
    assert read_records(lines([unknown(2000), unknown(1999)]), keep=2).uncatalogued == ()
    two = [unknown(3000).replace("07:00", "08:00"), *(unknown(2000 + c) for c in range(3))]
    assert [(c.device, c.codes) for c in read_records(lines(two), keep=2).uncatalogued] == [("0000:07:00", 1)]
    three = [*two, *(unknown(4000 + c).replace("07:00", "09:00") for c in range(3))]
    assert [(c.device, c.codes) for c in read_records(lines(three), keep=2).uncatalogued] == [
        ("0000:07:00", 1), ("0000:09:00", 1)]
    bare = read_records([text_line(unknown(2000 + c)) for c in range(3)], keep=2)
    assert (bare.uncatalogued[0].first_s, bare.uncatalogued[0].last_s) == (None, None)


def test_folded_codes_count_what_was_dropped_of_them_with_its_times() -> None:
    """A folded code's processes dropped before it was folded are counted in the fold, with their times."""
    messages = [unknown(2000, 100 + p) for p in range(5)] + [unknown(2001), unknown(2002)]
    read = read_records(lines(messages), keep=2)
    (folded,) = read.uncatalogued
    assert (folded.codes, folded.records, folded.count, folded.first_s, folded.last_s) == (1, 5, 5, 1000.0, 1004.0)
    assert read.dropped == () and sorted(r.code for r in read.xids) == [2001, 2002]


def test_a_154_without_a_recovery_action_in_its_words_has_none() -> None:
    (r,) = read_records(lines(["NVRM: Xid (PCI:0000:07:00): 154, something the driver writes otherwise"])).xids
    assert (r.code, r.recovery_action) == (154, None)
