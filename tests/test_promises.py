"""Issue 37, point 9: promises the tests did not hold. Each change below was applied to the code by hand, broke one
documented promise, and every test file then passed; each test here fails with its change and passes without it
(docs/mutation.md, "Issue 37 point 9: promises by hand", names the line each change touched).

The machines are fakes built from the real kernel-log lines of ``tests/logs/kmsg/`` (each with its source in
``INDEX.md``) and the NVML scenarios of ``tests/scenarios/``; what a test can read in-process (the kernel-log reader,
the rules over a real diagnosis) it reads there, what only a run shows (the marker and the fixtures, xdist, pytest-html,
``gpucheck merge``, ``gpucheck doctor``) goes through the real command line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun, SharedRuns, make_fake_machine
from gpucheck.diagnosis import Result
from gpucheck.records import probe, rules
from gpucheck.records.parse import records, text_line
from gpucheck.records.report import read_notes
from tests.test_kernel_log import LOGS, diagnose, kmsg_text, machine
from tests.test_merge import gpucheck_merge

#: The open-gpu-kernel-modules issue's GPU fallen off the bus (NVIDIA/open-gpu-kernel-modules#1151), at 0000:06:00.
XID79 = "xid79-open-gpu-kernel-modules-1151.log"
#: The DCGM issue's GSP timeout (NVIDIA/DCGM#144), on the GPU at 0000:07:00.
XID119 = "xid119-dcgm-144.log"
#: The NVIDIA forum's RTX PRO 6000 (crash 1): Xid 120, then Xid 154 to 0x1 (GPU Reset Required), at 0000:01:00.
XID120_154 = "xid120-154-nvidia-forum-364958.log"
#: The nvtrust issue's HGX H100 (NVIDIA/nvtrust#124): SXid 22013, Non-fatal, on nvidia-nvswitch3 at 0000:04:00.0.
SXID_22013 = "sxid-nvtrust-124.log"


def filler(count: int) -> str:
    """``count`` ordinary kmsg records of a boot (the kernel's own words), numbered from 1."""
    return "".join(f'6,{i},{1_000_000 + i},-;audit: type=1400 apparmor="STATUS"\n' for i in range(1, count + 1))


def codes(lines: list[Any]) -> list[int]:
    return [r.code for r in records(lines)]


# --- 1. the kernel-log reader keeps the newest records, and says that it cut ---------------------------------------


def test_a_long_kmsg_file_keeps_its_newest_records_and_says_it_cut(tmp_path: Path) -> None:
    """Promise: a log longer than ``MAX_RECORDS`` keeps its newest records, and the reading says how many of the oldest
    were dropped (``truncated``, ``dropped``, the summary's note). Kills: the reader (``Tail.lines``) keeping the oldest
    (the real Xid 79 at the end is lost: a node read as healthy) and ``_read`` never saying it truncated."""
    text = filler(probe.MAX_RECORDS + 10) + kmsg_text(XID79)
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text(text)
    read, lines = probe.read_kernel_log(tmp_path)
    total = len(text.splitlines())
    assert read.source == str(tmp_path / "dev" / "kmsg") and read.records == len(lines) == probe.MAX_RECORDS
    assert 79 in codes(lines) and lines[-1].text == text.splitlines()[-1].partition(";")[2]
    assert read.truncated is True and read.dropped == total - probe.MAX_RECORDS
    assert (
        f"  truncated: the {read.dropped} oldest record(s) were dropped, the newest {read.records} kept"
        in read_notes(read)
    )


def test_the_kernels_dev_kmsg_keeps_its_newest_records_and_says_it_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same promise for the kernel's own ``/dev/kmsg`` (a character device, one record per read until EAGAIN),
    read here from a socket of the same shape: a ``SOCK_SEQPACKET`` pair hands out one record per read and EAGAIN at
    its end. Kills: ``_kmsg_device`` keeping the first ``MAX_RECORDS`` records, and never saying it truncated."""
    monkeypatch.setattr(probe, "MAX_RECORDS", 4)
    messages = filler(6).splitlines() + kmsg_text(XID79).splitlines()
    reader, writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with reader, writer:
        for message in messages:
            writer.send(message.encode())
        reader.setblocking(False)
        lines, read = probe._kmsg_device(reader.fileno())
    assert [ln.text for ln in lines] == [m.partition(";")[2] for m in messages[-4:]]
    assert 79 in codes(lines)
    assert read.truncated is True and read.dropped == len(messages) - 4 and read.records == 4
    assert read_notes(read)[0].startswith(f"  truncated: the {len(messages) - 4} oldest record(s) were dropped")


def test_journalctls_long_output_keeps_its_newest_lines_and_says_it_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same promise through the ``journalctl -k -b`` fallback (``/dev/kmsg`` refused: dmesg_restrict). Kills: the
    fallback keeping the oldest lines, and ``read_kernel_log`` never saying it truncated them."""
    xid = [f"[  349507.5{i:05d}] {line}" for i, line in enumerate((LOGS / XID79).read_text().splitlines())]
    journalctl = tmp_path / "bin" / "journalctl"
    journalctl.parent.mkdir()
    journalctl.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"sys.stdout.write(''.join(f'[{{1 + i / 1e6:12.6f}}] audit: apparmor=\"STATUS\"\\n' for i in range({probe.MAX_RECORDS + 10})))\n"
        f"sys.stdout.write({chr(10).join(xid) + chr(10)!r})\n"
    )
    journalctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{journalctl.parent}{os.pathsep}{os.environ['PATH']}")

    def refused(path: Path) -> Any:
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(probe, "read_kmsg", refused)
    read, lines = probe.read_kernel_log(Path("/"))
    assert read.source == "journalctl -k -b", read.tried
    assert read.records == len(lines) == probe.MAX_RECORDS and 79 in codes(lines)
    assert read.truncated is True and read.dropped == 10 + len(xid)
    assert read_notes(read)[0].startswith(f"  truncated: the {10 + len(xid)} oldest record(s) were dropped")


