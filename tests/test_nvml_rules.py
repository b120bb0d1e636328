"""The NVML rules as pure functions on hand-built facts: the edges the scenario table does not spell
out one by one (idle vs loaded links, which clock reasons are faults, thresholds, when P2P matters).
In addition to tests/test_nvml_scenarios.py, which runs the probe against the fake library."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from gpucheck.facts import (
    CudaCall,
    CudaDevice,
    CudaDriverFacts,
    LibraryLoad,
    NvmlEcc,
    NvmlFacts,
    NvmlGpu,
    NvmlLink,
    NvmlMemory,
    NvmlMig,
    NvmlPcie,
    NvmlProcess,
    RemappedRows,
)
from gpucheck.model import Severity
from gpucheck.rules import nvml
from gpucheck.settings import Settings, memory_bytes, parse_gpu_count, parse_memory

GiB = 1024**3


def gpu(index: int = 0, **fields: Any) -> NvmlGpu:
    base = NvmlGpu(
        index=index,
        handle_error=None,
        name="NVIDIA A100 80GB PCIe",
        pci_bus_id=f"00000000:{0x10 + index:02X}:00.0",
        memory=NvmlMemory(total=80 * GiB, free=79 * GiB, used=1 * GiB, reserved=0, api="nvmlDeviceGetMemoryInfo_v2"),
        processes=(),
        compute_mode=0,
        clocks_event_reasons=0x1,
        utilization_gpu=0,
        pcie=NvmlPcie(gen=4, gen_max=4, gpu_gen_max=4, width=16, width_max=16),
    )
    return replace(base, **fields)


def nvml_facts(gpus: list[NvmlGpu], links: list[NvmlLink] | None = None) -> NvmlFacts:
    return NvmlFacts(
        library=LibraryLoad("libnvidia-ml.so.1", True, "/usr/lib/libnvidia-ml.so.550.54.15", None),
        init=CudaCall("nvmlInitWithFlags", 0, "NVML_SUCCESS", None),
        driver_version="550.54.15",
        device_count=len(gpus),
        gpus=tuple(gpus),
        links=tuple(links or ()),
    )


# --- PCIe: no false alarms ------------------------------------------------------------------


def test_idle_link_downshifted_to_gen1_is_not_a_fault() -> None:
    idle = gpu(pcie=NvmlPcie(gen=1, gen_max=4, gpu_gen_max=4, width=16, width_max=16), utilization_gpu=0)
    assert nvml._pcie(idle) == []


def test_busy_gpu_with_idle_reason_is_not_under_load() -> None:
    g = gpu(pcie=NvmlPcie(1, 4, 4, 16, 16), utilization_gpu=80, clocks_event_reasons=0x1)
    assert nvml._pcie(g) == []


def test_card_limited_by_its_slot_is_not_a_fault() -> None:
    # A Gen4 card in a Gen3 slot: NVML's max is the system's (3), the GPU's own max (4) is only evidence.
    g = gpu(pcie=NvmlPcie(gen=3, gen_max=3, gpu_gen_max=4, width=16, width_max=16), utilization_gpu=99, clocks_event_reasons=0)
    assert nvml._pcie(g) == []


def test_width_below_max_is_a_fault_even_at_idle() -> None:
    (f,) = nvml._pcie(gpu(pcie=NvmlPcie(1, 4, 4, 8, 16)))
    assert f.id == "pcie-link-degraded" and f.subject == "GPU-0" and "x8 of x16" in f.summary
    assert f.severity is Severity.DEGRADED


def test_generation_below_max_under_load_is_a_fault() -> None:
    (f,) = nvml._pcie(gpu(pcie=NvmlPcie(2, 4, 4, 16, 16), utilization_gpu=95, clocks_event_reasons=0))
    assert "Gen2 of Gen4 while 95% busy" in f.summary


# --- clocks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0x0, 0x1, 0x2, 0x4, 0x10, 0x100, 0x1 | 0x2 | 0x4])
def test_normal_clock_reasons_are_not_faults(mask: int) -> None:
    assert nvml._clocks(gpu(clocks_event_reasons=mask)) == []


@pytest.mark.parametrize(
    ("mask", "named"),
    [
        (0x20, "software thermal slowdown"),
        (0x40, "hardware thermal slowdown"),
        (0x80, "hardware power brake slowdown"),
        (0x8, "hardware slowdown"),
    ],
)
def test_thermal_power_brake_and_hw_slowdown_are_faults(mask: int, named: str) -> None:
    (f,) = nvml._clocks(gpu(clocks_event_reasons=mask | 0x4, temperature_c=91))
    assert f.id == "clocks-throttled" and named in f.summary
    assert "software power cap" not in f.summary  # named in the evidence, not as a fault
    assert "software power cap" in f.evidence["active"]


# --- memory ---------------------------------------------------------------------------------


def test_memory_threshold_percent_and_absolute() -> None:
    assert memory_bytes(parse_memory("10%"), 80 * GiB) == 8 * GiB
    assert memory_bytes(parse_memory("2GiB"), 80 * GiB) == 2 * GiB
    assert memory_bytes(parse_memory("512MiB"), 80 * GiB) == 512 * 1024**2
    for bad in ("lots", "-2", "0%", "100%", "0", ""):
        with pytest.raises(ValueError):
            parse_memory(bad)
    assert parse_gpu_count("8") == 8
    for bad in ("-2", "0", "two"):
        with pytest.raises(ValueError):
            parse_gpu_count(bad)


def test_memory_finding_names_holders_largest_first_and_is_degraded_when_another_gpu_has_room() -> None:
    full = gpu(
        0,
        memory=NvmlMemory(80 * GiB, 3 * GiB, 77 * GiB, None, "nvmlDeviceGetMemoryInfo"),
        processes=(NvmlProcess(11, 2 * GiB, None), NvmlProcess(10, 75 * GiB, "python3")),
    )
    free = gpu(1)
    (f,) = nvml._memory((full, free), Settings())
    assert f.subject == "GPU-0" and f.severity is Severity.DEGRADED
    assert "pid 10 python3 (75.0 GiB), pid 11 (name not readable) (2.0 GiB)" in f.summary
    (only,) = nvml._memory((full,), Settings())
    assert only.severity is Severity.BLOCKER
    assert nvml._memory((full,), Settings(min_free_memory="2GiB")) == []


def test_memory_of_mig_enabled_and_lost_gpus_is_not_judged() -> None:
    mig = gpu(memory=NvmlMemory(80 * GiB, 0, 80 * GiB, 0, "v2"), mig=NvmlMig(1, 1, 7, ()))
    assert nvml._memory((mig,), Settings()) == []


# --- ECC ------------------------------------------------------------------------------------


def test_aggregate_ecc_history_alone_is_not_a_fault() -> None:
    g = gpu(ecc=NvmlEcc(True, True, 0, 12), remapped_rows=RemappedRows(3, 2, False, False))
    assert nvml.ecc_findings(g) == []


def test_row_remap_failure_is_a_blocker_asking_for_rma() -> None:
    (f,) = nvml.ecc_findings(gpu(remapped_rows=RemappedRows(0, 512, False, True)))
    assert f.severity is Severity.BLOCKER and "RMA" in f.remedy


# --- P2P: only where GPUs are meant to cooperate ---------------------------------------------


def _pcie_pair(read: int, nvlink: int = 5) -> NvmlLink:
    return NvmlLink(0, 1, p2p_read=read, p2p_nvlink=nvlink, topology=50)


def test_p2p_missing_between_independent_gpus_is_a_note_not_a_fault() -> None:
    """Issue 12, defect 8: two GPUs TensorFlow uses without P2P are named, with what it costs; not as the
    fault p2p-unavailable (one id, one cause, at one severity), since nothing says they must cooperate."""
    nf = nvml_facts([gpu(0), gpu(1)], [_pcie_pair(2)])
    (f,) = nvml._p2p(nf, Settings())
    assert f.id == "p2p-unavailable-note" and f.severity is Severity.INFO and not f.is_fault
    assert f.layer == "health"
    assert "every all-reduce of MirroredStrategy" in f.summary and "host memory" in f.summary
    assert "GeForce" in f.remedy and "--gpucheck-expect-gpus=2" in f.remedy
    assert f.evidence["gpus_used"] == [0, 1]
    assert f.evidence["pairs"][0]["p2p_read"] == "GPU not supported"


def test_p2p_note_only_between_gpus_tensorflow_uses() -> None:
    """CUDA_VISIBLE_DEVICES=0 on a two-GPU machine: TensorFlow uses one GPU, so P2P costs it nothing."""
    nf = nvml_facts([gpu(0), gpu(1), gpu(2)], [_pcie_pair(2), NvmlLink(0, 2, 0, 5, 10), NvmlLink(1, 2, 2, 5, 50)])
    assert nvml._p2p(nf, Settings(), (frozenset({0}), "the GPUs the CUDA driver enumerates")) == []
    assert nvml._p2p(nf, Settings(), (frozenset({0, 2}), "the GPUs the CUDA driver enumerates")) == []
    (f,) = nvml._p2p(nf, Settings(), (frozenset({0, 1}), "the GPUs TensorFlow registered"))
    assert [p["gpus"] for p in f.evidence["pairs"]] == [[0, 1]]
    assert f.evidence["gpus_used_from"] == "the GPUs TensorFlow registered"
    assert nvml._p2p(nvml_facts([gpu(0)]), Settings()) == []


def test_p2p_note_leaves_out_unusable_gpus() -> None:
    prohibited = gpu(1, compute_mode=2)
    nf = nvml_facts([gpu(0), prohibited], [_pcie_pair(2)])
    assert nvml._p2p(nf, Settings()) == []


def test_framework_gpus_prefers_what_cuda_enumerates_over_nvml() -> None:
    """NVML lists every GPU whatever CUDA_VISIBLE_DEVICES says; the CUDA driver enumerates those left."""
    nf = nvml_facts([gpu(0), gpu(1)], [_pcie_pair(2)])
    dev = CudaDevice(0, "NVIDIA A100 80GB PCIe", 8, 0, 80 * GiB, "00000000:11:00.0", None, None)
    cuda = CudaDriverFacts(nf.library, CudaCall("cuInit", 0, "CUDA_SUCCESS", None), 12040, 1, devices=(dev,))
    facts: Any = SimpleNamespace(
        nvml=SimpleNamespace(facts=nf), cuda=SimpleNamespace(facts=cuda), frameworks={}
    )
    assert nvml.framework_gpus(facts) == (frozenset({1}), "the GPUs the CUDA driver enumerates (CUDA_VISIBLE_DEVICES applied)")
    facts.cuda = SimpleNamespace(facts=None)
    assert nvml.framework_gpus(facts) == (None, "the GPUs NVML lists")


def test_p2p_missing_where_the_user_expects_gpus_to_cooperate() -> None:
    nf = nvml_facts([gpu(0), gpu(1)], [_pcie_pair(1)])
    (f,) = nvml._p2p(nf, Settings(expect_gpus=2))
    assert f.id == "p2p-unavailable" and f.severity is Severity.DEGRADED and "ACS" in f.remedy
    assert f.evidence["pairs"] == [{"gpus": [0, 1], "p2p_read": "chipset not supported", "nvlink": "not supported",
                                    "topology": "across CPU sockets (SMP interconnect)"}]


def test_nvlink_machine_is_meant_to_cooperate() -> None:
    links = [NvmlLink(0, 1, 0, 0, 40), NvmlLink(0, 2, 3, 5, 50), NvmlLink(1, 2, 3, 5, 50)]
    nf = nvml_facts([gpu(0), gpu(1), gpu(2)], links)
    (f,) = nvml._p2p(nf, Settings())
    assert f.evidence["why_cooperating"] == "the GPUs are linked by NVLink"
    assert [p["gpus"] for p in f.evidence["pairs"]] == [[0, 2], [1, 2]]


# --- count ----------------------------------------------------------------------------------


def test_count_mismatch_lists_the_gpus_seen() -> None:
    facts: Any = SimpleNamespace(nvml=SimpleNamespace(facts=nvml_facts([gpu(0), gpu(1)])))
    settings = Settings(expect_gpus=4, sources=(("expect-gpus", "--gpucheck-expect-gpus"),))
    (f,) = nvml._count(facts, settings)
    assert f.id == "gpu-count-mismatch" and f.layer == "visibility" and f.severity is Severity.BLOCKER
    assert "NVML shows 2 GPU(s): 0, NVIDIA A100 80GB PCIe, 00000000:10:00.0; 1," in f.cause
    assert nvml._count(facts, Settings(expect_gpus=2)) == []
    (more,) = nvml._count(facts, Settings(expect_gpus=1))
    assert more.severity is Severity.DEGRADED
