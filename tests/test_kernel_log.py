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
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.diagnosis import Diagnosis, Result
from gpucheck.facts import facts_of
from gpucheck.model import catalog
from gpucheck.records.facts import outcome
from gpucheck.records.parse import records, text_line
from gpucheck.records.probe import read_kernel_log, read_kmsg
from gpucheck.settings import Settings

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
    assert log.source is None and "neither the kernel's /dev/kmsg nor a regular file" in log.tried[0]
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
