"""Issue 35, point 4: Blackwell's NVLink records (Xid 144-150) one by one, with their sub-codes and the fatality each
record states, decoded against NVIDIA's "XID 144-150 Decode" sheet as gpud decodes them; an Xid 45 that says "caused
by previous Xid N" attached to that cause, never a program's fault. Real lines (``tests/logs/kmsg-nvlink5/``, each
with its source in ``INDEX.md``) through the real reader, and the fake machines of ``tests/scenarios/nvlink5/``
through ``pytest --gpucheck`` and ``gpucheck doctor --framework=none``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.records.nvlink5 import MAX_RECORDS, decode, decode_table, nvlink_records, subcode
from gpucheck.records.parse import text_line
from tests.contracts import assert_one_red_line
from tests.test_driver_probe import assert_indexed, doctor_on, kmsg_of, load, read_back, with_log

LOGS = Path(__file__).parent / "logs" / "kmsg-nvlink5"
SCENARIO_DIR = Path(__file__).parent / "scenarios" / "nvlink5"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.json"))

#: Each log's NVLink5 records as (xid, device, unit, fatal, link, sub-code, error status, NVIDIA's resolution), and its
#: Xid 45 follow-ups as (device, cause, process, count).
PARSED: dict[str, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = {
    "gpud-1160-nvlink5-subcodes.log": ([
        (144, "0000:01:00", "SAW_MVB", False, 0, 0, 0x8, "IGNORE"),
        (149, "0000:00:00", "NETIR_LINK_EVT", True, 0, 38, 0x0, "IGNORE"),
        (149, "0000:00:00", "NETIR_LINK_EVT", True, 0, 37, 0x0, "RESET_GPU"),
    ], []),
    "gpud-1174-nvlink5-records.log": ([
        (149, "0019:01:00", "NETIR", True, -1, 0, 0x0, "RESET_GPU"),
        (145, "0018:01:00", "RLW_RXPIPE", False, 13, 0, 0x8, "IGNORE"),
    ], []),
    "open-gpu-kernel-modules-1150-xid45-after-149.log": ([], [
        ("0000:dc:00", 149, "python3", 2), ("0000:ed:00", 145, "python3", 2), ("0000:ba:00", 145, "python3", 2),
        ("0000:97:00", 145, "python3", 1),
    ]),
}


def test_every_log_is_in_the_index_with_its_source_and_parsed_here() -> None:
    assert_indexed(LOGS, PARSED)


@pytest.mark.parametrize("name", sorted(PARSED))
def test_each_record_read_back_with_its_subcode_fatality_and_resolution(tmp_path: Path, name: str) -> None:
    nvlink, follows = nvlink_records(read_back(tmp_path, (LOGS / name).read_text()))
    got = [(r.xid, r.device, r.unit, r.fatal, r.link, r.subcode, r.error_status, (decode(r) or {}).get("resolution"))
           for r in nvlink]
    assert got == PARSED[name][0]
    assert [(f.device, f.cause, f.process, f.count) for f in follows] == PARSED[name][1]
    again = nvlink_records(text_line(ln) for ln in (LOGS / name).read_text().splitlines())
    assert [(r.xid, r.subcode, r.fatal) for r in again[0]] == [(g[0], g[5], g[3]) for g in got]


def test_the_decode_sheet_is_nvidias_with_its_source() -> None:
    """94 rows as gpud's generated copy of NVIDIA's sheet has them; gpud's examples decode as gpud says (149.37: a
    peer's fault, RESET_GPU; 149.38: IGNORE)."""
    data = json.loads((Path(__file__).parent.parent / "gpucheck" / "data" / "nvlink5_xids.json").read_text())
    assert "analyzing-xid-catalog.html" in data["_source"] and "leptonai/gpud" in data["_source"]
    rows = decode_table()
    assert len(rows) == 94 and {r["xid"] for r in rows} == set(range(144, 151))
    assert {r["resolution"] for r in rows} == {"IGNORE", "RESET_GPU", "XID_154_EVAL"}
    assert all(len(r["intrinfo_v1"]) == len(r["intrinfo_v2"]) == 32 for r in rows)
    assert subcode(0x025001C6) == 37 and subcode(0x026001C6) == 38 and subcode(0x0409A0C2) == 0


def test_a_hostile_line_is_no_record() -> None:
    lines = ["NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link " + "9" * 4000 + " (0x0 0x0)",
             "NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=x, Ch 1 caused by previous Xid " + "1" * 4000]
    assert nvlink_records(text_line(ln) for ln in lines) == ((), ())


