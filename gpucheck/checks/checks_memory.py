"""Checks of the resources layer that need TensorFlow: do memory settings work? (NVML's memory headroom,
which needs no framework, is asked in checks_nvml.) The verdict logic lives in ``gpucheck.decision``."""

from __future__ import annotations

from gpucheck.rules.memory import not_judged
from gpucheck.session import Check


def test_memory_settings_apply(gpucheck_check: Check) -> None:
    """Do memory growth, a memory limit and the environment's allocator settings work (judged by what each
    TensorFlow process holds)? A resource, but one that needs TensorFlow."""
    facts = gpucheck_check.result.facts
    gpucheck_check.verify(
        "resources",
        ("memory-config-failed",),
        needs=("framework",),
        unchecked=gpucheck_check.framework_not_diagnosed or (not_judged(facts) if facts is not None else None),
    )
