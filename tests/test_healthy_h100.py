"""Issue 11: a healthy GPU reads healthy. The real H100 of ../shared/machines/h100-80gb-driver-580 (driver
580.159.04, TensorFlow 2.21 with its CUDA 12 wheels) as fakes (tests/scenarios/cuda/h100-80gb-healthy.json),
through the full ``pytest --gpucheck`` path with the real TensorFlow: every layer ``ok`` except what needs
real kernel results (the fakes accept kernels and run none, so numerics must catch that, and only that).

On the real machine two runs of three said ``memory-config-failed``: the framework probe held ~78 GB (its
CPU split had silently turned memory growth off) while three more TensorFlow processes probed memory
settings in the last gigabyte. The fakes' memory is shared across processes like a real GPU's (what one
process reserves the others no longer see as free, tests/fakes/fakeledger.h), so that race can happen
here: a process holding the GPU while gpucheck probes memory settings is diagnosed as what it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun, SharedRuns, tensorflow_facts
from tests import fakelibs

H100 = json.loads((Path(__file__).parent / "scenarios/cuda/h100-80gb-healthy.json").read_text())
MiB = 1 << 20


def faults(run: GpucheckRun) -> list[tuple[str, str | None]]:
    return [(f["id"], f.get("subject")) for f in run.report["findings"] if f["severity"] != "info"]


#: The real machine's XLA used the CUDA toolkit in /usr/local/cuda (ptxas on PATH, libdevice); the scenario
#: links the host view's /usr/local/cuda to this machine's. Without one here, XLA's toolchain is missing.
NO_TOOLKIT = fakelibs.missing_link_targets(H100["host"])


def assert_healthy_but_for_numerics(run: GpucheckRun) -> None:
    """The verdict a healthy H100 gets on fakes that run no kernel: only numerics fail."""
    if NO_TOOLKIT:
        pytest.skip(f"this machine has no CUDA toolkit for XLA ({', '.join(NO_TOOLKIT)}): the real H100's is modelled on it")
    out = run.result.stdout.str()
    assert run.root_cause == "numerical-mismatch", (faults(run), out)
    assert {fid for fid, _subject in faults(run)} == {"numerical-mismatch"}, faults(run)
    states = {entry["layer"]: entry["state"] for entry in run.report["layers"]}
    assert states == {
        "hardware": "ok", "kernel": "ok", "driver": "ok", "visibility": "ok", "compatibility": "ok",
        "libraries": "ok", "framework": "ok", "placement": "broken", "resources": "ok", "health": "ok",
        "performance": "not checked", "cluster": "not checked",
    }, states
    checks = {c["nodeid"].split("::")[-1]: c["outcome"] for c in run.report["checks"]}
    failed = sorted(name for name, outcome in checks.items() if outcome == "failed")
    assert failed == ["test_gpu_results_match_cpu_reference"], failed
    assert checks["test_memory_settings_apply"] == "passed", checks


def memory_facts(run: GpucheckRun) -> tuple[dict[str, Any], dict[str, Any]]:
    tf = tensorflow_facts(run.report)
    growth = run.report["facts"]["memory_growth"]["facts"]
    return tf, growth


def test_healthy_h100_reads_healthy_except_for_kernel_results(gpucheck_shared: SharedRuns) -> None:
    """The scenario's plain run, shared with tests/test_cuda_scenarios.py (``test_scenario[h100-80gb-healthy]``)."""
    run = gpucheck_shared.run("-rs", scenario=H100)
    assert_healthy_but_for_numerics(run)
    assert run.result.ret == 1
    # TensorFlow registers the one GPU with ~79 GiB: the memory-growth process creates it with what is free,
    # 78752 MB as on the real machine alone, less what the main TensorFlow process (started at the same
    # moment) holds by then: at most its 1024 MiB limit and its CUDA context.
    tf, growth = memory_facts(run)
    assert [g["details"]["device_name"] for g in tf["gpus"]] == ["NVIDIA H100 80GB HBM3"]
    [whole] = growth["memory"]
    context_mb = H100["gpus"][0]["context_memory"] // MiB
    assert 78752 - 1024 - context_mb - 1 <= whole["tf_limit_mb"] <= 78752, whole
    # Memory settings judged by what happened: the main TensorFlow process got the memory_limit it asked
    # for (TensorFlow's "Created device ... with 1024 MB"), the growth process holds about what it allocated.
    [main] = tf["memory"]
    assert tf["memory_limit_mb"] == 1024 and main["tf_limit_mb"] == 1024, main
    # NVML counts a process's CUDA context too (527 MiB on the real H100: the scenario's context_memory).
    assert main["process_used_mb"] is not None and main["process_used_mb"] <= 1024 + context_mb + 64, main
    assert growth["applied"] is True and growth["not_checked"] is None, growth
    assert whole["process_used_mb"] is not None and whole["process_used_mb"] < context_mb + 256, whole
    # TensorFlow 2.21 drops memory growth once a logical device is configured: a note of its own.
    dropped = run.finding("memory-growth-dropped")
    assert dropped["severity"] == "info" and tf["growth_kept_with_logical_devices"] is False
    # Did not hang: the TensorFlow child ended by itself within the run's time limit (its duration is a figure,
    # not a speed target; no step allocates past a limit on purpose, which would cost TensorFlow's 10 s retry).
    placement = run.report["facts"]["placement"]["exit"]
    assert placement["status"] == "ok", placement
    assert placement["duration_s"] < run.report["settings"]["timeout"]["value"], placement


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """Both cores of this machine busy while gpucheck runs (the race needs a loaded machine to show)."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


@pytest.mark.usefixtures("cpu_load")
def test_healthy_h100_reads_the_same_over_repeated_runs_on_a_loaded_machine(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """The false alarm was a race: two healthy runs of three raised it on the real H100. Three runs here,
    with every core busy, read the same. The slowest test of the suite, on purpose: three diagnoses of two
    TensorFlow processes each, while a busy loop per core takes the CPU they would have had (the race needs a
    loaded machine, and so does an xdist worker beside it)."""
    fake_machine(H100)
    for _ in range(3):
        run = run_gpucheck()
        assert_healthy_but_for_numerics(run)
        _tf, growth = memory_facts(run)
        assert growth["applied"] is True, growth


def test_a_process_holding_the_gpu_is_named_not_blamed_on_memory_settings(
    fake_machine: Callable[[dict[str, Any]], Path],
    run_gpucheck: Callable[..., GpucheckRun],
    fake_lib_cache: Path,
) -> None:
    """The original failure mode: a process holds nearly all of the GPU (as gpucheck's own framework probe
    did, 78752 MB) while gpucheck probes memory settings. Now: gpu-memory-exhausted naming that process,
    the memory settings judged applied or not checked, never memory-config-failed."""
    if NO_TOOLKIT:
        pytest.skip(f"this machine has no CUDA toolkit for XLA ({', '.join(NO_TOOLKIT)}): the real H100's is modelled on it")
    fake_machine(H100)
    # All of the GPU but what the next process's CUDA context and about 1 GiB need (a new process sees
    # what is left less its own context).
    holder = fakelibs.hold_gpu_memory(0, leave=1024 * MiB + H100["gpus"][0]["context_memory"], cache_dir=fake_lib_cache)
    try:
        run = run_gpucheck()
    finally:
        holder.kill()
        holder.wait()
    assert "memory-config-failed" not in run.finding_ids, run.finding("memory-config-failed")
    exhausted = run.finding("gpu-memory-exhausted")
    assert str(holder.pid) in json.dumps(exhausted), exhausted
    tf, growth = memory_facts(run)
    # The main TensorFlow process bounded itself to a quarter of what was free.
    assert tf["memory_limit_mb"] is not None and tf["memory_limit_mb"] < 1024, tf["memory_limit_mb"]
    assert growth["applied"] is True or growth["not_checked"], growth
    # Everything else is as healthy as before: the holder is the one finding beside the fakes' numerics.
    assert {fid for fid, _s in faults(run)} == {"numerical-mismatch", "gpu-memory-exhausted"}, faults(run)