# --- 2-4. the kernel log's rules over real records -------------------------------------------------------------------


def ids_and_subjects(result: Result) -> list[tuple[str, str | None]]:
    return [(f.id, f.subject) for f in result.findings]


def test_an_sxid_the_driver_calls_fatal_is_nvlink_degraded(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """Promise (records/rules.py, ``_sxid_finding``): an SXid the driver marks ``Fatal`` is ``nvlink-degraded`` (a
    restart), whatever the Fabric Manager guide's class of its code. The nvtrust HGX H100's SXid 22013 (the guide: non-fatal,
    safely ignored), its first event written Fatal, its second Non-fatal as in the report. Kills: the parser reading
    ``Fatal`` as non-fatal, a later Non-fatal record of the same code clearing it, and the rule ignoring ``fatal``."""
    text = kmsg_text(SXID_22013).replace("22013, Non-fatal, Link 44", "22013, Fatal, Link 44", 1)
    assert "22013, Fatal, Link 44" in text and "22013, Non-fatal, Link 45" in text
    result = diagnose(fake_machine, machine(["0000:18:00.0"], text, nvswitches=("0000:04:00.0",)))
    found = [f for f in result.findings if f.subject == "NVSwitch 0000:04:00.0"]
    assert [f.id for f in found] == ["nvlink-degraded"], ids_and_subjects(result)
    f = found[0]
    assert f.evidence["fatal"] is True and f.evidence["sxid"] == 22013 and f.evidence["class"] == "non-fatal"
    assert "a Fatal SXid" in f.summary and f.action == "reboot"
    # The log as the report printed it (both Non-fatal) is a note: test_kernel_log.py's
    # test_sxid_records_name_the_nvswitch_not_a_gpu. Here only the word Fatal differs.


def test_an_xid_on_a_pci_address_no_gpu_has_is_on_no_gpu(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """Promise (records/rules.py, ``_gpu_of``): a record is put on the GPU at its PCI address, and one at an address no
    GPU of the machine has is about no GPU (``The GPU at PCI ...``, no subject), never GPU 0. The RTX 5090's real Xid 79
    at 0000:06:00 in the log of a machine whose two GPUs are at 0000:18:00 and 0000:2a:00. Kills: ``_gpu_of`` falling
    back to NVML's first GPU."""
    result = diagnose(fake_machine, machine(["0000:18:00.0", "0000:2a:00.0"], kmsg_text(XID79)))
    lost = [f for f in result.findings if f.id == "gpu-lost"]
    assert len(lost) == 1, ids_and_subjects(result)
    assert lost[0].subject is None and lost[0].evidence["gpu"] is None and lost[0].evidence["pci"] == "0000:06:00"
    assert lost[0].summary.startswith("The GPU at PCI 0000:06:00 fell off the bus"), lost[0].summary
    assert not [
        f for f in result.findings if f.subject in ("GPU-0", "GPU-1") and f.evidence.get("source") == "kernel log"
    ]


def test_the_newest_xid_154_recovery_action_wins(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """Promise (records/parse.py and records/rules.py): Xid 154 says what the driver's recovery action changed *to*,
    and the newest change is the GPU's action now. The forum RTX PRO 6000's Xid 120 and Xid 154 to 0x1 (GPU Reset
    Required), then a later 154 of the same GPU from 0x1 to 0x2 (Node Reboot Required, the form of the driver's line
    with the value it gives a GPU fallen off the bus). Kills: the older recovery action kept over the newer one."""
    later = "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x2 (Node Reboot Required)"
    text = kmsg_text(XID120_154) + f"3,99,999000000,-;{later}\n"
    [rec] = [r for r in records(text_line(ln.partition(";")[2]) for ln in text.splitlines()) if r.code == 154]
    assert rec.count == 2 and rec.recovery_action == "0x2 (Node Reboot Required)"
    result = diagnose(
        fake_machine, machine(["0000:01:00.0"], text, name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition")
    )
    [gsp] = [f for f in result.findings if f.id == "gsp-firmware-error"]
    assert gsp.subject == "GPU-0" and gsp.evidence["recovery_action"] == "0x2 (Node Reboot Required)"
    assert gsp.action == "reboot" and "Its recovery action is now 0x2 (Node Reboot Required)" in gsp.cause
    # Two 154 records the parser keeps apart (the driver's lines name no process, so only a line of another form
    # would make two): the rule, too, takes the newest by time, not the first seen.
    reboot = replace(rec, pid=11, count=1, first_s=10.0, last_s=10.0, recovery_action="0x2 (Node Reboot Required)")
    done = replace(rec, pid=12, count=1, first_s=20.0, last_s=20.0, recovery_action="0x0 (None)")
    assert result.facts is not None
    assert rules._gpu_findings(result.facts, "0000:01:00", [reboot, done], frozenset()) == []  # rebooted since
    [pending] = rules._gpu_findings(result.facts, "0000:01:00", [replace(done, last_s=5.0), reboot], frozenset())
    assert pending.id == "xid-recovery-required" and pending.evidence["recovery_action"] == "0x2 (Node Reboot Required)"


# --- 5-7 and 11: the marker, the gpus fixture and pytest-html's summary, through one run -------------------------------

#: The DCGM issue's real Xid 119 (GSP timeout) on the GPU at 0000:07:00, its process name and words made markup (what a
#: program may call itself, and what a driver line may carry), on a two-GPU A100 machine (compute capability 8.0)
#: whose second GPU, at 0000:08:00, is healthy.
HOSTILE_NAME = "<b>nv-hostengine</b>"
HOSTILE_WORDS = "<script>alert(1)</script>"


def two_a100s() -> dict[str, Any]:
    text = kmsg_text(XID119).replace("name=nv-hostengine, Timeout", f"name={HOSTILE_NAME}, Timeout {HOSTILE_WORDS}")
    assert HOSTILE_WORDS in text
    scenario = machine(["0000:07:00.0", "0000:08:00.0"], text, name="NVIDIA A100-SXM4-80GB")
    for g in scenario["gpus"]:
        g.update(cc_major=8, cc_minor=0)
    return scenario


#: Marked tests that ask the driver's GPUs (framework=None), each recording (from a fixture, which runs before gpucheck
#: decides whether the test runs) the GPUs the ``gpus`` fixture handed it.
MARKED = """
import json
import pathlib

import pytest


@pytest.fixture
def seen(request, gpus):
    with open(pathlib.Path(__file__).parent / "seen.jsonl", "a") as out:
        out.write(json.dumps({"test": request.node.name, "gpus": [g.bus_id for g in gpus]}) + "\\n")


@pytest.mark.gpu(count=2, framework=None)
def test_two_gpus(seen):
    pass


@pytest.mark.gpu(framework=None)
def test_one_gpu(seen):
    pass


@pytest.mark.gpu(framework=None, compute_capability="8.6")
def test_compute_capability_8_6(seen):
    pass


@pytest.mark.gpu(framework=None, compute_capability="8.0")
def test_compute_capability_8_0(seen):
    pass


def test_unmarked(seen):
    pass
"""


def html_args() -> tuple[str, ...]:
    """pytest-html's page of the run, where pytest-html is installed (the html extra)."""
    return ("--html=report.html",) if importlib.util.find_spec("pytest_html") is not None else ()


@pytest.fixture
def faulty_gpu_run(gpucheck_shared: SharedRuns) -> GpucheckRun:
    """``pytest --gpucheck --gpucheck-framework=none`` of :data:`MARKED` on :func:`two_a100s` (GPU 0 has a GSP fault)."""
    return gpucheck_shared.run(
        "--gpucheck-framework=none",
        "-rs",
        "--junitxml=junit.xml",
        *html_args(),
        "test_marked.py",
        scenario=two_a100s(),
        files={"test_marked.py": MARKED},
    )


def outcomes(run: GpucheckRun) -> dict[str, tuple[str, str]]:
    assert run.path is not None
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(run.path / "junit.xml").getroot().iter("testcase"):
        if case.get("classname") != "test_marked":
            continue
        found = next((case.find(tag) for tag in ("skipped", "failure", "error") if case.find(tag) is not None), None)
        out[case.get("name", "?")] = (found.tag, found.get("message", "")) if found is not None else ("passed", "")
    return out


def seen(run: GpucheckRun) -> dict[str, list[str]]:
    assert run.path is not None
    entries = [json.loads(line) for line in (run.path / "seen.jsonl").read_text().splitlines()]
    return {e["test"]: e["gpus"] for e in entries}


HEALTHY = "00000000:08:00.0"


def test_a_driver_level_marked_test_never_runs_on_a_gpu_with_a_health_fault(faulty_gpu_run: GpucheckRun) -> None:
    """Promise (marker.py, ``LAYERS``): a ``gpu(framework=None)`` test needs the layers up to visibility *and* resources
    and health: a GPU with a GSP fault is not one it runs on. Two GPUs asked for, one healthy: skipped with the fault;
    one asked for: it runs on the healthy one. Kills: ``health`` dropped from the driver-level layers (both tests ran,
    the second on the faulty GPU 0)."""
    assert faulty_gpu_run.root_cause == "gsp-firmware-error", faulty_gpu_run.result.stdout.str()[-3000:]
    got = outcomes(faulty_gpu_run)
    assert got["test_two_gpus"][0] == "skipped", got
    assert "needs 2 GPU(s) the CUDA driver lists" in got["test_two_gpus"][1]
    assert "blocked: GPU:0 by gsp-firmware-error" in got["test_two_gpus"][1]
    assert got["test_one_gpu"] == ("passed", "") and seen(faulty_gpu_run)["test_one_gpu"] == [HEALTHY]


def test_compute_capability_8_6_is_not_met_by_an_8_0_gpu(faulty_gpu_run: GpucheckRun) -> None:
    """Promise (marker.py, ``parse_need`` and ``_fits``): ``compute_capability="8.6"`` needs 8.6 or newer, minor
    version included; an A100 (8.0) does not meet it, and meets "8.0". Kills: the minor version dropped (8.6 met by
    8.0)."""
    got = outcomes(faulty_gpu_run)
    assert got["test_compute_capability_8_6"][0] == "skipped", got
    assert "compute capability 8.6 or newer" in got["test_compute_capability_8_6"][1]
    assert "cc 8.0 (too small)" in got["test_compute_capability_8_6"][1]
    assert got["test_compute_capability_8_0"] == ("passed", ""), got


def test_the_gpus_fixture_hands_out_only_usable_gpus(faulty_gpu_run: GpucheckRun) -> None:
    """Promise (suite.py, the ``gpus`` fixture): "the GPUs this test may use": a marked test's, else every *usable* GPU
    of this process, never one a fault blocks. Its value is what each test's fixture recorded, the tests that gpucheck
    then skipped included (their fixtures ran first). Kills: the fixture handing out every GPU, the blocked GPU 0
    too."""
    assert seen(faulty_gpu_run) == {name: [HEALTHY] for name in outcomes(faulty_gpu_run)}


def test_an_unmarked_test_gets_the_usable_gpus_under_framework_none(faulty_gpu_run: GpucheckRun) -> None:
    """Issue 37, point 8: with --gpucheck-framework=none an unmarked test's ``gpus`` was ``[]`` on a machine with
    usable GPUs (the fixture asked for TensorFlow's GPUs, which this run does not diagnose). It gets the driver's
    usable GPU, as the marked ones do."""
    assert outcomes(faulty_gpu_run)["test_unmarked"] == ("passed", "")
    assert seen(faulty_gpu_run)["test_unmarked"] == [HEALTHY]


def test_every_line_of_the_html_summary_is_escaped(faulty_gpu_run: GpucheckRun) -> None:
    """Promise (htmlreport.py, docs/html-report.md): every text from the machine is escaped before it goes into the
    page, the summary's lines too (the Cause and Remedy cells have their own test). The page's summary section is static
    HTML (pytest-html inserts it as it is), so it is read here as text, without a browser. The kernel log's process name
    and words reach two summary lines (the root cause's cause, the kernel log's record). Kills: a summary line put into
    the page unescaped."""
    pytest.importorskip("pytest_html", reason="pytest-html is not installed (the html extra)")
    assert faulty_gpu_run.path is not None
    page = (faulty_gpu_run.path / "report.html").read_text()
    start = page.index('<div class="gpucheck-summary"')
    section = page[start : page.index("</pre></div>", start)]
    lines = section.split('<pre class="gpucheck-lines"', 1)[1].split(">", 1)[1].splitlines()
    assert any(
        line.lstrip().startswith("cause: The driver wrote") and "Timeout &lt;script&gt;alert(1)&lt;/script&gt;" in line
        for line in lines
    ), section
    assert any("Xid 119 on 0000:07:00, &lt;b&gt;nv-hostengine&lt;/b&gt; pid 2357" in line for line in lines), section
    assert HOSTILE_WORDS not in page and HOSTILE_NAME not in page


# --- 8. under xdist the controller diagnoses, once ---------------------------------------------------------------------


def test_under_xdist_the_machine_is_diagnosed_once_by_the_controller(
    pytester: pytest.Pytester,
    run_gpucheck: Callable[..., GpucheckRun],
    fake_machine: Callable[[dict[str, Any]], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Promise (docs/ARCHITECTURE.md, gpucheck/shared.py): under ``pytest --gpucheck -n 2`` the controller diagnoses
    the machine once and the workers judge its facts. The fake libcuda writes a line for each cuInit
    (``GPUCHECK_FAKE_CUINIT_LOG``): one diagnosis of a machine without TensorFlow is one cuInit, in the CUDA driver
    probe. The workers still decide the marked tests from that diagnosis (the faulty GPU 0 blocked). Kills: a worker
    diagnosing the machine itself (``plugin.py`` starting the worker's session without the controller's
    ``Remote``): three diagnoses on this two-GPU machine, each with its probes."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (the test extra)")
    fake_machine(two_a100s())
    log = pytester.path / "cuinit.log"
    monkeypatch.setenv("GPUCHECK_FAKE_CUINIT_LOG", str(log))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makepyfile(test_marked=MARKED)
    run = run_gpucheck("--gpucheck-framework=none", "-n", "2", "-rs", "test_marked.py")
    out = run.result.stdout.str()
    assert run.result.ret == 1 and run.root_cause == "gsp-firmware-error", out[-3000:]
    assert "2 workers" in out, out[-3000:]
    inits = log.read_text().splitlines()
    assert len(inits) == 1 and "gpucheck.probes.driver:probe_cuda_driver" in inits[0], inits
    seen_by = [json.loads(line) for line in (pytester.path / "seen.jsonl").read_text().splitlines()]
    assert sorted(e["test"] for e in seen_by) == sorted(
        ["test_two_gpus", "test_one_gpu", "test_compute_capability_8_6", "test_compute_capability_8_0", "test_unmarked"]
    )
    assert all(e["gpus"] == [HEALTHY] for e in seen_by), seen_by


# --- 9 and 10. gpucheck doctor's report, written in place of the last one, and gpucheck merge of it ------------------

NVML_SCENARIOS = Path(__file__).parent / "scenarios" / "nvml"
#: The previous run's report at the path a node's prolog writes every run (a reader may hold it open meanwhile).
PREVIOUS = '{"schema": "gpucheck-report/1", "verdict": "accelerated", "previous": true}\n'


@pytest.fixture(scope="module")
def doctor_reports(tmp_path_factory: pytest.TempPathFactory, fake_lib_cache: Path) -> dict[str, Any]:
    """``gpucheck doctor --framework=none --json PATH`` on two NVML scenarios: a healthy DGX H100 node (accelerated) and
    a card trained at x8 in its Gen4 x16 slot (degraded: pcie-link-degraded). The second PATH held the previous
    report, with a second name (a hard link) that shows whether the file was replaced or written over."""
    where = tmp_path_factory.mktemp("doctor")
    out: dict[str, Any] = {}
    for host, name in (("node-01", "h100-sxm-8gpu-node"), ("node-02", "gen4-x16-card-trained-at-x8")):
        scenario = json.loads((NVML_SCENARIOS / f"{name}.json").read_text())
        path = where / f"{host}.json"
        if host == "node-02":
            path.write_text(PREVIOUS)
            os.link(path, where / "previous.json")
            out["inode"] = path.stat().st_ino
        with pytest.MonkeyPatch.context() as mp:
            make_fake_machine(scenario, where / f"machine-{host}", fake_lib_cache, mp)
            done = subprocess.run(
                [sys.executable, "-m", "gpucheck.cli", "doctor", "--framework=none", "--json", str(path)],
                capture_output=True,
                text=True,
                timeout=300,
                cwd=where,
            )
        out[host] = (done, path)
    out["previous"] = where / "previous.json"
    return out


def test_doctor_replaces_its_json_report_atomically(doctor_reports: dict[str, Any]) -> None:
    """Promise (docs/fleets.md: ``--json PATH`` writes the report "atomically"): the report is written to a new file that is
    then renamed over the old one, so a reader sees the old report or the new one, never half of one. Seen from the
    outside: the path is a new file (a new inode) holding the new report, and the old file, still reachable by its other
    name, is untouched. Kills: ``doctor --json`` writing into the existing file (``open(path, "w")``, or
    ``write_report`` writing a regular file through)."""
    done, path = doctor_reports["node-02"]
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr
    report = json.loads(path.read_text())
    assert report["verdict"] == "degraded" and report["root_cause"]["id"] == "pcie-link-degraded"
    assert path.stat().st_ino != doctor_reports["inode"]
    assert doctor_reports["previous"].read_text() == PREVIOUS
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_merge_exits_1_when_a_host_is_degraded(doctor_reports: dict[str, Any], tmp_path: Path) -> None:
    """Promise (docs/fleets.md): ``gpucheck merge`` "exits 1 when any host is not accelerated, 0 when all are": a
    degraded host is not accelerated. The two doctor reports, each under its host's name. Kills: merge's exit status
    counting only not-accelerated hosts (exit 0 with a degraded host)."""
    paths = []
    for host in ("node-01", "node-02"):
        done, path = doctor_reports[host]
        assert done.returncode == (0 if host == "node-01" else 1), done.stdout[-2000:] + done.stderr
        report = json.loads(path.read_text())
        report["environment"]["host"] = host
        paths.append(tmp_path / f"{host}.json")
        paths[-1].write_text(json.dumps(report))
    merged = gpucheck_merge(*paths, "--json", tmp_path / "fleet.json")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    assert fleet["accelerated"] == 1 and fleet["exit_status"] == 1, fleet
    assert gpucheck_merge(paths[0]).returncode == 0  # the healthy host alone


# --- point 8: a worker killed during one of gpucheck's checks ---------------------------------------------------------

#: A conftest that kills its xdist worker as gpucheck's check of the NVML library starts (as an OOM kill would).
KILLS_A_CHECKS_WORKER = """
import os


def pytest_runtest_protocol(item, nextitem):
    if item.name == "test_nvml_loads" and hasattr(item.config, "workerinput"):
        os._exit(9)
"""


def test_a_check_whose_worker_dies_is_failed_and_the_report_incomplete(
    pytester: pytest.Pytester, run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """Issue 37, point 8: a worker killed during one of gpucheck's checks dropped that check from the report, which
    still said ``complete: true``. The check is now listed as failed with why (xdist's words), and the report says
    ``complete: false``, its verdict standing (this host's: no-nvidia-gpu). Run on this host, without fakes."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (the test extra)")
    pytester.makeconftest(KILLS_A_CHECKS_WORKER)
    run = run_gpucheck("--gpucheck-framework=none", "-n", "2", "--max-worker-restart=4")
    checks = {c["nodeid"].split("::")[-1]: c for c in run.report["checks"]}
    assert "test_nvml_loads" in checks, sorted(checks)
    lost = checks["test_nvml_loads"]
    assert lost["outcome"] == "failed" and "crashed" in lost["crashed"], lost
    assert run.report["complete"] is False
    assert run.root_cause == "no-nvidia-gpu" and run.report["verdict"] == "not-accelerated"
    assert len(checks) > 30  # the other checks are there, from the workers that lived
