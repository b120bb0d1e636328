"""Checks of the resources layer that need TensorFlow: do memory settings work? (NVML's memory headroom,
which needs no framework, is asked in checks_nvml.) The verdict logic lives in ``gpucheck.blocking``."""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("resources", ("memory-config-failed",), needs=("framework",))
def test_memory_settings_apply(gpucheck_answer: Answer) -> None:
    """Do memory growth, a memory limit and the environment's allocator settings work (judged by what each
    TensorFlow process holds)? A resource, but one that needs TensorFlow."""
    gpucheck_answer.check()