def test_past_the_bound_the_newest_records_are_kept() -> None:
    """More distinct NVLink5 records than are kept (MAX_RECORDS: gpud#1160's Nonfatal SAW_MVB line, each with an
    intrinfo of its own), then gpud#1160's Fatal NETIR_LINK_EVT: the Fatal record, the newest, is kept and the oldest
    are let go (issue 37: the newest records are the ones kept, as the reading keeps its newest lines). The same for
    Xid 45's follow-ups (open-gpu-kernel-modules#1150's line, each from a process of its own)."""
    nonfatal = "NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x{:08x} 0x00000008 0x00000000 0x00000000)"
    fatal = ("NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 "
             "0x00000000 0x00000000 0x00000000)")
    follow = "NVRM: Xid (PCI:0000:dc:00): 45, pid={}, name=python3, Ch 00000001 caused by previous Xid {}"
    more = 10
    lines = [nonfatal.format(i) for i in range(MAX_RECORDS + more)] + [fatal]
    lines += [follow.format(1000 + i, 145) for i in range(MAX_RECORDS + more)] + [follow.format(1818990, 149)]
    records, follows = nvlink_records(text_line(ln) for ln in lines)
    assert len(records) == MAX_RECORDS and len(follows) == MAX_RECORDS
    assert (records[-1].xid, records[-1].unit, records[-1].fatal) == (149, "NETIR_LINK_EVT", True)
    # The oldest let go: the first kept is the one after them (each record a sighting of its own).
    assert records[0].intrinfo == more + 1, records[0]
    assert (follows[-1].pid, follows[-1].cause) == (1818990, 149) and follows[0].pid == 1000 + more + 1
    # A record seen again is seen recently: the first one, repeated last, outlives those after it.
    again = [nonfatal.format(i) for i in range(MAX_RECORDS)] + [nonfatal.format(0), nonfatal.format(MAX_RECORDS)]
    kept, _ = nvlink_records(text_line(ln) for ln in again)
    assert [r.intrinfo for r in kept[:2]] == [0, 2] and kept[0].count == 2


# --- the fake machines ----------------------------------------------------------------------------------------------


def _subset(want: dict[str, Any], got: dict[str, Any]) -> bool:
    return all(got.get(k) == v for k, v in want.items())


def assert_report(report: dict[str, Any], expect: dict[str, Any]) -> None:
    rc = report["root_cause"]
    assert report["verdict"] == expect["verdict"]
    assert rc is not None and (rc["id"], rc.get("subject"), rc["action"]) == (
        expect["root_cause"], expect["subject"], expect["action"]), rc
    for want in expect.get("followed_by", []):
        assert any(_subset(want, got) for got in rc["evidence"]["followed_by"]), rc["evidence"]
    for want in expect.get("nvlink_records", []):
        assert any(_subset(want, got) for got in rc["evidence"]["nvlink_records"]), rc["evidence"]
    notes = {f["subject"]: f for f in report["findings"] if f["id"] == "xid-recorded"}
    for subject, cause in expect.get("notes", {}).items():
        note = notes[subject]
        assert note["severity"] == "info" and note["action"] == "none"
        named = [x.get("caused_by_xid") for x in note["evidence"].get("followed_by", [])]
        named += [x["xid"] for x in note["evidence"].get("nvlink_records", [])]
        assert cause in named, note
    for subject, records in expect.get("note_records", {}).items():
        for want in records:
            assert any(_subset(want, got) for got in notes[subject]["evidence"]["nvlink_records"]), notes[subject]
    ids = [f["id"] for f in report["findings"]]
    for fid in expect.get("absent", []):
        assert fid not in ids, ids


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_pytest_gpucheck_on_a_blackwell_node(
    path: Path, fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    scenario = load(path)
    assert "https://" in scenario["_source"]
    expect = scenario["expect"]
    fake_machine(with_log(scenario, kmsg_of((LOGS / scenario["kernel_log"]).read_text())))
    run = run_gpucheck("--gpucheck-framework=none", "-rf")
    out = run.result.stdout.str()
    assert run.result.ret == 1, out
    assert_report(run.report, expect)
    checks = {c["nodeid"].split("::")[-1]: c for c in run.report["checks"]}
    assert sorted(n for n, c in checks.items() if c["outcome"] == "failed") == sorted(expect["failed"]), out
    for name in expect.get("passed", []):
        assert checks[name]["outcome"] == "passed", (name, out)
    assert_one_red_line(run.report)
    rc = run.report["root_cause"]
    run.result.stdout.fnmatch_lines([f"root cause: nvlink-degraded (health): {rc['summary'][:50]}*", "verdict: degraded"])


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_gpucheck_doctor_on_a_blackwell_node(path: Path, fake_machine: Callable[[dict[str, Any]], Path],
                                             tmp_path: Path) -> None:
    scenario = load(path)
    fake_machine(with_log(scenario, kmsg_of((LOGS / scenario["kernel_log"]).read_text())))
    report, lines = doctor_on(tmp_path)
    assert_report(report, scenario["expect"])
    assert lines[0] == "gpucheck doctor: degraded (not usable); recommended action: reset-gpu"
    assert lines[1].startswith("root cause: nvlink-degraded (health): ")
