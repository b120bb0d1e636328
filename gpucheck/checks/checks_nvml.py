"""Checks of what NVML says: GPU count, each GPU's reachability, MIG and compute mode, memory
headroom and health, peer-to-peer.

Per-GPU questions are parametrized by the GPUs NVML lists (``test_memory_headroom[GPU-0]``); they
get the GPU as ``subject``, so a finding about GPU 1 fails only ``[GPU-1]``. Without a GPU list
(no GPU, NVML missing or hung) each question stays one item that is blocked, or skipped as not
checked.
"""

from __future__ import annotations

import pytest

from gpucheck.diagnosis import Result
from gpucheck.rules.nvml import answered
from gpucheck.session import Check, current


def gpu_ids(result: Result) -> list[str]:
    if result.facts is None:
        return []
    nf = answered(result.facts)
    return [g.id for g in nf.gpus] if nf is not None else []


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gpu" not in metafunc.fixturenames:
        return
    session = current(metafunc.config)
    ids = gpu_ids(session.result()) if session is not None else []
    if ids:
        metafunc.parametrize("gpu", ids, ids=ids)


@pytest.fixture
def gpu() -> str | None:
    """The GPU a per-GPU check is about ("GPU-0"); None when NVML lists none."""
    return None


def _nvml_unchecked(check: Check) -> str | None:
    facts = check.result.facts
    if facts is not None and answered(facts) is not None:
        return None
    return "NVML did not answer, so there is no GPU inventory to judge"


def test_gpu_count(gpucheck_check: Check) -> None:
    """Does the machine show as many GPUs as --gpucheck-expect-gpus says it should?"""
    gpucheck_check.verify(
        "visibility",
        ("gpu-count-mismatch",),
        unchecked=None if gpucheck_check.settings.expect_gpus is not None else "--gpucheck-expect-gpus not given",
    )


def test_gpu_reachable(gpucheck_check: Check, gpu: str | None) -> None:
    """Does the GPU answer (not fallen off the bus, not lost)?"""
    gpucheck_check.verify("visibility", ("gpu-lost",), subject=gpu, unchecked=_nvml_unchecked(gpucheck_check))


def test_mig_addressable(gpucheck_check: Check, gpu: str | None) -> None:
    """With MIG on, is there a MIG instance CUDA can use?"""
    gpucheck_check.verify(
        "visibility", ("mig-unaddressable",), requires=("gpu-lost",), subject=gpu,
        unchecked=_nvml_unchecked(gpucheck_check),
    )


def test_compute_mode_allows_work(gpucheck_check: Check, gpu: str | None) -> None:
    """Does the compute mode let this process create a CUDA context on the GPU?"""
    gpucheck_check.verify(
        "visibility", ("compute-mode-prohibited",), requires=("gpu-lost",), subject=gpu,
        unchecked=_nvml_unchecked(gpucheck_check),
    )


def test_memory_headroom(gpucheck_check: Check, gpu: str | None) -> None:
    """Is at least --gpucheck-min-free-memory free on the GPU?"""
    gpucheck_check.verify(
        "resources", ("gpu-memory-exhausted",), subject=gpu, unchecked=_nvml_unchecked(gpucheck_check)
    )


def test_memory_healthy(gpucheck_check: Check, gpu: str | None) -> None:
    """No uncorrectable ECC errors, no pending page retirement or row remap, no failed remap?"""
    gpucheck_check.verify("health", ("ecc-errors",), subject=gpu, unchecked=_nvml_unchecked(gpucheck_check))


def test_clocks_not_throttled(gpucheck_check: Check, gpu: str | None) -> None:
    """Is the GPU free of thermal, power-brake and hardware slowdown?"""
    gpucheck_check.verify("health", ("clocks-throttled",), subject=gpu, unchecked=_nvml_unchecked(gpucheck_check))


def test_pcie_link_at_max(gpucheck_check: Check, gpu: str | None) -> None:
    """Does the PCIe link run at its full width (and, under load, its full generation)?"""
    gpucheck_check.verify("health", ("pcie-link-degraded",), subject=gpu, unchecked=_nvml_unchecked(gpucheck_check))


def test_peer_to_peer(gpucheck_check: Check) -> None:
    """Where GPUs are meant to work together, can they reach each other peer-to-peer?"""
    gpucheck_check.verify(
        "health", ("p2p-unavailable", "p2p-unavailable-note"), unchecked=_nvml_unchecked(gpucheck_check)
    )
