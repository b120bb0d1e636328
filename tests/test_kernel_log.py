"""The records unit (issue 24, points 1 and 2): this boot's kernel log and Fabric Manager.

Real kernel-log lines from public reports (``tests/logs/kmsg/``, each with its thread in ``INDEX.md``) are written
into a fake ``/dev/kmsg`` of a host view (one kmsg record per line, as the kernel hands them out) and read back by
the real reader, then judged through the diagnosis (in-process, its probes in children) and through
``pytest --gpucheck`` on fake machines built from the same reports. This machine's own ``/dev/kmsg`` is read for
real. No NVSwitch is ever counted as a GPU.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.diagnosis import Diagnosis, Result
from gpucheck.facts import (
    ChildExit,
    Facts,
    HardwareFacts,
    KernelFacts,
    NvmlGpu,
    PciDevice,
    ProbeOutcome,
    VisibilityFacts,
    facts_of,
)
from gpucheck.model import UNREAD_KEY, Finding, catalog
from gpucheck.records.facts import KernelLogRead, RecordsFacts, outcome
from gpucheck.records.parse import KEPT, read_records, records, text_line
from gpucheck.records.probe import read_kernel_log, read_kmsg
from gpucheck.records.rules import LOG_IDS, not_checked, records_rules
from gpucheck.settings import Settings
from tests.factsbuild import make_facts
from tests.test_nvml_rules import gpu as nvml_gpu
from tests.test_nvml_rules import nvml_facts

LOGS = Path(__file__).parent / "logs" / "kmsg"
SCENARIOS = Path(__file__).parent / "scenarios"
_STAMP = re.compile(r"\[\s*(\d+\.\d+)\]")
_DRIVER_WORDS = re.compile(r"(NVRM: .*|nvidia-nvswitch\d+: .*)$")


def kmsg_text(*names: str) -> str:
    """The lines of the logs ``names`` as /dev/kmsg records (``PRI,SEQ,TS_USEC,FLAGS;MESSAGE``): the kernel's own
    message (the report's syslog or dmesg prefix dropped), its time since boot where the report printed one."""
    out = ["6,0,0,-;Linux version 6.8.0-60-generic (buildd@lcy02-amd64-098)"]
    for name in names:
        for line in (LOGS / name).read_text().splitlines():
            m = _DRIVER_WORDS.search(line)
            if m is None:
                continue
            stamp = _STAMP.search(line)
            usec = int(float(stamp.group(1)) * 1e6) if stamp else 1_000_000 * len(out)
            out.append(f"3,{len(out)},{usec},-;{m.group(1)}")
    return "\n".join(out) + "\n"


def gpu(bus_id: str, index: int, name: str = "NVIDIA H100 80GB HBM3") -> dict[str, Any]:
    """One healthy GPU of the DGX H100 scenario (``tests/scenarios/nvml/h100-sxm-8gpu-node.json``) at ``bus_id``
    (sysfs spelling; NVML pads the domain to 8 digits)."""
    base = json.loads((SCENARIOS / "nvml" / "h100-sxm-8gpu-node.json").read_text())["gpus"][0]
    g = copy.deepcopy(base)
    g.update(name=name, pci_bus_id=f"0000{bus_id}".upper(), uuid=f"GPU-5f2a{index}b1c-7e3d-4a9f-b2c8-0d1e2f3a4b{index}c")
    return dict(g)


def machine(bus_ids: list[str], kmsg: str | None, *, name: str = "NVIDIA H100 80GB HBM3",
            nvswitches: tuple[str, ...] = (), init: int = 0, files: dict[str, Any] | None = None) -> dict[str, Any]:
    """A fake machine: GPUs at ``bus_ids`` (sysfs spelling, ``0000:07:00.0``), this boot's kernel log ``kmsg`` in its
    ``/dev/kmsg`` (None: no /dev/kmsg at all), NVSwitches at ``nvswitches``, cuInit's answer ``init``."""
    pci = [{"bus_id": b, "vendor": "0x10de", "device": "0x2330", "class": "0x030200", "driver": "nvidia"} for b in bus_ids]
    pci += [{"bus_id": b, "vendor": "0x10de", "device": "0x22a3", "class": "0x068000", "driver": "nvidia"} for b in nvswitches]
    dev = ["nvidiactl", "nvidia-uvm", *(f"nvidia{i}" for i in range(len(bus_ids)))]
    dev += [f"nvidia-nvswitch{i}" for i in range(len(nvswitches))] + (["nvidia-nvswitchctl"] if nvswitches else [])
    host_files = dict(files or {})
    if kmsg is not None:
        host_files["dev/kmsg"] = {"text": kmsg}
    return {
        "driver_version": "570.133.20",
        "host": {"pci": pci, "module_version": "570.133.20", "dev": dev, "files": host_files},
        "libraries": ["libcuda", "libnvml"],
        "cuda": {"init": init, "driver_version": 12080},
        "gpus": [gpu(b, i, name) for i, b in enumerate(bus_ids)],
        "links": {"default": {"p2p_read": 0, "p2p_nvlink": 0, "topology": 40}},
    }


def diagnose(fake_machine: Callable[[dict[str, Any]], Path], scenario: dict[str, Any]) -> Result:
    fake_machine(scenario)
    return Diagnosis(Settings(framework="none")).result()


def ids(result: Result) -> list[str]:
    return [f.id for f in result.findings]


def the(result: Result, finding_id: str, subject: str | None = None) -> Any:
    found = [f for f in result.findings if f.id == finding_id and (subject is None or f.subject == subject)]
    assert len(found) == 1, (finding_id, subject, [(f.id, f.subject) for f in result.findings])
    return found[0]


# --- the reader -----------------------------------------------------------------------------------------------------


def test_this_machines_dev_kmsg_is_read_to_its_end_and_returns() -> None:
    """The real /dev/kmsg, opened non-blocking: the read ends at EAGAIN (a blocking read would wait for the next
    message for ever). Run in a child with a wide bound, so a regression hangs nothing but that child."""
    if not os.path.exists("/dev/kmsg"):
        pytest.skip("no /dev/kmsg on this machine")
    code = (
        "import json, time; from pathlib import Path; from gpucheck.records.probe import read_kernel_log\n"
        "t = time.monotonic(); log, lines = read_kernel_log(Path('/'))\n"
        "print(json.dumps({'source': log.source, 'records': log.records, 'tried': log.tried, 'lines': len(lines),"
        " 's': time.monotonic() - t}))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    env.pop("GPUCHECK_HOST_ROOT", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    try:
        os.close(os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK))
        readable = True
    except OSError:
        readable = False
    if readable:
        assert got["source"] == "/dev/kmsg" and got["records"] == got["lines"] > 0, got
    else:
        assert got["source"] != "/dev/kmsg" and any(t.startswith("/dev/kmsg") for t in got["tried"]), got


def test_dev_kmsg_records_of_this_machine_parse_as_kmsg() -> None:
    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("/dev/kmsg is not readable here")
    lines, read = read_kmsg(Path("/dev/kmsg"))
    assert lines and not read.truncated and read.unfinished is None and read.records == len(lines)
    # Times since boot never go backwards in the kernel's ring buffer.
    stamps = [ln.seconds for ln in lines if ln.seconds is not None]
    assert stamps == sorted(stamps) and len(stamps) == len(lines)


def test_no_kmsg_in_a_host_view_is_not_checked_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    log, lines = read_kernel_log(tmp_path)
    assert log.source is None and lines == []
    assert str(tmp_path / "dev/kmsg") in log.tried[0] and "FileNotFoundError" in log.tried[0]
    assert "journalctl, dmesg: not asked" in log.tried[1]


def test_a_fifo_in_place_of_dev_kmsg_is_refused_not_waited_on(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    os.mkfifo(tmp_path / "dev" / "kmsg")
    start = time.monotonic()
    log, _ = read_kernel_log(tmp_path)
    assert log.source is None
    assert log.tried[0] == f"{tmp_path / 'dev' / 'kmsg'}: OSError: neither the kernel's /dev/kmsg nor a regular file"
    assert time.monotonic() - start < 30  # did not hang (a blocking open would wait for a writer for ever)


# --- real lines, parsed -------------------------------------------------------------------------------------------

#: Each log file: the records the reader must find, as (kind, code, device, pid, process, count).
PARSED: dict[str, list[tuple[str, int, str, int | None, str | None, int]]] = {
    "xid13-relion-436.log": [("Xid", 13, "0000:41:00", None, None, 3)],
    "xid13-vllm-5901.log": [("Xid", 13, "0000:43:00", None, None, 2)],
    "xid31-43-94-akash-244.log": [
        ("Xid", 43, "0000:00:05", 1045242, "pt_main_thread", 1), ("Xid", 43, "0000:00:05", 1084984, "pt_main_thread", 1),
        ("Xid", 31, "0000:00:07", 2512125, "python3.10", 1), ("Xid", 94, "0000:00:08", None, None, 1),
    ],
    "xid48-64-gpu-operator-1146.log": [("Xid", 48, "0000:07:00", None, None, 1), ("Xid", 64, "0000:07:00", None, None, 1)],
    "xid63-ml-engineering.log": [("Xid", 63, "0000:10:1c", 1896, None, 1)],
    "xid74-nvsentinel-516.log": [("Xid", 74, "0003:00:00", None, None, 1)],
    "xid79-open-gpu-kernel-modules-1151.log": [("Xid", 79, "0000:06:00", None, None, 1)],
    "xid119-dcgm-144.log": [("Xid", 119, "0000:07:00", 2357, "nv-hostengine", 1)],
    "xid120-154-nvidia-forum-364958.log": [("Xid", 120, "0000:01:00", None, None, 1), ("Xid", 154, "0000:01:00", None, None, 1)],
    "xid62-154-45-nvidia-forum-364958.log": [
        ("Xid", 62, "0000:01:00", None, None, 1), ("Xid", 154, "0000:01:00", None, None, 1),
        ("Xid", 45, "0000:01:00", 12542, "VLLM::Worker", 1),
    ],
    "gsp-heartbeat-154-open-gpu-kernel-modules-1200.log": [("Xid", 154, "0000:01:00", None, None, 1)],
    "sxid-nvtrust-124.log": [("SXid", 22013, "0000:04:00.0", None, None, 2)],
    "sxid-gpud-338.log": [("SXid", 12028, "0000:84:00.0", None, None, 1)],
}


def test_every_log_of_the_corpus_is_in_the_index_and_parsed_here() -> None:
    index = (LOGS / "INDEX.md").read_text()
    on_disk = {p.name for p in LOGS.glob("*.log")}
    assert on_disk == set(PARSED)
    for name in on_disk:
        assert f"`{name}`" in index and re.search(rf"`{re.escape(name)}`[^\n]*https://", index), name


@pytest.mark.parametrize("name", sorted(PARSED))
def test_real_lines_read_back_from_a_fake_dev_kmsg(tmp_path: Path, name: str) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text(kmsg_text(name))
    log, lines = read_kernel_log(tmp_path)
    assert log.source == str(tmp_path / "dev/kmsg") and log.records == len(lines)
    got = [(r.kind, r.code, r.device, r.pid, r.process, r.count) for r in records(lines)]
    assert got == PARSED[name]
    # The same lines as journalctl or dmesg print them give the same records.
    as_text = [(r.kind, r.code, r.device, r.pid, r.process, r.count)
               for r in records(text_line(ln) for ln in (LOGS / name).read_text().splitlines())]
    assert as_text == got


def test_xid_154_keeps_the_recovery_action_it_changed_to(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text(kmsg_text("xid120-154-nvidia-forum-364958.log"))
    _, lines = read_kernel_log(tmp_path)
    rec = next(r for r in records(lines) if r.code == 154)
    assert rec.recovery_action == "0x1 (GPU Reset Required)"


def test_the_xid_catalog_names_its_source_and_the_causes_exist() -> None:
    data = json.loads((Path(__file__).parent.parent / "gpucheck" / "data" / "xid_catalog.json").read_text())
    assert "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in data["_source"]
    causes = catalog().causes
    for code, entry in data["xid"].items():
        assert entry["mnemonic"] and entry["description"], code
        assert entry.get("finding") in (None, "application") or entry["finding"] in causes, code
    assert data["xid"]["79"]["finding"] == "gpu-lost" and data["xid"]["79"]["immediate_action"] == "RESTART_BM"
    assert {c for c in ("48", "63", "64", "92", "94", "95") if data["xid"][c]["finding"] == "ecc-errors"} == {
        "48", "63", "64", "92", "94", "95"}
    assert data["xid"]["74"]["finding"] == "nvlink-degraded"
    assert data["xid"]["119"]["finding"] == data["xid"]["120"]["finding"] == "gsp-firmware-error"
    assert {c for c in ("13", "31", "43", "45") if data["xid"][c]["finding"] == "application"} == {"13", "31", "43", "45"}


def test_new_catalog_ids_carry_an_action_and_the_notes_are_notes() -> None:
    causes = catalog().causes
    for cid in ("fabric-manager-not-running", "gsp-firmware-error", "xid-recovery-required", "xid-application-fault",
                "xid-recorded", "nvlink-degraded"):
        assert causes[cid].action in ("none", "reconfigure", "stop-processes", "reset-gpu", "reboot", "service-hardware")
    for note in ("xid-application-fault", "xid-recorded"):
        assert causes[note].meaning.startswith("note (info): ") and causes[note].action == "none"
    assert causes["fabric-manager-not-running"].layer == "driver"


# --- each code named with its cause, GPU and action (the diagnosis, probes in children) ----------------------------

#: (log, the GPUs' sysfs bus ids, the finding expected, its subject, severity, action).
NAMED = [
    ("xid79-open-gpu-kernel-modules-1151.log", ["0000:06:00.0"], "gpu-lost", "GPU-0", "blocker", "reboot"),
    ("xid48-64-gpu-operator-1146.log", ["0000:05:00.0", "0000:07:00.0"], "ecc-errors", "GPU-1", "blocker", "reset-gpu"),
    ("xid63-ml-engineering.log", ["0000:10:1c.0"], "ecc-errors", "GPU-0", "degraded", "reset-gpu"),
    ("xid74-nvsentinel-516.log", ["0003:00:00.0"], "nvlink-degraded", "GPU-0", "degraded", "reset-gpu"),
    ("xid119-dcgm-144.log", ["0000:07:00.0"], "gsp-firmware-error", "GPU-0", "blocker", "reset-gpu"),
    ("xid13-relion-436.log", ["0000:41:00.0"], "xid-recorded", "GPU-0", "info", "none"),
    ("xid62-154-45-nvidia-forum-364958.log", ["0000:01:00.0"], "xid-recovery-required", "GPU-0", "blocker", "reset-gpu"),
]


@pytest.mark.parametrize(("log", "buses", "fid", "subject", "severity", "action"), NAMED, ids=[n[0] for n in NAMED])
def test_each_real_record_is_named_with_its_cause_gpu_and_action(
    fake_machine: Callable[[dict[str, Any]], Path], log: str, buses: list[str], fid: str, subject: str,
    severity: str, action: str,
) -> None:
    result = diagnose(fake_machine, machine(buses, kmsg_text(log)))
    f = the(result, fid, subject)
    assert (f.severity.value, f.action) == (severity, action)
    assert f.evidence["source"] == "kernel log" and f.evidence["pci"] == PARSED[log][0][2]
    # Its check is answered: the kernel log needs only the kernel module that wrote it.
    assert "cuda-init-failed" not in ids(result)


def test_xid_79_already_seen_by_nvml_is_one_gpu_lost(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    scenario = machine(["0000:06:00.0"], kmsg_text("xid79-open-gpu-kernel-modules-1151.log"))
    scenario["gpus"][0]["lost"] = 1  # NVML_ERROR_GPU_IS_LOST, as tests/scenarios/nvml/gpu-fallen-off-the-bus.json
    result = diagnose(fake_machine, scenario)
    gone = [f for f in result.findings if f.id == "gpu-lost"]
    assert len(gone) == 1 and gone[0].subject == "GPU-0" and gone[0].evidence.get("source") != "kernel log", gone


def test_xid_63_that_nvml_counts_too_is_one_ecc_finding(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """The ml-engineering Xid 63 line on a GPU whose NVML counters show the error as well (the counts of
    tests/scenarios/nvml/a100-uncorrectable-ecc-row-remap-pending.json): one ecc-errors, NVML's, with the log's
    record as a note of when; not two findings of one fault."""
    scenario = machine(["0000:10:1c.0"], kmsg_text("xid63-ml-engineering.log"))
    scenario["gpus"][0]["ecc"] = {"current": 1, "volatile_uncorrected": 2, "aggregate_uncorrected": 2}
    result = diagnose(fake_machine, scenario)
    ecc = [f for f in result.findings if f.id == "ecc-errors"]
    assert len(ecc) == 1 and ecc[0].subject == "GPU-0" and ecc[0].evidence.get("source") != "kernel log", ecc
    assert "2 uncorrectable ECC error(s)" in ecc[0].summary
    note = the(result, "xid-recorded", "GPU-0")
    assert note.evidence["xids"][0]["xid"] == 63 and note.severity.value == "info"


def test_a_gsp_error_followed_by_xid_154_carries_the_drivers_recovery_action(
    fake_machine: Callable[[dict[str, Any]], Path],
) -> None:
    """The RTX PRO 6000 of the NVIDIA forum thread (crash 1): Xid 120 then Xid 154 to 0x1 (GPU Reset Required)."""
    result = diagnose(fake_machine, machine(["0000:01:00.0"], kmsg_text("xid120-154-nvidia-forum-364958.log"),
                                            name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition"))
    f = the(result, "gsp-firmware-error", "GPU-0")
    assert f.evidence["recovery_action"] == "0x1 (GPU Reset Required)" and f.action == "reset-gpu"
    assert "xid-recovery-required" not in ids(result) and result.verdict == "not-accelerated"


def test_xid_154_raises_a_lower_action(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """Crash 2 of the same machine: Xid 62 (no cause of its own), 154 to 0x1, then 45 of VLLM::Worker."""
    result = diagnose(fake_machine, machine(["0000:01:00.0"], kmsg_text("xid62-154-45-nvidia-forum-364958.log")))
    f = the(result, "xid-recovery-required", "GPU-0")
    assert f.action == "reset-gpu" and [x["xid"] for x in f.evidence["xids"]] == [62, 154, 45]
    # The program's Xid 45 followed the GPU's fault: no application-fault note beside it.
    assert "xid-application-fault" not in ids(result)


def test_a_node_reboot_required_raises_the_action_to_reboot(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """The forum machine's Xid 120 and 154, the 154 changed here (not in the corpus file) to the recovery action the
    driver gives a GPU fallen off the bus (0x2, Node Reboot Required): the GSP finding's reset-gpu becomes reboot."""
    text = kmsg_text("xid120-154-nvidia-forum-364958.log").replace(
        "to 0x1 (GPU Reset Required)", "to 0x2 (Node Reboot Required)")
    result = diagnose(fake_machine, machine(["0000:01:00.0"], text))
    assert the(result, "gsp-firmware-error", "GPU-0").action == "reboot"


def test_a_kernel_log_that_cannot_be_read_is_not_checked_never_a_fault(
    fake_machine: Callable[[dict[str, Any]], Path],
) -> None:
    result = diagnose(fake_machine, machine(["0000:07:00.0"], None))
    assert not [f for f in result.findings if f.evidence.get("source") == "kernel log"]
    assert "FileNotFoundError" in result.unchecked["gsp-firmware-error"]
    rf = facts_of(outcome(result.facts)) if result.facts is not None else None
    assert rf is not None and rf.log.source is None


# --- Fabric Manager and NVSwitches --------------------------------------------------------------------------------

#: DGX H100's four NVSwitches (device 0x22a3, class 0x0680) beside its eight GPUs; the bus ids are this fake's.
NVSWITCHES = ("0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0")
H100_GPUS = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
             "0000:ba:00.0", "0000:db:00.0"]


def test_fabric_manager_of_another_version_is_named(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    fm = {"usr/bin/nv-fabricmanager": {"text": "#!/bin/sh\necho 'Fabric Manager version is : 570.124.06'\n",
                                       "mode": 0o755}}
    result = diagnose(fake_machine, machine(H100_GPUS, kmsg_text(), nvswitches=NVSWITCHES, init=802, files=fm))
    f = the(result, "fabric-manager-not-running")
    assert f.evidence["fabric_manager_version"] == "570.124.06" and f.evidence["driver"] == "570.133.20"
    assert "570.133.20" in f.remedy and "of another version" in f.evidence["fabric_manager"]
    assert "cuda-init-failed" not in ids(result)


def test_cuinit_802_without_nvswitches_stays_cuda_init_failed(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    result = diagnose(fake_machine, machine(["0000:18:00.0"], kmsg_text(), init=802))
    assert "fabric-manager-not-running" not in ids(result)
    assert the(result, "cuda-init-failed").evidence["name"] == "CUDA_ERROR_SYSTEM_NOT_READY"


def test_sxid_records_name_the_nvswitch_not_a_gpu(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    result = diagnose(fake_machine, machine(H100_GPUS[:1], kmsg_text("sxid-nvtrust-124.log"),
                                            nvswitches=("0000:04:00.0",)))
    f = the(result, "xid-recorded", "NVSwitch 0000:04:00.0")
    assert f.severity.value == "info" and f.evidence["sxid"] == 22013 and f.evidence["nvswitch"] == "nvidia-nvswitch3"
    assert f.evidence["count"] == 2

    assert "safely ignored" in f.cause  # the guide's words on 22013


def test_an_sxid_that_stalls_traffic_is_nvlink_degraded_though_not_called_fatal(
    fake_machine: Callable[[dict[str, Any]], Path],
) -> None:
    """gpud's SXid 12028 line carries no Fatal/Non-fatal words; the Fabric Manager guide lists 12028 as non-fatal but
    says the GPUs' NVLink traffic through the port stalls and later GPU access hangs: a restart, not a note."""
    result = diagnose(fake_machine, machine(H100_GPUS[:1], kmsg_text("sxid-gpud-338.log"),
                                            nvswitches=("0000:84:00.0",)))
    f = the(result, "nvlink-degraded", "NVSwitch 0000:84:00.0")
    assert f.evidence["name"] == "egress nonposted PRIV error" and f.evidence["class"] == "non-fatal"
    assert f.action == "reboot" and "stalled" in f.cause and "xid-recorded" not in ids(result)


def test_the_sxid_table_holds_the_guides_classes() -> None:
    from gpucheck.records.rules import xid_catalog

    table = {k: v for k, v in xid_catalog()["sxid"].items() if not k.startswith("_")}
    assert len(table) >= 90 and {v["class"] for v in table.values()} == {"non-fatal", "potentially fatal", "always fatal"}
    assert table["11012"]["name"] == "Single bit ECC errors" and table["11012"]["class"] == "non-fatal"
    assert table["22003"] == {"name": "Minion Halt", "class": "always fatal"}

# --- through pytest --gpucheck on fake machines built from real reports --------------------------------------------


def test_hgx_h100_with_four_nvswitches_and_cuinit_802(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """An HGX H100 whose nvidia-fabricmanager is not installed: every program fails at cuInit with 802 while
    nvidia-smi lists every GPU. Eight GPUs are counted, not twelve."""
    fake_machine(machine(H100_GPUS, kmsg_text(), nvswitches=NVSWITCHES, init=802))
    run = run_gpucheck("--gpucheck-framework=none", "--gpucheck-expect-gpus=8")
    assert run.root_cause == "fabric-manager-not-running", run.result.stdout.str()
    rc = run.report["root_cause"]
    assert rc["layer"] == "driver" and rc["severity"] == "blocker" and rc["action"] == "reconfigure"
    assert rc["evidence"]["nvswitches"] == list(NVSWITCHES) and "not installed" in rc["evidence"]["fabric_manager"]
    assert "nvidia-fabricmanager" in rc["remedy"]
    assert "cuda-init-failed" not in run.finding_ids and "gpu-count-mismatch" not in run.finding_ids
    assert run.report["facts"]["nvml"]["facts"]["device_count"] == 8
    assert len(run.report["facts"]["hardware"]["nvidia_gpus"]) == 8
    outcomes = {c["nodeid"].split("::")[-1]: c["outcome"] for c in run.report["checks"]}
    # The count is blocked by the driver layer's root cause; NVML's and the bus's counts above are eight.
    # cuInit is what fails: its check is the one red line (it passed here while cuInit returned 802 until
    # test_cuda_initialises asked fabric-manager-not-running), the count is blocked.
    assert outcomes["test_cuda_initialises"] == "failed" and outcomes["test_gpu_count"] == "skipped"
    failed = [c for c in run.report["checks"] if c["outcome"] == "failed"]
    assert [c["nodeid"].split("::")[-1] for c in failed] == ["test_cuda_initialises"]
    assert failed[0]["finding_ids"] == ["fabric-manager-not-running"]


def test_a_user_programs_xid_31_and_43_are_notes_and_the_gpus_usable(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """The three GPUs of akash-network/support#244: Xid 43 of pt_main_thread on one, Xid 31 of python3.10 on
    another, a contained ECC error (Xid 94) on the third."""
    fake_machine(machine(["0000:00:05.0", "0000:00:07.0", "0000:00:08.0"], kmsg_text("xid31-43-94-akash-244.log"),
                         name="NVIDIA H100 80GB HBM3"))
    run = run_gpucheck("--gpucheck-framework=none")
    notes = {f["subject"]: f for f in run.report["findings"] if f["id"] == "xid-application-fault"}
    assert set(notes) == {"GPU-0", "GPU-1"}
    assert notes["GPU-1"]["severity"] == "info" and notes["GPU-1"]["action"] == "none"
    assert "python3.10 (pid 2512125)" in notes["GPU-1"]["summary"]
    ecc = next(f for f in run.report["findings"] if f["id"] == "ecc-errors")
    assert ecc["subject"] == "GPU-2" and ecc["severity"] == "degraded" and ecc["evidence"]["xids"][0]["xid"] == 94
    outcomes = {c["nodeid"].split("::")[-1]: c["outcome"] for c in run.report["checks"]}
    assert outcomes["test_kernel_log_xid"] == "passed"
    assert outcomes["test_memory_healthy[GPU-1]"] == "passed" and outcomes["test_memory_healthy[GPU-2]"] == "failed"
    assert run.report["verdict"] == "degraded"


def test_gsp_error_then_xid_154_through_pytest(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """The RTX PRO 6000 Blackwell of the NVIDIA forum thread, crash 1: a GSP kernel exception (Xid 120), then the
    driver's recovery action (Xid 154, GPU Reset Required), while NVML still answers."""
    fake_machine(machine(["0000:01:00.0"], kmsg_text("xid120-154-nvidia-forum-364958.log"),
                         name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition"))
    run = run_gpucheck("--gpucheck-framework=none")
    f = run.finding("gsp-firmware-error")
    assert f["subject"] == "GPU-0" and f["severity"] == "blocker" and f["action"] == "reset-gpu"
    assert f["evidence"]["recovery_action"] == "0x1 (GPU Reset Required)"
    assert f["evidence"]["xids"][0]["xid"] == 120 and f["evidence"]["xid_154"]["xid"] == 154
    assert run.report["action"] == "reset-gpu" and run.report["verdict"] == "not-accelerated"
    outcomes = {c["nodeid"].split("::")[-1]: c["outcome"] for c in run.report["checks"]}
    assert outcomes["test_kernel_log_xid"] == "failed" and outcomes["test_gpu_reachable[GPU-0]"] == "passed"
    assert "kernel log (" in run.result.stdout.str()


# --- the rules on facts built by hand (in-process: tests/mutation/run_mutmut.py runs these) --------------------------
# The kernel log's own lines (tests/logs/kmsg/), moved onto the PCI addresses of the NVML GPUs of
# tests/test_nvml_rules.py (00000000:10:00.0, :11:00.0, ...): the records the real parser reads from them, judged by
# records_rules over facts as the diagnosis builds them.

#: The real lines, on GPU-0's address (0000:10:00) unless the test moves them.
REAL = {
    79: "NVRM: Xid (PCI:0000:10:00): 79, GPU has fallen off the bus.",
    48: "NVRM: Xid (PCI:0000:10:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has "
        "been detected on GPU in the framebuffer at partition 1, subpartition 0.",
    63: "NVRM: Xid (PCI:0000:10:00): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "NVRM: Xid (PCI:0000:10:00): 64, pid='<unknown>', name=<unknown>, Dynamic Page Retirement: Blacklisting failed.",
    74: "NVRM: Xid (PCI:0000:10:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 14(0x0, "
        "0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    119: "NVRM: Xid (PCI:0000:10:00): 119, pid=2357, name=nv-hostengine, Timeout waiting for RPC from GPU0 GSP! Expected "
         "function 76 (GSP_RM_CONTROL) (0x90cc0301 0xc).",
    120: "NVRM: Xid (PCI:0000:10:00): 120, GSP kernel exception: store access page fault (cause:0xf) @ "
         "pc:0xffffffff93003d42, partition:4#0",
    154: "NVRM: Xid (PCI:0000:10:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
    43: "NVRM: Xid (PCI:0000:10:00): 43, pid=1045242, name=pt_main_thread, Ch 00000008",
    31: "NVRM: Xid (PCI:0000:10:00): 31, pid=2512125, name=python3.10, Ch 00000008, intr 00000000. MMU Fault: ENGINE "
        "GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000.",
    13: "NVRM: Xid (PCI:0000:10:00): 13, Graphics Exception: ESR 0x5067b0=0x9 0x5067b4=0x24 0x5067a8=0x4c1eb72",
    62: "NVRM: Xid (PCI:0000:10:00): 62, 223b6a66 00002100 00000000 20662342 20662ba6 20664272 2065f7ca 2063f48c",
}
#: The nvtrust report's SXid 22013 (tests/logs/kmsg/sxid-nvtrust-124.log), its event once Non-fatal, once Fatal.
SXID_NONFATAL = "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt"
SXID_FATAL = "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Fatal, Link 44 Minion Link DLREQ interrupt"
OK_EXIT = ChildExit("ok", 0, None, 1.0, (), "write facts", None)


def at(line: str, bus: str) -> str:
    """A real line moved onto another PCI address (``0000:11:00``)."""
    return line.replace("0000:10:00", bus)


def hand_facts(messages: list[str], gpus: list[NvmlGpu] | None = None, *, switches: int = 0, exit: ChildExit = OK_EXIT,
               unfinished: str | None = None, keep: int | None = None, source: str | None = "/dev/kmsg",
               nvml_links: list[Any] | None = None, nvml: bool = True) -> Facts:
    """Facts of a machine with ``gpus`` (NVML; two A100s by default) and ``switches`` NVSwitches on its PCI bus, whose
    records child read ``messages`` (one a second, from 1000 s after boot) as the real child does (``read_records``)."""
    gpus = [nvml_gpu(0), nvml_gpu(1)] if gpus is None else gpus
    read = read_records([text_line(f"[{1000 + i}.000000] {m}") for i, m in enumerate(messages)],
                        *(() if keep is None else (keep,)))
    rf = RecordsFacts(KernelLogRead(source, unfinished=unfinished), read.xids, dropped=read.dropped,
                      application_processes=read.application_processes, uncatalogued=read.uncatalogued,
                      kept=KEPT if keep is None else keep)
    nvswitch = tuple(PciDevice(f"0000:{5 + i:02x}:00.0", "0x10de", "0x22a3", "0x068000", "nvidia") for i in range(switches))
    return make_facts(
        hardware=HardwareFacts("/sys/bus/pci/devices", True, None, 8, False, nvswitch, ()),
        kernel=KernelFacts("/proc/driver/nvidia/version", None, "550.54.15", None, (), True, ()),
        visibility=VisibilityFacts(None, None, None, (), False, None, None, ()),
        cuda=ProbeOutcome("cuda", OK_EXIT, None),
        nvml=ProbeOutcome("nvml", OK_EXIT, nvml_facts(gpus, nvml_links) if nvml else None),
        records=ProbeOutcome("records", exit, rf if exit.status == "ok" else None),
    )


def judge(messages: list[str], gpus: list[NvmlGpu] | None = None, **kw: Any) -> list[Finding]:
    return records_rules(hand_facts(messages, gpus, **kw), Settings(framework="none"))


def by_id(found: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in found:
        out.setdefault(f.id, []).append(f)
    return out


@pytest.mark.parametrize(("code", "cause", "severity"), [
    (79, "gpu-lost", "blocker"), (48, "ecc-errors", "degraded"), (63, "ecc-errors", "degraded"),
    (64, "ecc-errors", "blocker"), (74, "nvlink-degraded", "degraded"), (119, "gsp-firmware-error", "blocker"),
    (120, "gsp-firmware-error", "blocker"),
])
def test_a_hardware_xid_names_its_cause_on_the_gpu_at_its_address(code: int, cause: str, severity: str) -> None:
    """The hardware-class codes name a cause of their own (the module's docstring), on NVML's GPU at the record's PCI
    address; on an address no GPU has, on no GPU; the evidence counts the records and names the GPU."""
    (f,) = judge([REAL[code]])
    assert (f.id, f.severity.value, f.subject) == (cause, severity, "GPU-0")
    assert f.evidence["gpu"] == 0 and f.evidence["pci"] == "0000:10:00" and f.evidence["records"] == 1
    assert [x["xid"] for x in f.evidence["xids"]] == [code]
    (g,) = judge([at(REAL[code], "0000:11:00")])
    assert (g.id, g.subject, g.evidence["gpu"]) == (cause, "GPU-1", 1)
    (h,) = judge([at(REAL[code], "0000:99:00")])
    assert (h.id, h.severity.value, h.subject, h.evidence["gpu"]) == (cause, severity, None, None)
    assert "The GPU at PCI 0000:99:00" in h.summary


def test_a_gpu_lost_of_unknown_address_is_the_one_the_log_names() -> None:
    """A GPU NVML cannot reach has no bus id: the one lost GPU of unknown address is the one an Xid 79 names; of two
    such, neither is."""
    from gpucheck.facts import NvmlError
    lost = nvml_gpu(1, handle_error=NvmlError("nvmlDeviceGetHandleByIndex_v2", "failed", 15, "NVML_ERROR_GPU_IS_LOST", None),
                    pci_bus_id=None)
    assert [f.id for f in judge([at(REAL[79], "0000:11:00")], [nvml_gpu(0), lost])] == []  # NVML says it already
    assert [f.subject for f in judge([at(REAL[48], "0000:11:00")], [nvml_gpu(0), lost])] == ["GPU-1"]
    other = nvml_gpu(2, handle_error=lost.handle_error, pci_bus_id=None)
    assert [f.subject for f in judge([at(REAL[48], "0000:11:00")], [nvml_gpu(0), lost, other])] == [None]
    reachable = nvml_gpu(1, pci_bus_id=None)
    assert [f.subject for f in judge([at(REAL[48], "0000:11:00")], [nvml_gpu(0), reachable])] == [None]


def test_what_nvml_already_says_is_not_said_twice() -> None:
    """Xid 79 on a GPU NVML reports lost is NVML's gpu-lost alone; a log's ECC record where NVML's counters make
    an ecc-errors at least as severe is a note of when; a log's Xid 64 (remap failed) keeps its own blocker beside
    NVML's degraded counters; an Xid 79 with other records makes no finding of those either (the GPU is gone)."""
    from gpucheck.facts import NvmlEcc, NvmlError, RemappedRows
    lost = nvml_gpu(0, handle_error=NvmlError("nvmlDeviceGetHandleByIndex_v2", "failed", 15, "NVML_ERROR_GPU_IS_LOST", None))
    assert judge([REAL[79]], [lost, nvml_gpu(1)]) == []
    assert judge([REAL[79], REAL[43], REAL[62]], [lost, nvml_gpu(1)]) == []
    counted = nvml_gpu(0, ecc=NvmlEcc(True, True, 2, 2))
    (note,) = judge([REAL[48]], [counted, nvml_gpu(1)])
    assert (note.id, note.severity.value, note.subject) == ("xid-recorded", "info", "GPU-0")
    (own,) = judge([REAL[64]], [counted, nvml_gpu(1)])
    assert (own.id, own.severity.value) == ("ecc-errors", "blocker")
    failed = nvml_gpu(0, remapped_rows=RemappedRows(0, 1, False, True))
    (note64,) = judge([REAL[64]], [failed, nvml_gpu(1)])
    assert note64.id == "xid-recorded"
    (lost_log,) = judge([REAL[79], REAL[43]])
    assert lost_log.id == "gpu-lost" and [x["xid"] for x in lost_log.evidence["also_logged"]] == [43]


def test_xid_154_asks_for_what_the_driver_says_newest_first() -> None:
    """Xid 154 is the recovery action of every finding of its GPU, or xid-recovery-required (a blocker) where nothing
    else names the fault; back to 0x0 (None) it asks for nothing; of two, the newest counts."""
    (alone,) = judge([REAL[154]])
    assert (alone.id, alone.severity.value, alone.subject, alone.action) == (
        "xid-recovery-required", "blocker", "GPU-0", "reset-gpu")
    assert alone.evidence["recovery_action"] == "0x1 (GPU Reset Required)" and alone.evidence["records"] == 1
    assert alone.summary == ("GPU 0 (NVIDIA A100 80GB PCIe, 00000000:10:00.0): the driver says it needs 0x1 (GPU Reset "
                             "Required) (Xid 154, after no other Xid in this boot's log).")
    after = judge([REAL[62], REAL[154]])
    assert [(f.id, f.evidence["records"]) for f in after] == [("xid-recovery-required", 2)]
    assert "after Xid 62" in after[0].summary
    (gsp,) = judge([REAL[120], REAL[154]])
    assert gsp.id == "gsp-firmware-error" and gsp.evidence["recovery_action"] == "0x1 (GPU Reset Required)"
    assert gsp.evidence["xid_154"]["xid"] == 154 and gsp.action == "reset-gpu"
    back = REAL[154].replace("from 0x0 (None) to 0x1 (GPU Reset Required)", "from 0x1 (GPU Reset Required) to 0x0 (None)")
    assert judge([back]) == []
    reboot = REAL[154].replace("to 0x1 (GPU Reset Required)", "to 0x2 (Node Reboot Required)")
    (newest,) = judge([REAL[154], reboot])
    assert newest.evidence["recovery_action"] == "0x2 (Node Reboot Required)" and newest.action == "reboot"
    # Two records the parser keeps apart (two processes named): the one of the later time wins, whatever the order.
    older = judge([f"{reboot} pid=1", f"{REAL[154]} pid=2"])
    assert older[0].evidence["recovery_action"] == "0x1 (GPU Reset Required)"


def test_a_programs_fault_is_a_note_only_where_nothing_else_is_wrong() -> None:
    """Xid 13/31/43 naming the process are xid-application-fault (info), one per GPU, its processes counted; with a
    record of no cause of its own on the GPU (Xid 62) only notes; unnamed, a note per code."""
    (app,) = judge([REAL[43], REAL[31], at(REAL[31], "0000:11:00")][:2])
    assert (app.id, app.severity.value, app.subject, app.evidence["records"]) == ("xid-application-fault", "info",
                                                                                  "GPU-0", 2)
    assert "pt_main_thread (pid 1045242), python3.10 (pid 2512125) faulted on it (Xid 31, 43)" in app.summary
    mixed = judge([REAL[43], REAL[62]])
    assert [(f.id, f.severity.value) for f in mixed] == [("xid-recorded", "info")]
    assert mixed[0].evidence["codes"] == {"62": 1}
    unnamed = judge([REAL[13], REAL[13], REAL[43]])
    assert [(f.id, f.evidence.get("codes")) for f in unnamed] == [("xid-application-fault", None),
                                                                   ("xid-recorded", {"13": 2})]
    two = judge([REAL[43], at(REAL[43], "0000:11:00")])
    assert [(f.id, f.subject) for f in two] == [("xid-application-fault", "GPU-0"), ("xid-application-fault", "GPU-1")]


def test_codes_not_in_the_catalog_are_one_note_and_the_dropped_records_are_counted() -> None:
    """Codes NVIDIA's catalog has not are one note per GPU with each code's count; what the child did not keep is
    counted in the findings' records and processes."""
    unknown = [REAL[62].replace(" 62, ", f" {c}, ") for c in (998, 999, 998)]
    (note,) = judge(unknown)
    assert (note.id, note.evidence["codes"], note.evidence["records"]) == ("xid-recorded", {"998": 2, "999": 1}, 2)
    assert "Xid 998, 999 (not in NVIDIA" in note.summary
    many = [f"NVRM: Xid (PCI:0000:10:00): 43, pid={1000 + i}, name=python3, Ch 00000008" for i in range(30)]
    (app,) = judge(many, keep=20)
    assert app.evidence["records"] == 30 and len(app.evidence["xids"]) == 20
    assert "and 10 more faulted on it" in app.summary
    folded = [REAL[62].replace(" 62, ", f" {2000 + c}, ") for c in range(25)]
    (codes,) = judge(folded, keep=20)
    assert codes.evidence["records"] == 25 and len(codes.evidence["codes"]) == 20
    assert "and 5 more (not in NVIDIA" in codes.summary
    assert codes.cause.endswith("NVIDIA's immediate action: none given; investigatory: none given.")
    # A code the catalog has not, from more processes than the child keeps: all of them counted, times too.
    faulting = [REAL[62].replace(" 62, ", f" 999, pid={100 + p}, name=x, ") for p in range(25)]
    (counted,) = judge(faulting, keep=20)
    assert (counted.evidence["codes"], counted.evidence["records"]) == ({"999": 25}, 25)
    assert "25 times this boot, 1000 s to 1024 s after boot" in counted.summary
    (quoted,) = judge([REAL[62].replace("2063f48c", "x" * 250)])  # the driver's words quoted up to 200 characters
    words = REAL[62].split(" 62, ", 1)[1].replace("2063f48c", "x" * 250)
    assert quoted.cause.startswith(f"`NVRM: Xid (PCI:0000:10:00): 62, {words[:200]}`. NVIDIA's immediate action: ")
    pending = judge([*folded, REAL[154]], keep=20)
    assert pending[0].id == "xid-recovery-required" and pending[0].evidence["records"] == 26
    assert "and 5 more" in pending[0].summary


def test_a_log_of_more_addresses_than_gpus_is_judged_for_64_and_counted_for_the_rest() -> None:
    """NVML's GPUs first, then the log's order: the first 64 addresses are judged one by one, the others one note
    with their records counted."""
    lines = [at(REAL[43], f"0000:{0x20 + i:02x}:00") for i in range(70)] + [REAL[79]]
    found = judge(lines)
    assert found[0].id == "gpu-lost" and found[0].subject == "GPU-0"
    assert len(found) == 65 and [f.id for f in found[1:64]] == ["xid-application-fault"] * 63
    rest = found[64]
    assert (rest.id, rest.severity.value, rest.evidence["records"]) == ("xid-recorded", "info", 7)
    assert "names 71 PCI addresses" in rest.summary and "the last 7 are counted" in rest.summary
    # The last address's 25 processes, of which the child kept 20: counted whole.
    crowded = [*lines[:70], *(at(REAL[43], "0000:99:00").replace("pid=1045242", f"pid={p}") for p in range(25)), REAL[79]]
    last = judge(crowded, keep=20)[-1]
    assert shown(last) == {
        "id": "xid-recorded", "severity": "info", "layer": "health", "action": "none",
        "summary": "The kernel log names 72 PCI addresses in its Xid records, more than any machine has GPUs: the records "
                   "of the last 8 are counted, not judged one by one (32 times this boot, 1063 s to 1094 s after boot).",
        "cause": "A log of another machine, or one written to look like a kernel log, names more GPUs than are here.",
        "remedy": "Read the kernel log itself (`sudo dmesg | grep 'NVRM: Xid'`).",
        "evidence": {"source": "kernel log", "records": 32},
    }
    assert len(last.evidence["xids"]) == 20  # LISTED of the 27 kept
    assert len(judge([*lines[:63], REAL[79]])) == 64


def test_an_sxid_is_judged_per_switch_and_is_a_note_where_no_nvswitch_is() -> None:
    """An SXid the driver calls Fatal, the guide calls always fatal, or that stalls traffic is nvlink-degraded on its
    NVSwitch (a reboot); a non-fatal one a note; one finding per switch and id, its codes counted. Where no NVSwitch
    is on the readable PCI bus, any SXid is a note that asks for nothing."""
    (fatal,) = judge([SXID_FATAL], switches=4)
    assert (fatal.id, fatal.severity.value, fatal.subject) == ("nvlink-degraded", "degraded", "NVSwitch 0000:04:00.0")
    assert fatal.evidence["recovery_action"] == "reboot" and fatal.action == "reboot" and fatal.evidence["fatal"] is True
    (note,) = judge([SXID_NONFATAL], switches=4)
    assert (note.id, note.severity.value, note.evidence["fatal"]) == ("xid-recorded", "info", False)
    always = SXID_FATAL.replace("22013, Fatal", "12020, Non-fatal")
    stalls = SXID_FATAL.replace("22013, Fatal", "11004, Non-fatal")
    (both,) = judge([always, stalls], switches=4)
    assert both.id == "nvlink-degraded" and both.evidence["codes"] == {"12020": 1, "11004": 1}
    assert both.evidence["records"] == 2
    other = judge([always, stalls.replace("(PCI:0000:04:00.0)", "(PCI:0000:05:00.0)")], switches=4)
    assert [f.subject for f in other] == ["NVSwitch 0000:04:00.0", "NVSwitch 0000:05:00.0"]
    (switchless,) = judge([SXID_FATAL])
    assert (switchless.id, switchless.severity.value, switchless.action) == ("xid-recorded", "info", "none")
    assert "recovery_action" not in switchless.evidence and switchless.subject == "NVSwitch 0000:04:00.0"
    assert "No NVSwitch is on this machine's PCI bus" in switchless.summary


@pytest.mark.parametrize(("exit_", "said"), [
    (ChildExit("crashed", None, "SIGKILL", 1.0, (), "read kmsg", None), "died (SIGKILL)"),
    (ChildExit("crashed", 1, None, 1.0, (), "read kmsg", "Traceback"), "died (exit code 1: Traceback)"),
    (ChildExit("timeout", None, "SIGKILL", 60.0, (), "read kmsg", "60 s"), "was killed at its time limit (60 s)"),
    (ChildExit("error", None, None, 0.0, (), None, "fork failed"), "could not start (fork failed)"),
])
def test_a_records_probe_that_did_not_finish_is_records_unread(exit_: ChildExit, said: str) -> None:
    """A records probe that crashed, was killed or timed out: records-unread (degraded), whose evidence says the
    kernel log was not read (what makes doctor exit 2): never no finding."""
    (f,) = judge([REAL[79]], exit=exit_)
    assert (f.id, f.severity.value) == ("records-unread", "degraded")
    assert f.evidence[UNREAD_KEY] == "kernel log" and said in f.summary
    assert not_checked(hand_facts([], exit=exit_), Settings()) == dict.fromkeys(
        LOG_IDS, f"the records probe ended {exit_.status} before it said anything")


def test_a_log_read_no_further_is_records_unread_beside_what_was_read() -> None:
    unread, lost = judge([REAL[79]], unfinished="/dev/kmsg never ended")
    assert (unread.id, unread.evidence[UNREAD_KEY], unread.evidence["unfinished"]) == (
        "records-unread", "kernel log", "/dev/kmsg never ended")
    assert "read /dev/kmsg no further: /dev/kmsg never ended" in unread.summary and lost.id == "gpu-lost"
    assert [f.id for f in judge([REAL[79]])] == ["gpu-lost"]


def test_the_kernel_log_not_looked_at_says_why() -> None:
    facts = hand_facts([])
    assert not_checked(facts, Settings()) == {}
    none_read = replace(hand_facts([], source=None), units={**facts.units, "records": ProbeOutcome(
        "records", OK_EXIT, RecordsFacts(KernelLogRead(None, ("/dev/kmsg: PermissionError", "journalctl: not found"))))})
    assert not_checked(none_read, Settings()) == dict.fromkeys(
        LOG_IDS, "the kernel log could not be read: /dev/kmsg: PermissionError; journalctl: not found")
    not_run = replace(facts, units={**facts.units, "records": None}, not_run={"records": "no NVIDIA GPU"})
    assert not_checked(not_run, Settings()) == dict.fromkeys(LOG_IDS, "no NVIDIA GPU")
    assert records_rules(not_run, Settings()) == []
    unsaid = replace(facts, units={**facts.units, "records": None})
    assert not_checked(unsaid, Settings()) == dict.fromkeys(LOG_IDS, "the records probe did not run")


def shown(f: Finding) -> dict[str, Any]:
    """A finding as the report shows it, less the records it lists (``xids``, ``also_logged``, ``xid_154``)."""
    out = f.to_json()
    out["evidence"] = {k: v for k, v in out["evidence"].items() if k not in ("xids", "also_logged", "xid_154")}
    return out


A100_0 = "GPU 0 (NVIDIA A100 80GB PCIe, 00000000:10:00.0)"
ON_GPU_0 = {"gpu": 0, "pci": "0000:10:00", "source": "kernel log"}
SXID_MEANING = ("NVSwitch errors the nvidia-nvswitch driver logs as SXid; a Fatal one stalls the NVLink traffic through "
                "that switch (the GPUs' CUDA jobs abort with Xid 45) until the system is restarted to reset the GPUs and "
                "NVSwitches (Fabric Manager user guide, 'NVSwitch SXid errors').")
SXID_22013 = {"sxid": 22013, "name": "Minion Link DLREQ interrupt", "class": "non-fatal",
              "impact": "This SXid can be safely ignored.", "nvswitch": "nvidia-nvswitch3", "pci": "0000:04:00.0",
              "count": 1, "first_s": 1000.0, "last_s": 1000.0}


def test_an_sxid_finding_as_the_report_shows_it() -> None:
    """The words and evidence of an NVSwitch's SXid: the driver's Fatal (with a restart), the guide's classes, the
    guide's impact where it is this record's; a code the guide does not list is a note with the guide's meaning."""
    (fatal,) = judge([SXID_FATAL], switches=4)
    assert shown(fatal) == {
        "id": "nvlink-degraded", "severity": "degraded", "layer": "health", "action": "reboot",
        "subject": "NVSwitch 0000:04:00.0",
        "summary": "NVSwitch 0000:04:00.0 (nvidia-nvswitch3) logged a Fatal SXid, 22013 (Minion Link DLREQ interrupt): "
                   "NVLink traffic through it stalls, 1 time this boot, 1000 s to 1000 s after boot.",
        # Not the guide's "can be safely ignored" of the code's non-fatal form, under a finding that drains the node.
        "cause": f"{SXID_MEANING} The Fabric Manager guide lists SXid 22013 as non-fatal; the driver wrote this one "
                 "Fatal.",
        "remedy": "Drain the node and restart it to reset the GPUs and NVSwitches (Fabric Manager user guide); if the "
                  "same SXid comes back, have the NVSwitch baseboard inspected.",
        "evidence": {**SXID_22013, "first": "Fatal, Link 44 Minion Link DLREQ interrupt", "fatal": True,
                     "source": "kernel log", "recovery_action": "reboot"},
    }
    (note,) = judge([SXID_NONFATAL], switches=4)
    assert shown(note) == {
        "id": "xid-recorded", "severity": "info", "layer": "health", "action": "none", "subject": "NVSwitch 0000:04:00.0",
        "summary": "NVSwitch 0000:04:00.0 (nvidia-nvswitch3) logged a non-fatal SXid 22013 (Minion Link DLREQ "
                   "interrupt), 1 time this boot, 1000 s to 1000 s after boot.",
        "cause": "A non-fatal NVSwitch error: the switch corrected or contained it. This SXid can be safely ignored.",
        "remedy": "Nothing to do unless it recurs or turns Fatal.",
        "evidence": {**SXID_22013, "first": "Non-fatal, Link 44 Minion Link DLREQ interrupt", "fatal": False,
                     "source": "kernel log"},
    }
    (unknown,) = judge([SXID_NONFATAL.replace("22013", "99999")], switches=4)
    assert unknown.summary == ("NVSwitch 0000:04:00.0 (nvidia-nvswitch3) logged a non-fatal SXid 99999, 1 time this "
                               "boot, 1000 s to 1000 s after boot.")
    assert unknown.cause == f"A non-fatal NVSwitch error: the switch corrected or contained it. {SXID_MEANING}"
    assert (unknown.evidence["name"], unknown.evidence["class"], unknown.evidence["impact"]) == (None, None, None)
    (always,) = judge([SXID_FATAL.replace("22013, Fatal", "12020, Non-fatal")], switches=4)
    assert "logged an SXid the Fabric Manager guide calls always fatal, 12020 (" in always.summary
    assert always.cause == SXID_MEANING  # the guide gives 12020 no impact
    (stalls,) = judge([SXID_FATAL.replace("22013, Fatal", "11004, Non-fatal")], switches=4)
    assert "logged an SXid whose impact, by the Fabric Manager guide, is stalled NVLink traffic, 11004 (" in stalls.summary
    (fatal_stalls,) = judge([SXID_FATAL.replace("22013", "11004")], switches=4)
    assert fatal_stalls.cause.startswith(f"{SXID_MEANING} ") and "non-fatal; the driver" not in fatal_stalls.cause


def on_gpu_0(cause_id: str, severity: str, action: str, summary: str, cause: str, remedy: str,
             **evidence: Any) -> dict[str, Any]:
    """A finding of the kernel log about GPU-0 as the report shows it (:func:`shown`)."""
    return {"id": cause_id, "severity": severity, "layer": "health", "action": action, "subject": "GPU-0",
            "summary": summary, "cause": cause, "remedy": remedy, "evidence": {**ON_GPU_0, **evidence}}


#: Real records on GPU-0, and the one finding each makes as the report shows it.
SHOWN: dict[str, tuple[list[str], dict[str, Any]]] = {
    "gsp": ([REAL[119], REAL[120]], on_gpu_0(
        "gsp-firmware-error", "blocker", "reset-gpu",
        f"{A100_0} has a GSP firmware fault (Xid 119/120): jobs on it hang while nvidia-smi and NVML may "
        "still answer: the kernel log records Xid 119 (GSP RPC Timeout); Xid 120 (GSP Error), 2 times this "
        "boot, 1000 s to 1001 s after boot.",
        "The driver wrote `NVRM: Xid (PCI:0000:10:00): 119, Timeout waiting for RPC from GPU0 GSP! Expected "
        "function 76 (GSP_RM_CONTROL) (0x90cc0301 0xc).`.",
        "Drain the GPU and reset it (`sudo nvidia-smi -r -i <gpu>`) or reboot; if it recurs, update the driver "
        "(NVIDIA: INVESTIGATE_SW), or as NVIDIA's documented workaround load the driver with "
        "`NVreg_EnableGpuFirmware=0` where the driver branch allows it.",
        records=2,
    )),
    "recovery": ([REAL[62], REAL[154]], on_gpu_0(
        "xid-recovery-required", "blocker", "reset-gpu",
        f"{A100_0}: the driver says it needs 0x1 (GPU Reset Required) (Xid 154, after Xid 62).",
        "The driver changed the GPU's recovery action (Xid 154): until that is done, work on the GPU fails or "
        "hangs. Xid 62 (Internal micro-controller halt (newer drivers))",
        "Drain the GPU and do what the driver asks: reset the GPU (`sudo nvidia-smi -r -i <gpu>`) for 'GPU "
        "Reset Required', reboot the node for 'Node Reboot Required'.",
        recovery_action="0x1 (GPU Reset Required)", records=2,
    )),
    "app": ([REAL[43], REAL[31]], on_gpu_0(
        "xid-application-fault", "info", "none",
        f"{A100_0}: pt_main_thread (pid 1045242), python3.10 (pid 2512125) faulted on it (Xid 31, 43); "
        "nothing else is wrong with the GPU in the kernel log.",
        "Xid 31: GPU memory page fault; Xid 43: GPU stopped processing. These are most often the program's own "
        "fault (an illegal address, an illegal instruction, a killed job), not the GPU's: NVIDIA's action is "
        "RESTART_APP, the node stays in service.",
        "Debug the program (run it under `compute-sanitizer`, or with CUDA_LAUNCH_BLOCKING=1 to find the "
        "kernel); look at the GPU only if other programs fault on it too.",
        records=2,
    )),
    "note": ([REAL[62], REAL[62]], on_gpu_0(
        "xid-recorded", "info", "none",
        f"{A100_0}: the kernel log records Xid 62 (Internal micro-controller halt (newer drivers)), 2 times "
        "this boot, 1000 s to 1001 s after boot.",
        "`NVRM: Xid (PCI:0000:10:00): 62, 223b6a66 00002100 00000000 20662342 20662ba6 20664272 2065f7ca "
        "2063f48c`. NVIDIA's immediate action: RESET_GPU; investigatory: CONTACT_SUPPORT.",
        "Nothing to do unless it recurs; then follow NVIDIA's Xid catalog "
        "(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) for this code.",
        records=1, codes={"62": 2},
    )),
}


@pytest.mark.parametrize("case", SHOWN)
def test_a_gpus_findings_as_the_report_shows_them(case: str) -> None:
    """The words of a GPU's cause, of the recovery the driver asks for, of a program's fault and of a note: who, what
    the log records (each code with NVIDIA's description), how often and when, what the driver wrote."""
    messages, expected = SHOWN[case]
    (f,) = judge(messages)
    assert shown(f) == expected


def test_a_recovery_action_is_the_findings_and_a_code_without_description_is_shown_so() -> None:
    """Xid 154 beside a cause: the cause's words end with the driver's recovery action; a code NVIDIA's catalog does not
    describe is shown with "?"; the records listed are the GPU's."""
    (gsp154,) = judge([REAL[120], REAL[154]])
    assert gsp154.cause.endswith("Its recovery action is now 0x1 (GPU Reset Required) (Xid 154).")
    (unknown,) = judge([REAL[62].replace(" 62, ", " 999, "), REAL[154]])
    assert unknown.cause.endswith("fails or hangs. Xid 999 (?)")
    (two,) = judge([REAL[62], REAL[62].replace(" 62, ", " 999, "), REAL[154]])
    assert two.cause.endswith("fails or hangs. Xid 62 (Internal micro-controller halt (newer drivers)); Xid 999 (?)")
    assert [x["xid"] for x in unknown.evidence["xids"]] == [999, 154]


def test_which_gpu_and_which_finding_each_record_makes() -> None:
    """The edges of the rules over one GPU's records: an Xid written with its function (``0000:10:00.0``) is on the
    GPU there; without NVML no record is on a GPU; of two lost GPUs only the one without a bus id can be the one
    the log names; a record of another kind before an SXid does not hide it; a catalogued code and an uncatalogued one
    are notes of their own; what the child folded of unknown codes is counted in their note only; a program named by
    its pid or its name alone faulted; a record naming no program of a code whose processes were dropped is counted
    apart from them."""
    from gpucheck.facts import NvmlError

    (f,) = judge([REAL[79].replace("0000:10:00)", "0000:10:00.0)")])
    assert (f.id, f.subject) == ("gpu-lost", "GPU-0")
    (blind,) = judge([REAL[79]], nvml=False)
    assert (blind.id, blind.subject, blind.evidence["gpu"]) == ("gpu-lost", None, None)
    gone = NvmlError("nvmlDeviceGetHandleByIndex_v2", "failed", 15, "NVML_ERROR_GPU_IS_LOST", None)
    lost_known = nvml_gpu(0, handle_error=gone)
    lost_unknown = nvml_gpu(1, handle_error=gone, pci_bus_id=None)
    (ecc,) = judge([at(REAL[48], "0000:12:00")], [lost_known, lost_unknown])
    assert ecc.subject == "GPU-1"
    found = judge([REAL[43], SXID_FATAL], switches=4)
    assert [x.id for x in found] == ["xid-application-fault", "nvlink-degraded"]
    unknown = REAL[62].replace(" 62, ", " 999, ")
    notes = judge([REAL[62], unknown])
    assert [(n.evidence["codes"], "(not in NVIDIA" in n.summary) for n in notes] == [({"62": 1}, False),
                                                                                   ({"999": 1}, True)]
    folded = [REAL[62].replace(" 62, ", f" {2000 + c}, ") for c in range(25)]
    beside = judge([REAL[62], *folded], keep=20)
    assert [(n.evidence["codes"].get("62"), n.evidence["records"]) for n in beside] == [(1, 1), (None, 25)]
    by_pid = [f"NVRM: Xid (PCI:0000:10:00): 43, pid={100 + p}, Ch 00000008" for p in range(25)]
    (app,) = judge(by_pid, keep=20)
    assert (app.id, app.evidence["records"]) == ("xid-application-fault", 25)
    (by_name,) = judge(["NVRM: Xid (PCI:0000:10:00): 43, pid='<unknown>', name=job, Ch 00000008"])
    assert (by_name.id, "job faulted on it (Xid 43)" in by_name.summary) == ("xid-application-fault", True)
    unnamed_13 = [f"NVRM: Xid (PCI:0000:10:00): 13, pid={100 + p}, Graphics Exception" for p in range(25)]
    program, note = judge([*unnamed_13, REAL[13]], keep=20)
    assert (program.id, program.evidence["records"], "(Xid 13)" in program.summary) == ("xid-application-fault", 25,
                                                                                          True)
    assert (note.id, note.evidence["codes"], note.evidence["records"]) == ("xid-recorded", {"13": 1}, 1)
    mixed = judge([REAL[13], REAL[43]])
    assert "(Xid 43)" in mixed[0].summary and mixed[1].evidence["codes"] == {"13": 1}


def test_what_the_kernel_log_says_beside_nvmls_own_findings() -> None:
    """NVML's counters already at least as severe: the log's ECC record is a note, beside the other records of the GPU
    (they stay notes of their own); NVML's nvlink-degraded of a GPU whose links are down now makes the log's Xid 74 a
    note of when, and only on that GPU."""
    from gpucheck.facts import NvLinkState, NvmlEcc, NvmlNvLink

    counted = nvml_gpu(0, ecc=NvmlEcc(True, True, 2, 2))
    notes = judge([REAL[48], REAL[62]], [counted, nvml_gpu(1)])
    assert sorted(tuple(n.evidence["codes"]) for n in notes) == [("48",), ("62",)]
    assert {n.id for n in notes} == {"xid-recorded"}

    def b200(index: int, up: bool) -> NvmlGpu:
        links = NvmlNvLink(tuple(NvLinkState(i, int(up)) for i in range(18)))
        return nvml_gpu(index, name="NVIDIA B200", nvlink=links)

    down, fine = b200(0, False), b200(1, True)
    (note,) = judge([REAL[74]], [down, fine, b200(2, True)])
    assert (note.id, note.subject, note.evidence["codes"]) == ("xid-recorded", "GPU-0", {"74": 1})
    (fault,) = judge([at(REAL[74], "0000:11:00")], [down, fine, b200(2, True)])
    assert (fault.id, fault.subject) == ("nvlink-degraded", "GPU-1")


def test_the_words_of_a_cause_quote_the_driver_and_count_what_was_dropped() -> None:
    long = REAL[79].replace("fallen off the bus.", "fallen off the bus." + "x" * 250)
    (lost,) = judge([long])
    assert lost.cause == f"The driver wrote `NVRM: Xid (PCI:0000:10:00): 79, {long.split(' 79, ', 1)[1][:200]}`."
    many = [f"NVRM: Xid (PCI:0000:10:00): 63, pid={100 + p}, Row Remapper: New row marked" for p in range(25)]
    (ecc,) = judge(many, keep=20)
    assert (ecc.evidence["records"], "25 times this boot, 1000 s to 1024 s after boot" in ecc.summary) == (25, True)


def test_an_sxid_note_where_no_nvswitch_is_as_the_report_shows_it() -> None:
    (note,) = judge([SXID_FATAL])
    assert shown(note) == {
        "id": "xid-recorded", "severity": "info", "layer": "health", "action": "none", "subject": "NVSwitch 0000:04:00.0",
        "summary": "NVSwitch 0000:04:00.0 (nvidia-nvswitch3) logged a Fatal SXid, 22013 (Minion Link DLREQ interrupt): "
                   "NVLink traffic through it stalls, 1 time this boot, 1000 s to 1000 s after boot. No NVSwitch is on "
                   "this machine's PCI bus: a note, not a fault.",
        "cause": f"{SXID_MEANING} The Fabric Manager guide lists SXid 22013 as non-fatal; the driver wrote this one "
                 "Fatal.",
        "remedy": "Nothing to do on this machine.",
        "evidence": {**SXID_22013, "first": "Fatal, Link 44 Minion Link DLREQ interrupt", "fatal": True,
                     "source": "kernel log"},
    }


def test_the_order_of_the_gpus_findings_and_what_is_counted_apart() -> None:
    """NVML's GPUs first, then the addresses NVML does not know; what the child dropped of Xid 45s that name the Xid
    they followed (``owned``) is not counted in a program's own Xid 45; the folded codes of an address past the 64th
    are counted in the note of those addresses; NVML's NVLink finding makes the log's Xid 74 a note beside the GPU's
    other notes."""
    from gpucheck.facts import NvLinkState, NvmlNvLink

    order = judge([at(REAL[48], "0000:05:00"), REAL[48]])
    assert [f.subject for f in order] == ["GPU-0", None]
    follow_ups = [f"NVRM: Xid (PCI:0000:10:00): 45, pid={100 + p}, name=python3, Ch 00000001 caused by previous Xid 13"
                  for p in range(25)]
    own = "NVRM: Xid (PCI:0000:10:00): 45, pid=12542, name=VLLM::Worker, channel 0x00000002"
    (program,) = [f for f in judge([*follow_ups, own], keep=20) if f.id == "xid-application-fault"]
    assert program.evidence["records"] == 1
    lines = [at(REAL[43], f"0000:{0x20 + i:02x}:00") for i in range(70)]
    unknown = [REAL[62].replace(" 62, ", f" {2000 + c}, ").replace("0000:10:00", "0000:98:00") for c in range(25)]
    last = judge([*lines, *unknown, REAL[79]], keep=20)[-1]
    assert "the last 8 are counted" in last.summary and last.evidence["records"] == 7 + 20 + 5
    links = NvmlNvLink(tuple(NvLinkState(i, 0) for i in range(18)))
    up = NvmlNvLink(tuple(NvLinkState(i, 1) for i in range(18)))
    gpus = [nvml_gpu(0, name="NVIDIA B200", nvlink=links), nvml_gpu(1, name="NVIDIA B200", nvlink=up),
            nvml_gpu(2, name="NVIDIA B200", nvlink=up)]
    assert sorted(tuple(f.evidence["codes"]) for f in judge([REAL[74], REAL[62]], gpus)) == [("62",), ("74",)]
    # A lone B200 with no link up is NVML's fault only under --gpucheck-expect-nvlink: then the log's Xid 74 is a note.
    alone = [nvml_gpu(0, name="NVIDIA B200", nvlink=links)]
    assert [f.id for f in judge([REAL[74]], alone)] == ["nvlink-degraded"]
    expected = records_rules(hand_facts([REAL[74]], alone), Settings(framework="none", expect_nvlink=True))
    assert [f.id for f in expected] == ["xid-recorded"]


def test_a_log_read_no_further_as_the_report_shows_it() -> None:
    unread, _ = judge([REAL[79]], unfinished="it had not ended after 128 MiB (no kernel log is that long)")
    assert shown(unread) == {
        "id": "records-unread", "severity": "degraded", "layer": "health", "action": "none",
        "summary": "This boot's kernel log was not read to its end: the records probe read /dev/kmsg no further: it had "
                   "not ended after 128 MiB (no kernel log is that long).",
        "cause": "A fault the driver recorded (a GPU fallen off the bus, a GSP firmware error) may be in what was not "
                 "read, so the GPUs' health is not known: this is not checked, never healthy.",
        "remedy": "Read the log yourself (`sudo dmesg | grep -E 'NVRM: Xid|SXid'`). A probe killed by SIGKILL may have "
                  "been the OOM killer (`journalctl -k | grep -i oom`); if the log is only slow to read, raise "
                  "--gpucheck-timeout.",
        "evidence": {UNREAD_KEY: "kernel log", "log": "/dev/kmsg",
                     "unfinished": "it had not ended after 128 MiB (no kernel log is that long)"},
    }
