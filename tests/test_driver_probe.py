"""Issue 35, point 1 (and 2, 3 on the same machines): the driver's probe of a GPU failing is its own cause.

Real kernel-log lines of the driver failing to take a GPU (``tests/logs/kmsg-driver/``, each with its thread in
``INDEX.md``: fallen off the bus in a newer driver's three-line message and in older one-line forms, RmInitAdapter
with its minor number in the newer and the older wording, the probe routine's count, the PCI region and BAR messages
of the driver and of the kernel) are parsed from a fake ``/dev/kmsg`` (a message of several lines one record, its
newlines escaped as the kernel escapes them) and from the lines as the report printed them. The fake machines of
``tests/scenarios/driver/`` are built from the same reports and run through ``pytest --gpucheck`` and ``gpucheck doctor
--framework=none``: the root cause is the lost or uninitialised GPU with the driver's words as evidence, never the
device nodes or a container, with one red line per fault.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun, validate_report
from gpucheck.diagnosis import Diagnosis
from gpucheck.records.driverlog import MAX_RECORDS, driver_records
from gpucheck.records.parse import Line, kmsg_record, text_line
from gpucheck.records.probe import read_kernel_log
from gpucheck.settings import Settings
from tests.contracts import assert_one_red_line

LOGS = Path(__file__).parent / "logs" / "kmsg-driver"
SCENARIO_DIR = Path(__file__).parent / "scenarios" / "driver"
SCENARIOS = sorted(SCENARIO_DIR.glob("*.json"))
_STAMP = re.compile(r"\[\s*(\d+\.\d+)\]")
#: Where the kernel's message begins in a line with a report's prefix (syslog, dmesg, dmesg -T).
_WORDS = re.compile(r"(NVRM: .*|nvidia: probe of .*|nvidia [0-9a-f]{4}:.*|pci [0-9a-f]{4}:.*)$")


def kmsg_of(text: str) -> str:
    """A report's lines as /dev/kmsg records (``PRI,SEQ,TS_USEC,FLAGS;MESSAGE``): the kernel's message (the report's
    prefix dropped), its time since boot where the report printed one, and a message's further lines (dmesg prints
    them indented, without a stamp) in the same record, joined by the ``\\x0a`` the kernel escapes a newline to."""
    out = ["6,0,0,-;Linux version 6.8.0-60-generic (buildd@lcy02-amd64-098)"]
    for line in text.splitlines():
        if line[:1].isspace() and line.strip().startswith("NVRM:") and len(out) > 1:
            out[-1] += "\\x0a" + line.strip()
            continue
        if (m := _WORDS.search(line)) is not None:
            out.append(f"3,{len(out)},{_usec(line, len(out))},-;{m.group(1)}")
    return "\n".join(out) + "\n"


def _usec(line: str, n: int) -> int:
    """A record's time since boot in microseconds: the report's stamp, else a second per record (``dmesg -T``)."""
    stamp = _STAMP.search(line)
    return int(float(stamp.group(1)) * 1e6) if stamp else 1_000_000 * n


def assert_indexed(logs: Path, names: Iterable[str]) -> None:
    """Every log of ``logs`` is one of ``names`` and has its line in the folder's INDEX.md, with its source's address."""
    index = (logs / "INDEX.md").read_text()
    assert {p.name for p in logs.glob("*.log")} == set(names)
    for name in names:
        assert re.search(rf"`{re.escape(name)}`[^\n]*https://", index), name


def read_back(tmp_path: Path, text: str) -> list[Line]:
    """``text`` (a report's lines) in a fake /dev/kmsg of the host view ``tmp_path``, read back by the real reader."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text(kmsg_of(text))
    log, lines = read_kernel_log(tmp_path)
    assert log.source == str(tmp_path / "dev/kmsg")
    return lines


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def with_log(scenario: dict[str, Any], kmsg: str | None = "") -> dict[str, Any]:
    """The scenario with its report's kernel log (``kmsg=""``), another one, or none at all (None) in /dev/kmsg."""
    s = copy.deepcopy(scenario)
    files = s["host"].setdefault("files", {})
    if kmsg is not None:
        files["dev/kmsg"] = {"text": kmsg or kmsg_of((LOGS / s["kernel_log"]).read_text())}
    return s


# --- the lines ------------------------------------------------------------------------------------------------------

#: Each log: the records, as (kind, GPU, minor number, detail, count, form).
PARSED: dict[str, list[tuple[str, str | None, int | None, str | None, int, str]]] = {
    "nvsentinel-155-l40-fallen-off-multiline.log": [
        ("fallen-off-the-bus", "0000:b3:00.0", None, "10de:26b5", 1, "multi-line"),
        ("probe-routine-failed", None, None, "1", 1, "one-line"),
    ],
    "bumblebee-554-fallen-off-old-one-line.log": [("fallen-off-the-bus", "0000:01:00.0", None, None, 2, "one-line")],
    "akash-209-xid79-fallen-off-one-line.log": [("fallen-off-the-bus", "0000:a1:00.0", None, None, 1, "one-line")],
    "gpu-operator-1146-rminitadapter-minor.log": [
        ("rm-init-adapter-failed", "0000:0a:00.0", 5, "0x24:0x72:1568", 6, "one-line"),
    ],
    "bumblebee-722-rm-init-adapter-old.log": [("rm-init-adapter-failed", None, 0, "0x26:0xffff:1375", 1, "one-line")],
    "gpu-operator-492-bar1-invalid-probe-failed.log": [
        ("bar-invalid", "0000:14:00.0", None, "BAR1 is 0M @ 0x0", 1, "multi-line"),
        ("probe-failed", "0000:14:00.0", None, "-1", 1, "one-line"),
        ("bar-invalid", "0000:1c:00.0", None, "BAR1 is 0M @ 0x0", 1, "multi-line"),
        ("probe-failed", "0000:1c:00.0", None, "-1", 1, "one-line"),
        ("probe-routine-failed", None, None, "2", 1, "one-line"),
    ],
    "heymeco-2-pci-bar-no-space.log": [("bar-unassigned", "0000:01:00.0", None, "BAR 1: can't assign; no space", 4,
                                        "one-line")],
}


def test_every_log_is_in_the_index_with_its_thread_and_parsed_here() -> None:
    assert_indexed(LOGS, PARSED)


@pytest.mark.parametrize("name", sorted(PARSED))
def test_the_drivers_words_read_back_from_a_fake_dev_kmsg_and_as_printed(tmp_path: Path, name: str) -> None:
    lines = read_back(tmp_path, (LOGS / name).read_text())
    got = [(r.kind, r.device, r.minor, r.detail, r.count, r.form) for r in driver_records(lines)]
    assert got == PARSED[name]
    # The lines as journalctl or dmesg print them (a message's further lines indented) give the same records.
    printed = driver_records(text_line(ln) for ln in (LOGS / name).read_text().splitlines())
    assert [(r.kind, r.device, r.minor, r.detail, r.count, r.form) for r in printed] == got


def test_a_message_of_three_lines_is_read_as_one_in_the_drivers_words() -> None:
    """NVSentinel#155's message as /dev/kmsg hands it out: one record, newlines escaped; the finding quotes it joined."""
    records = [kmsg_record(ln) for ln in kmsg_of((LOGS / "nvsentinel-155-l40-fallen-off-multiline.log").read_text())
               .splitlines()]
    (rec, _count) = driver_records(r for r in records if r is not None)
    assert rec.text == ("NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off "
                        "the bus and is not responding to commands.")
    assert rec.first_s == pytest.approx(1843.308145)


def test_lines_that_look_alike_are_not_read_as_the_drivers() -> None:
    """A VF BAR of SR-IOV, a GPU's UUID line, another driver's probe error, a hostile run of digits: no record."""
    lines = [
        "pci 0000:08:00.0: VF BAR 0 [mem size 0x00400000 64bit pref]: can't assign; no space",
        "NVRM: GPU at PCI:0000:a1:00: GPU-979426f2-893a-7cbb-c4cf-81472f89a462",
        "amdgpu: probe of 0000:83:00.0 failed with error -12",
        "NVRM: The NVIDIA probe routine failed for " + "9" * 5000 + " device(s).",
        "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:" + "1" * 5000 + ")",
    ]
    assert driver_records(text_line(ln) for ln in lines) == ()


def test_past_the_bound_the_newest_records_are_kept() -> None:
    """More distinct records than are kept (MAX_RECORDS: heymeco#2's BAR 1 line, each on a PCI address of its own),
    then NVSentinel#155's GPU fallen off the bus: that newest record is kept and the oldest are let go (issue 37: the
    newest records are the ones kept, as the reading keeps its newest lines)."""
    bar = "pci 0000:{:02x}:{:02x}.0: BAR 1 [mem size 0x10000000 64bit pref]: can't assign; no space"
    fallen = ("NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus and "
              "is not responding to commands.")
    lines = [bar.format(i // 256, i % 256) for i in range(MAX_RECORDS + 10)] + [fallen]
    records = driver_records(text_line(ln) for ln in lines)
    assert len(records) == MAX_RECORDS
    assert (records[-1].kind, records[-1].device) == ("fallen-off-the-bus", "0000:b3:00.0"), records[-1]
    assert records[0].device == "0000:00:0b.0", records[0]  # the eleven oldest let go


# --- the fake machines ----------------------------------------------------------------------------------------------


def checks_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["nodeid"].split("::")[-1]: c for c in report["checks"]}


def _subset(want: dict[str, Any], got: dict[str, Any]) -> bool:
    return all(got.get(k) == v for k, v in want.items())


def assert_report(report: dict[str, Any], expect: dict[str, Any], out: str) -> None:
    """What a scenario's ``expect`` says of a report (``pytest --gpucheck``'s or ``gpucheck doctor``'s)."""
    rc = report["root_cause"]
    assert report["verdict"] == expect["verdict"], out
    assert rc is not None and (rc["id"], rc.get("subject")) == (expect["root_cause"], expect["subject"]), (rc, out)
    assert rc["action"] == expect["action"]
    if "summary" in expect:
        assert fnmatch.fnmatch(rc["summary"], expect["summary"]), rc["summary"]
    if "remedy" in expect:
        assert fnmatch.fnmatch(rc["remedy"], expect["remedy"]), rc["remedy"]
    told = rc["evidence"]["kernel_log"]
    for want in expect["kernel_log"]:
        assert any(_subset(want, got) for got in told), (want, told)
    assert _subset(expect.get("evidence", {}), rc["evidence"]), rc["evidence"]
    ids = [f["id"] for f in report["findings"]]
    for fid in expect.get("absent", []):
        assert fid not in ids, (fid, ids)
    for fid, want in expect.get("findings", {}).items():
        found = [f for f in report["findings"] if f["id"] == fid]
        if "subjects" in want:
            assert sorted(f.get("subject") for f in found) == sorted(want["subjects"]), found
        else:
            assert len(found) == 1 and _subset(want, found[0]), found
    # The fault of another GPU is its own line, never a consequence (point 2).
    for fid, subject in expect.get("independent", {}).items():
        (f,) = [f for f in report["findings"] if f["id"] == fid and f.get("subject") == subject]
        assert f["independent_of_root_cause"] is True and f["blocked_by"] is None, f
    # What the failed probe explains is its consequence, not a cause of its own.
    for fid, by in expect.get("consequences", {}).items():
        assert [f["blocked_by"] for f in report["findings"] if f["id"] == fid] in ([by], []), report["findings"]


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_pytest_gpucheck_names_the_gpu_the_driver_could_not_take(
    path: Path, fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    scenario = load(path)
    assert scenario.get("_source") and "https://" in scenario["_source"], "every scenario cites the report it models"
    expect = scenario["expect"]
    fake_machine(with_log(scenario))
    run = run_gpucheck("--gpucheck-framework=none", "-rfs")
    out = run.result.stdout.str()
    assert run.result.ret == 1, out
    assert_report(run.report, expect, out)
    checks = checks_of(run.report)
    for outcome in ("failed", "passed", "skipped"):
        for name in expect.get(outcome, []):
            assert checks[name]["outcome"] == outcome, (name, checks[name], out)
    # One red line per fault: the failed checks are the expected ones, each carrying its own fault.
    assert sorted(n for n, c in checks.items() if c["outcome"] == "failed" and n != "test_visible_devices_env") == \
        sorted(expect["failed"]), out
    assert_one_red_line(run.report)
    rc = run.report["root_cause"]
    run.result.stdout.fnmatch_lines([f"root cause: {rc['id']} ({rc['layer']}): {rc['summary'][:60]}*"])


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_gpucheck_doctor_says_the_same(path: Path, fake_machine: Callable[[dict[str, Any]], Path],
                                       tmp_path: Path) -> None:
    scenario = load(path)
    expect = scenario["expect"]
    fake_machine(with_log(scenario))
    report, lines = doctor_on(tmp_path)
    assert_report(report, expect, "\n".join(lines))
    assert lines[0] == "gpucheck doctor: not-accelerated (not usable); recommended action: " + report["action"]
    assert lines[1].startswith(f"root cause: {expect['root_cause']} (")
    for fid, subject in expect.get("independent", {}).items():
        assert any(ln.startswith(f"also, not caused by the root cause: {fid} (") for ln in lines), lines
        assert subject


def doctor_on(tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    """``gpucheck doctor --framework=none --json`` on this test's fake machine: its report (checked against the schema)
    and its summary's lines; the node is not usable (exit 1)."""
    path = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "gpucheck.cli", "doctor", "--framework=none", "--json", str(path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(path.read_text())
    validate_report(report, path)
    return report, done.stdout.splitlines()


# --- where the log says nothing, or cannot be read ------------------------------------------------------------------


def test_a_gpu_not_held_whose_log_says_nothing_is_named_with_what_is_known(
    fake_machine: Callable[[dict[str, Any]], Path],
) -> None:
    """The L40 of NVSentinel#155 with a kernel log that holds nothing of the driver's: still not a device-node fault;
    the GPU on the bus that the driver does not hold, and that the log says nothing of it."""
    scenario = load(SCENARIO_DIR / "l40-fallen-off-the-bus-at-probe.json")
    fake_machine(with_log(scenario, kmsg_of("[    1.000000] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  "
                                            "570.158.01  Release Build")))
    result = Diagnosis(Settings(framework="none")).result()
    rc = result.root_cause
    assert rc is not None and rc.id == "gpu-init-failed" and rc.subject == "PCI 0000:b3:00.0"
    assert rc.summary.endswith("the kernel log says nothing of it this boot.") and rc.evidence["source"] == "sysfs"
    assert "lspci -k -s 0000:b3:00.0" in rc.remedy
    assert "device-nodes-inaccessible" not in [f.id for f in result.findings]


def test_a_gpu_not_held_where_the_log_cannot_be_read_says_so(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    scenario = load(SCENARIO_DIR / "l40-fallen-off-the-bus-at-probe.json")
    fake_machine(with_log(scenario, None))
    rc = Diagnosis(Settings(framework="none")).result().root_cause
    assert rc is not None and rc.id == "gpu-init-failed"
    assert "the kernel log could not be read (" in rc.summary and "FileNotFoundError" in rc.summary


def test_a_container_without_gpus_is_still_a_device_node_fault(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """The GPU bound to nvidia (the host's sysfs a container sees) and no /dev/nvidia0: the container's, not a probe."""
    scenario = load(SCENARIO_DIR / "l40-fallen-off-the-bus-at-probe.json")
    scenario["host"]["pci"][0]["driver"] = "nvidia"
    fake_machine(with_log(scenario, kmsg_of("")))
    result = Diagnosis(Settings(framework="none")).result()
    assert result.root_cause is not None and result.root_cause.id == "device-nodes-inaccessible"
    assert "gpu-init-failed" not in [f.id for f in result.findings]


def test_below_the_fake_world_the_root_cause_stays_the_drivers(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """With TensorFlow (the fake world breaks its libraries here): the root cause is still the failed probe."""
    scenario = load(SCENARIO_DIR / "l40-fallen-off-the-bus-at-probe.json")
    fake_machine(with_log(scenario))
    run = run_gpucheck()
    assert run.root_cause == "gpu-init-failed", run.result.stdout.str()
    assert_one_red_line(run.report)
