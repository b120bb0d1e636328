"""Checks of what NVML says: GPU count, each GPU's reachability, MIG and compute mode, memory
headroom and health, NVLinks, peer-to-peer.

Per-GPU questions are parametrized by the GPUs NVML lists (``test_memory_headroom[GPU-0]``); they
get the GPU as ``subject``, so a finding about GPU 1 fails only ``[GPU-1]``. Without a GPU list
(no GPU, NVML missing or hung) each question stays one item that is blocked, or skipped as not
checked.
"""

from __future__ import annotations

import pytest

from gpucheck.blocking import asks
from gpucheck.session import Answer, current


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gpu" not in metafunc.fixturenames:
        return
    session = current(metafunc.config)
    ids = list(session.gpus()) if session is not None else []
    if ids:
        metafunc.parametrize("gpu", ids, ids=ids)


@pytest.fixture
def gpu() -> str | None:
    """The GPU a per-GPU check is about ("GPU-0"); None when NVML lists none."""
    return None


@asks("visibility", ("gpu-count-mismatch",))
def test_gpu_count(gpucheck_answer: Answer) -> None:
    """Does the machine show as many GPUs as --gpucheck-expect-gpus says it should?"""
    gpucheck_answer.check()


@asks("visibility", ("gpu-lost",))
def test_gpu_reachable(gpucheck_answer: Answer, gpu: str | None) -> None:
    """Does the GPU answer (not fallen off the bus, not lost)?"""
    gpucheck_answer.check()


@asks("visibility", ("mig-unaddressable",), blocked_by_ids=("gpu-lost",))
def test_mig_addressable(gpucheck_answer: Answer, gpu: str | None) -> None:
    """With MIG on, is there a MIG instance CUDA can use?"""
    gpucheck_answer.check()


@asks("visibility", ("compute-mode-prohibited",), blocked_by_ids=("gpu-lost",))
def test_compute_mode_allows_work(gpucheck_answer: Answer, gpu: str | None) -> None:
    """Does the compute mode let this process create a CUDA context on the GPU?"""
    gpucheck_answer.check()


@asks("resources", ("gpu-memory-exhausted",))
def test_memory_headroom(gpucheck_answer: Answer, gpu: str | None) -> None:
    """Is at least --gpucheck-min-free-memory free on the GPU?"""
    gpucheck_answer.check()


@asks("health", ("ecc-errors",))
def test_memory_healthy(gpucheck_answer: Answer, gpu: str | None) -> None:
    """No uncorrectable ECC errors, no pending page retirement or row remap, no failed remap?"""
    gpucheck_answer.check()


@asks("health", ("clocks-throttled",))
def test_clocks_not_throttled(gpucheck_answer: Answer, gpu: str | None) -> None:
    """Is the GPU free of thermal, power-brake and hardware slowdown?"""
    gpucheck_answer.check()


@asks("health", ("pcie-link-degraded",))
def test_pcie_link_at_max(gpucheck_answer: Answer, gpu: str | None) -> None:
    """Does the PCIe link run at its full width (and, under load, its full generation)?"""
    gpucheck_answer.check()


@asks("health", ("nvlink-degraded", "nvlink-bridge-unconfirmed"))
def test_nvlink_links(gpucheck_answer: Answer, gpu: str | None) -> None:
    """Are as many of the GPU's NVLinks active as its model has when healthy, and is it registered with the NVLink
    fabric where there is one? (The kernel log's Xid 74 and Blackwell's Xid 144-150 for this GPU answer it too; a
    bridge-capable card with no link up is a note that names --gpucheck-expect-nvlink.)"""
    gpucheck_answer.check()


@asks("health", ("p2p-unavailable", "p2p-unavailable-note"))
def test_peer_to_peer(gpucheck_answer: Answer) -> None:
    """Where GPUs are meant to work together, can they reach each other peer-to-peer?"""
    gpucheck_answer.check()
