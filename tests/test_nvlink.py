"""NVLink per GPU (issue 24, point 3): the NVML probe's link walk, error counters and fabric registration against the
fake NVML, judged by ``gpucheck.rules.nvlink`` against ``data/nvlink_skus.json``.

The machines are ``tests/scenarios/nvlink/*.json``, each built from a real report it cites (``_source``). Each is read
by the real probe in a child process (``python -m gpucheck.probes.child gpucheck.probes.nvml:probe_nvml``) against the
fake library, and the rule is asked with each setting the scenario lists (``expect.cases``): one reading, several
judgements, no TensorFlow. One machine goes through ``pytest --gpucheck`` on the real command line. The rule's edges
that no scenario spells out (a partly bridged card, a model the data file does not know, a sleeping link, fabric
states) are pure tests on hand-built facts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import GpucheckRun
from gpucheck.facts import NvLinkState, NvmlFabric, NvmlFacts, NvmlGpu, NvmlMig, NvmlNvLink, from_json
from gpucheck.knowledge import data, nvlink_sku
from gpucheck.model import Severity, catalog
from gpucheck.performance import rules as perf_rules
from gpucheck.performance.facts import FIELD, BenchmarkRun, PerformanceFacts
from gpucheck.probes.host import probe_kernel
from gpucheck.rules.nvlink import nvlink_rules
from gpucheck.settings import Settings

SCENARIOS = Path(__file__).parent / "scenarios"
NVLINK = sorted((SCENARIOS / "nvlink").glob("*.json"))
#: A card without NVLink: AWS g4dn's Tesla T4 (tests/scenarios/nvml/t4-cloud-vm.json).
NO_NVLINK = SCENARIOS / "nvml" / "t4-cloud-vm.json"


def load(path: Path) -> dict[str, Any]:
    found = json.loads(path.read_text())
    assert isinstance(found, dict)
    return found


def probe(fake_machine: Callable[[dict[str, Any]], Path], scenario: dict[str, Any], tmp_path: Path) -> NvmlFacts:
    """NVML's facts of the fake machine, read by the real probe in a child process."""
    fake_machine(scenario)
    out = tmp_path / "nvml.json"
    done = subprocess.run(
        [sys.executable, "-m", "gpucheck.probes.child", "gpucheck.probes.nvml:probe_nvml", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return from_json(NvmlFacts, json.loads(out.read_text()))


def by_gpu(nf: NvmlFacts) -> dict[str, NvmlGpu]:
    return {g.id: g for g in nf.gpus}


@pytest.mark.parametrize("path", NVLINK, ids=[p.stem for p in NVLINK])
def test_each_machine_is_read_and_judged_as_its_report_says(
    path: Path, fake_machine: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    scenario = load(path)
    assert scenario.get("_source"), "every scenario cites the machine or report it models"
    expect = scenario["expect"]
    nf = probe(fake_machine, scenario, tmp_path)
    gpus = by_gpu(nf)
    # The walk: every slot the GPU has, then the index past them refused as the real library refuses it.
    for gid, (listed, active) in expect["listed"].items():
        nl = gpus[gid].nvlink
        assert nl is not None and (len(nl.links), nl.active) == (listed, active), (gid, nl)
        assert nl.ended_by is not None and nl.ended_by.name == expect["ended_by"], nl.ended_by
        assert not [e for e in gpus[gid].errors if e.function == "nvmlDeviceGetNvLinkState"], gpus[gid].errors
    for gid, counts in expect.get("counters", {}).items():
        nl = gpus[gid].nvlink
        assert nl is not None
        got = {str(link.link): {k: v for k in ("replay", "recovery", "crc_flit", "crc_data") if (v := getattr(link, k))}
               for link in nl.links}
        assert {k: v for k, v in got.items() if v} == counts
        # Every counter of every link was read (none left None).
        assert all(getattr(link, k) is not None for link in nl.links for k in ("replay", "recovery", "crc_flit", "crc_data"))
    for gid, fabric in expect.get("fabric", {}).items():
        f = gpus[gid].fabric
        assert f is not None and f.api == "nvmlDeviceGetGpuFabricInfoV", f
        assert {k: getattr(f, k) for k in fabric} == fabric
    for case in expect["cases"]:
        settings = Settings(expect_nvlink="--gpucheck-expect-nvlink" in case["args"])
        found = {f.subject: f for f in nlvink_findings(nf, settings)}
        assert sorted(found) == sorted(case["nvlink_degraded"]), (case["args"], [f.summary for f in found.values()])
        for gid, evidence in case["nvlink_degraded"].items():
            f = found[gid]
            assert f.severity is Severity.DEGRADED and f.layer == "health" and f.action == "reset-gpu"
            assert {k: f.evidence[k] for k in evidence} == evidence, f.evidence
            gpu = gpus[gid]
            # The finding names the GPU (index, bus id, name) and, where links are down, each of them.
            assert f"GPU {gpu.index} ({gpu.name}, {gpu.pci_bus_id})" in f.summary
            for link in f.evidence["inactive"] if f.evidence["active"] < f.evidence.get("expected_active", 0) else ():
                assert str(link) in f.summary


def nlvink_findings(nf: NvmlFacts, settings: Settings) -> list[Any]:
    return nvlink_rules(nf, settings)


def test_a_card_without_nvlink_is_refused_at_link_0_and_gets_nothing(
    fake_machine: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    """A Tesla T4 (no NVLink): NVML answers NOT_SUPPORTED for link 0 and for the fabric; no link, no finding, and
    the refusal of link 0 is the walk's answer, not an error of the GPU. Also with --gpucheck-expect-nvlink."""
    nf = probe(fake_machine, load(NO_NVLINK), tmp_path)
    (t4,) = nf.gpus
    assert t4.nvlink is not None and t4.nvlink.links == ()
    assert t4.nvlink.ended_by is not None and t4.nvlink.ended_by.name == "NVML_ERROR_NOT_SUPPORTED"
    assert not [e for e in t4.errors if e.function.startswith("nvmlDeviceGetNvLink")]
    assert t4.fabric is None and [e.kind for e in t4.errors if "Fabric" in e.function] == ["not-supported"]
    assert nvlink_rules(nf, Settings()) == [] and nvlink_rules(nf, Settings(expect_nvlink=True)) == []


def test_the_fake_refuses_what_nvml_refuses(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """At the C ABI: link 17 of an H100 NVL answers, 18 and 35 are NVML_ERROR_INVALID_ARGUMENT (2), as a GB200's are
    (NVIDIA/TensorRT-LLM#17060); a T4's link 0 is NVML_ERROR_NOT_SUPPORTED (3); a counter past
    NVML_NVLINK_ERROR_COUNT is INVALID_ARGUMENT; a fabric struct of an unknown version is
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH (25)."""
    scenario = load(SCENARIOS / "nvlink" / "nc80adis-h100-nvl-bridged-12-of-18.json")
    scenario["gpus"].append(load(NO_NVLINK)["gpus"][0])
    fake_machine(scenario)
    code = r"""
import ctypes, json
nvml = ctypes.CDLL("libnvidia-ml.so.1")
assert nvml.nvmlInit_v2() == 0
nvl, t4 = ctypes.c_void_p(), ctypes.c_void_p()
assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(nvl)) == 0
assert nvml.nvmlDeviceGetHandleByIndex_v2(2, ctypes.byref(t4)) == 0
state, count = ctypes.c_uint(9), ctypes.c_ulonglong(9)
out = {f"state{n}": [nvml.nvmlDeviceGetNvLinkState(nvl, n, ctypes.byref(state)), state.value] for n in (0, 4, 17, 18, 35)}
out["t4"] = nvml.nvmlDeviceGetNvLinkState(t4, 0, ctypes.byref(state))
out["counter5"] = nvml.nvmlDeviceGetNvLinkErrorCounter(nvl, 0, 5, ctypes.byref(count))
out["counter18"] = nvml.nvmlDeviceGetNvLinkErrorCounter(nvl, 18, 0, ctypes.byref(count))
info = (ctypes.c_uint * 16)()
info[0] = 0x01000024
out["fabric_v1_version"] = nvml.nvmlDeviceGetGpuFabricInfoV(nvl, info)
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["state0"] == [0, 1] and got["state4"] == [0, 0] and got["state17"] == [0, 0]
    assert got["state18"][0] == got["state35"][0] == 2
    assert got["t4"] == 3 and got["counter5"] == 2 and got["counter18"] == 2 and got["fabric_v1_version"] == 25


# --- the rule's edges, on hand-built facts ---------------------------------------------------------------------------


def nvgpu(index: int, name: str, states: str, fabric: NvmlFabric | None = None, **counts: int) -> NvmlGpu:
    links = tuple(NvLinkState(i, int(c), **(counts if i == 0 else {})) for i, c in enumerate(states))
    return NvmlGpu(index=index, handle_error=None, name=name, pci_bus_id=f"00000000:{0x18 + index:02X}:00.0",
                   nvlink=NvmlNvLink(links), fabric=fabric)


def facts_of_gpus(*gpus: NvmlGpu) -> NvmlFacts:
    return NvmlFacts(library=None, init=None, driver_version="570.133.20", device_count=len(gpus), gpus=gpus)  # type: ignore[arg-type]


def subjects(nf: NvmlFacts, **settings: Any) -> list[str | None]:
    return [f.subject for f in nvlink_rules(nf, Settings(**settings))]


def test_a_bridged_card_with_some_links_up_but_fewer_than_bridged_is_degraded() -> None:
    """An H100 NVL with 8 of its bridged 12: a bridge is fitted (some links trained), four did not come up. The 6
    slots inactive by design are said to be so."""
    eight = "111100111100000000"
    nf = facts_of_gpus(nvgpu(0, "NVIDIA H100 NVL", eight), nvgpu(1, "NVIDIA H100 NVL", "111100111100111100"))
    (f,) = nvlink_rules(nf, Settings())
    assert f.subject == "GPU-0" and f.evidence["active"] == 8 and f.evidence["expected_active"] == 12
    assert f.evidence["inactive_by_design"] == 6 and "Reboot" in f.remedy
    assert "bridge is fitted" in f.evidence["compared_with"] and f.evidence["model"] == "H100 NVL"


def test_a_model_the_data_file_does_not_know_is_compared_with_its_peers() -> None:
    """An H20 (not in data/nvlink_skus.json): 10 of 18 where its peers have 18 is degraded; 0 where they have 18 is
    left alone (it could be an unbridged card) unless --gpucheck-expect-nvlink; the same model alone is left alone."""
    assert nvlink_sku("NVIDIA H20") is None
    full, ten, none = "1" * 18, "1" * 10 + "0" * 8, "0" * 18
    nf = facts_of_gpus(nvgpu(0, "NVIDIA H20", full), nvgpu(1, "NVIDIA H20", ten), nvgpu(2, "NVIDIA H20", none))
    assert subjects(nf) == ["GPU-1"]
    assert subjects(nf, expect_nvlink=True) == ["GPU-1", "GPU-2"]
    f = nvlink_rules(nf, Settings())[0]
    assert f.evidence["expected_active"] == 18 and "GPU 0 (NVIDIA H20" in f.evidence["compared_with"]
    assert subjects(facts_of_gpus(nvgpu(0, "NVIDIA H20", ten))) == []


def test_an_sxm_gpu_with_no_link_up_is_a_fault_only_beside_peers_that_have_theirs(tmp_path: Path) -> None:
    """leptonai/gpud#1085: one B200 of an HGX node with every link inactive while its peers have theirs: degraded.
    The real single-H100 cloud VM (../shared/machines/h100-80gb-driver-580, its /proc/driver/nvidia/params in
    tests/logs/procfs) runs the driver with NvLinkDisable: 1: one SXM GPU alone with no link up is no fault, nor are
    eight all at none (a VM given GPUs of an NVLink board with NVLink off), unless --gpucheck-expect-nvlink, whose
    finding then names the module option."""
    up, down = "1" * 18, "0" * 18
    hgx = facts_of_gpus(*(nvgpu(i, "NVIDIA B200", down if i == 2 else up) for i in range(8)))
    (f,) = nvlink_rules(hgx, Settings())
    assert f.subject == "GPU-2" and "as GPU 0 (NVIDIA B200" in f.evidence["compared_with"]
    root = tmp_path / "root"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    params = Path(__file__).parent / "logs" / "procfs" / "h100-vm-driver-580-params.txt"
    (root / "proc/driver/nvidia/params").write_text(params.read_text())
    assert probe_kernel(1, root).nvlink_disabled is True
    alone = facts_of_gpus(nvgpu(0, "NVIDIA H100 80GB HBM3", down))
    assert nvlink_rules(alone, Settings(), True) == []
    all_off = facts_of_gpus(*(nvgpu(i, "NVIDIA H100 80GB HBM3", down) for i in range(8)))
    assert nvlink_rules(all_off, Settings(), True) == []
    (f,) = nvlink_rules(alone, Settings(expect_nvlink=True), True)
    assert "NvLinkDisable: 1" in f.cause and f.evidence["nvlink_disable_param"] is True


def test_a_gpu_in_mig_mode_has_its_links_left_alone() -> None:
    """With MIG on, NVLink is not used at all (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/deployment-considerations.html;
    https://docs.rapids.ai/deployment/stable/guides/mig: "When using MIG, NVLink and NVSwitch are thus completely
    unavailable"): its links are not judged, its peers' still are."""
    mig = replace(nvgpu(0, "NVIDIA A100-SXM4-80GB", "0" * 12), mig=NvmlMig(1, 1, 7))
    nf = facts_of_gpus(mig, nvgpu(1, "NVIDIA A100-SXM4-80GB", "1" * 12), nvgpu(2, "NVIDIA A100-SXM4-80GB", "1" * 11 + "0"))
    assert subjects(nf) == ["GPU-2"]


def test_asleep_links_are_up_and_counters_alone_are_not_judged() -> None:
    """NVML_NVLINK_STATE_SLEEP (2) is a trained link in a low-power state. Error counters with every link up give no
    finding (one reading has no rate); with a link down they are the finding's evidence."""
    asleep = "2" * 6 + "1" * 12
    nf = facts_of_gpus(nvgpu(0, "NVIDIA H100 80GB HBM3", asleep, replay=500, crc_flit=10_000))
    assert nvlink_rules(nf, Settings()) == []
    nf = facts_of_gpus(nvgpu(0, "NVIDIA H100 80GB HBM3", "0" + "1" * 17, replay=500, recovery=2))
    (f,) = nvlink_rules(nf, Settings())
    assert f.evidence["error_counters"] == {"0": {"replay": 500, "recovery": 2}} and "not judged" in f.cause


@pytest.mark.parametrize(
    ("state", "status", "mask", "says"),
    [
        (2, 0, None, "in progress, not completed"),
        (1, 0, None, "not started, not completed"),
        (3, 23, 0, "NVML_ERROR_INSUFFICIENT_RESOURCES"),
        (3, 0, 0x1, "bandwidth degraded"),
        (3, 0, 0x2, None),  # completed, success, bandwidth not degraded
        (0, 0, None, None),  # not supported
    ],
)
def test_fabric_registration(state: int, status: int, mask: int | None, says: str | None) -> None:
    fabric = NvmlFabric(state, status, {0: "NVML_SUCCESS", 23: "NVML_ERROR_INSUFFICIENT_RESOURCES"}[status], 0,
                        "0" * 32, mask, "nvmlDeviceGetGpuFabricInfoV")
    found = nvlink_rules(facts_of_gpus(nvgpu(0, "NVIDIA GB200", "1" * 18, fabric)), Settings())
    if says is None:
        assert found == []
    else:
        (f,) = found
        assert says in f.summary and "Fabric" in f.remedy and f.evidence["fabric"]["api"] == "nvmlDeviceGetGpuFabricInfoV"


def test_the_data_file_is_consistent_and_cites_its_sources() -> None:
    """Every model has a kind, its healthy counts (0 only for bridge and none), sources; the catalog id exists."""
    rows = data("nvlink_skus.json")["models"]
    assert rows and "https://www.nvidia.com/en-us/data-center/nvlink/" in data("nvlink_skus.json")["_source"]
    for row in rows:
        assert row["kind"] in ("fixed", "bridge", "none") and row["sources"] and row["names"], row["model"]
        assert (0 in row["healthy"]) == (row["kind"] != "fixed"), row["model"]
        assert row["slots"] is None or row["slots"] >= max(row["healthy"]), row["model"]
    cause = catalog().causes["nvlink-degraded"]
    assert cause.layer == "health" and cause.action == "reset-gpu"


def test_scaling_findings_name_the_degraded_nvlinks_as_their_explanation() -> None:
    """The performance layer: poor scaling across GPUs whose NVLinks are down names that finding (the rule reads
    NVML's findings over the same facts). Scaling figures hand-made: 1 GPU at 100 ms, 2 at 1.1x (55%)."""
    nf = facts_of_gpus(nvgpu(0, "NVIDIA H100 80GB HBM3", "1" * 18), nvgpu(1, "NVIDIA H100 80GB HBM3", "1" * 14 + "0" * 4))
    nf = replace(nf, init=SimpleNamespace(code=0))  # type: ignore[arg-type]

    def run(n: int, speedup: float) -> BenchmarkRun:
        info = {"method": "towers", "step_s": 0.1, "speedup": speedup, "efficiency": speedup / n, "per_device_batch": 64}
        devices = tuple(f"/GPU:{i}" for i in range(n))
        return BenchmarkRun(f"test_scaling[towers-GPU-x{n}]", "scaling", f"towers-GPU-x{n}", devices, True,
                            extra_info=info)

    pf = PerformanceFacts("2.21.0", ("/GPU:0", "/GPU:1"), (run(1, 1.0), run(2, 1.1)), finished=True)
    outcome = SimpleNamespace(facts=pf, exit=None)
    facts: Any = SimpleNamespace(
        nvml=SimpleNamespace(facts=nf), cuda=SimpleNamespace(facts=None), frameworks={},
        hardware=None, kernel=SimpleNamespace(nvlink_disabled=False), units={FIELD: outcome},
        unit=lambda name: {FIELD: outcome}.get(name),
    )
    (f,) = [f for f in perf_rules.performance_rules(facts, Settings()) if f.id == "scaling-inefficient"]
    assert [e["id"] for e in f.evidence["explained_by"]] == ["nvlink-degraded"]
    assert "14 of its 18 NVLinks are active" in f.cause


def test_pytest_gpucheck_fails_the_gpus_nvlink_check_alone(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """The real command line on the DGX H100 with GPU 3 at 14 of 18: test_nvlink_links[GPU-3] fails with
    nvlink-degraded naming its links, the seven others pass, and the health layer is degraded, not broken."""
    fake_machine(load(SCENARIOS / "nvlink" / "dgx-h100-gpu3-four-links-down.json"))
    run = run_gpucheck("--gpucheck-framework=none", "-rf")
    checks = {c["nodeid"].split("::")[-1]: c for c in run.report["checks"]}
    links = {n: c["outcome"] for n, c in checks.items() if n.startswith("test_nvlink_links[")}
    assert links == {f"test_nvlink_links[GPU-{i}]": "failed" if i == 3 else "passed" for i in range(8)}, links
    assert checks["test_nvlink_links[GPU-3]"]["finding_ids"] == ["nvlink-degraded"]
    (f,) = [f for f in run.report["findings"] if f["id"] == "nvlink-degraded"]
    assert f["subject"] == "GPU-3" and f["evidence"]["inactive"] == [2, 7, 11, 16] and f["action"] == "reset-gpu"
    # A degraded verdict names its root cause too: the lowest degraded finding (DESIGN.md, the report contract).
    assert run.report["verdict"] == "degraded" and run.report["root_cause"]["id"] == "nvlink-degraded"
    assert run.report["root_cause"]["subject"] == "GPU-3"
    assert {s["layer"]: s["state"] for s in run.report["layers"]}["health"] == "degraded"
    run.result.stdout.fnmatch_lines([
        "gpucheck:   GPU 3: NVIDIA H100 80GB HBM3, 00000000:5D:00.0, cc 9.0, *, PCIe Gen1 x16, NVLink 14 of 18 active, 34 C",
        "root cause: nvlink-degraded (health): GPU 3 (NVIDIA H100 80GB HBM3, 00000000:5D:00.0): 14 of its 18 "
        "NVLinks are active (inactive: links 2, 7, 11, 16).",
        "FAILED checks_nvml.py::test_nvlink_links[[]GPU-3[]] - Failed: nvlink-degraded*",
    ])


def test_the_kernel_logs_xid_74_and_the_links_down_now_are_one_finding_and_a_note(
    fake_machine: Callable[[dict[str, Any]], Path],
) -> None:
    """NVIDIA's own Xid 74 line (NVSentinel#516: "NVLink: fatal error detected on link 14") in this boot's kernel log,
    and NVML showing link 14 of that GPU inactive now: one nvlink-degraded, NVML's (which links are down now), and
    the log's record as a note of when (xid-recorded), not two findings of one fault that a fleet would count twice.
    The diagnosis in-process, its probes in children, no TensorFlow."""
    from gpucheck.blocking import Question, decide
    from gpucheck.diagnosis import Diagnosis
    from tests.test_kernel_log import kmsg_text, machine

    scenario = machine(["0003:00:00.0"], kmsg_text("xid74-nvsentinel-516.log"))
    scenario["gpus"][0]["nvlink"] = {"state": "1" * 14 + "0" + "1" * 3}
    fake_machine(scenario)
    result = Diagnosis(Settings(framework="none")).result()
    found = sorted((f.evidence["source"], f.subject, f.severity.value) for f in result.findings if f.id == "nvlink-degraded")
    assert found == [("NVML", "GPU-0", "degraded")], found
    nvml_one = next(f for f in result.findings if f.id == "nvlink-degraded")
    assert nvml_one.evidence["inactive"] == [14]
    note = next(f for f in result.findings if f.id == "xid-recorded" and f.subject == "GPU-0")
    assert note.evidence["xids"][0]["xid"] == 74 and note.severity.value == "info"
    decision = decide(result, Question("health", ("nvlink-degraded",), subject="GPU-0"))
    assert decision.outcome == "failed" and len(decision.faults) == 1


def test_a_driver_that_refuses_the_fabric_structs_version_is_read_through_the_older_call(
    fake_machine: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    """The GB200 tray of nd-gb200-fabric-insufficient-resources.json on a driver whose nvmlDeviceGetGpuFabricInfoV
    answers NVML_ERROR_ARGUMENT_VERSION_MISMATCH (it knows another version of the struct): the older
    nvmlDeviceGetGpuFabricInfo still gives state, status and clique (no health mask), and GPU 2 is still found."""
    scenario = load(SCENARIOS / "nvlink" / "nd-gb200-fabric-insufficient-resources.json")
    scenario["nvml"] = {"fn": {"nvmlDeviceGetGpuFabricInfoV": 25}}
    nf = probe(fake_machine, scenario, tmp_path)
    fabric = by_gpu(nf)["GPU-2"].fabric
    assert fabric is not None and fabric.api == "nvmlDeviceGetGpuFabricInfo" and fabric.health_mask is None
    assert (fabric.state, fabric.status_name, fabric.clique_id) == (3, "NVML_ERROR_INSUFFICIENT_RESOURCES", 0)
    assert [f.subject for f in nvlink_rules(nf, Settings())] == ["GPU-2"]


def test_a_bridge_card_with_no_link_up_is_a_note_that_names_the_setting(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun], tmp_path: Path
) -> None:
    """Issue 35, point 5: the two H100 NVL of azhpc-images#443 with no link up. One reading cannot tell an unbridged card
    from a bridged one whose links did not train, so it is an info note naming --gpucheck-expect-nvlink, never a fault
    by itself: the verdict stays accelerated (pytest --gpucheck and gpucheck doctor alike); with the setting, the same
    machine is nvlink-degraded and the note is gone (one id, one cause)."""
    fake_machine(load(SCENARIOS / "nvlink" / "nc80adis-h100-nvl-no-active-link.json"))
    run = run_gpucheck("--gpucheck-framework=none")
    notes = {f["subject"]: f for f in run.report["findings"] if f["id"] == "nvlink-bridge-unconfirmed"}
    assert sorted(notes) == ["GPU-0", "GPU-1"], run.finding_ids
    note = notes["GPU-0"]
    assert note["severity"] == "info" and note["action"] == "none" and "--gpucheck-expect-nvlink" in note["remedy"]
    assert "GPUCHECK_EXPECT_NVLINK" in note["remedy"] and note["evidence"]["active_when_bridged"] == 12
    assert run.report["verdict"] == "accelerated" and run.report["root_cause"] is None, run.finding_ids
    assert "nvlink-degraded" not in run.finding_ids
    checks = {c["nodeid"].split("::")[-1]: c for c in run.report["checks"]}
    assert checks["test_nvlink_links[GPU-0]"] == {**checks["test_nvlink_links[GPU-0]"], "outcome": "passed",
                                                 "finding_ids": ["nvlink-bridge-unconfirmed"]}
    done = subprocess.run([sys.executable, "-m", "gpucheck.cli", "doctor", "--framework=none"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("gpucheck doctor: accelerated (usable)"), done.stdout
    expected = run_gpucheck("--gpucheck-framework=none", "--gpucheck-expect-nvlink")
    assert "nvlink-bridge-unconfirmed" not in expected.finding_ids
    assert expected.report["root_cause"]["id"] == "nvlink-degraded" and expected.report["verdict"] == "degraded"
