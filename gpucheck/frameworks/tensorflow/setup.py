"""The shared set-up of the one TensorFlow process on the critical path (``gpucheck.frameworks.tensorflow.child``),
before the steps of the layers that need TensorFlow.

Before TensorFlow initialises its devices, it configures what must be configured then: the placement log
(it cannot be switched on later for functions), the CPU split in logical devices for the multi-device
step, and a bounded ``memory_limit`` on every GPU, so that this process never reserves a GPU's memory
while another one (the memory-growth probe, started beside it) needs it. NVML's reading of every GPU is
taken before that (what was free, and who held it, before TensorFlow started). Then it creates the
devices. Its facts are :class:`TfSetupFacts`; what the steps after it need in the process (TensorFlow
itself, the GPUs, the NVML reading, the created devices) is a :class:`TfContext`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from gpucheck.frameworks.tensorflow.common import (
    created_devices,
    created_limits,
    error_text,
    initialise_devices,
    section,
)
from gpucheck.frameworks.tensorflow.facts import TfDevice, TfSetupFacts
from gpucheck.probes.nvml import GpuHeadroom, memory_snapshot
from gpucheck.protocol import INIT_SECTION
from gpucheck.settings import deep_from_env

#: The key of the set-up's facts in the TensorFlow child's JSON (and their ``Facts`` field).
SETUP_KEY = "tf_setup"
#: Environment variables TensorFlow reads for memory and XLA; their values are facts.
ENV_KEYS = ("TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "XLA_FLAGS", "TF_XLA_FLAGS", "CUDA_VISIBLE_DEVICES")
#: How many logical CPU devices the set-up splits the CPU into, for the multi-device path.
CPU_SPLIT = 2
#: The memory limit (MiB) this process gives every GPU, at most: enough for every step, far from the whole
#: GPU. Less where NVML shows less free (a quarter of the least free GPU, at least MEMORY_LIMIT_MIN_MB).
MEMORY_LIMIT_MB = 1024
MEMORY_LIMIT_MIN_MB = 256
#: Each step after the devices exist may take this share of the probe's timeout (at least
#: MIN_STEP_BUDGET seconds); creating the devices may take all that is left (a cold PTX JIT takes minutes).
STEP_SHARE = 0.5
MIN_STEP_BUDGET = 10.0

Nvml = dict[str, GpuHeadroom]


@dataclass(frozen=True)
class TfContext:
    """What the set-up hands the steps after it, in the process: TensorFlow and numpy, the GPUs it
    registers, NVML's reading before TensorFlow started, the devices it created, each step's budget."""

    tf: Any
    np: Any
    #: Physical GPUs, as TensorFlow lists them and as facts.
    physical: tuple[Any, ...]
    gpus: tuple[TfDevice, ...]
    nvml: Nvml
    cpu_split: int
    #: ("GPU:N", PCI bus id) from TensorFlow's "Created device" lines, and GPU index -> its limit (MB).
    created: tuple[tuple[str, str], ...]
    limits: dict[int, int]
    #: How long each part of a step may take (seconds).
    step_budget: float

    def compute_devices(self) -> list[str]:
        """Where numerics and XLA run: every GPU. On the CPU alone (no GPU registered) they only check the
        checks themselves, which --gpucheck-deep asks for."""
        return [f"/GPU:{i}" for i in range(len(self.gpus))] or (["/CPU:0"] if deep_from_env() else [])


def gpu_details(tf: Any, dev: Any) -> dict[str, Any]:
    """tf.config.experimental.get_device_details, as JSON values."""
    try:
        raw = dict(tf.config.experimental.get_device_details(dev))
    except Exception as exc:  # noqa: BLE001
        return {"error": error_text(exc)}
    out: dict[str, Any] = {}
    for k, v in raw.items():
        out[str(k)] = list(v) if isinstance(v, tuple) else v if isinstance(v, (str, int, float, bool)) else str(v)
    return out


def memory_limit_for(nvml: Nvml) -> int:
    """The memory_limit (MiB) for every GPU of the main TensorFlow process: MEMORY_LIMIT_MB, or a quarter
    of the least free GPU where that is less (another process may hold most of it)."""
    free = [g.free_mb for g in nvml.values()]
    if not free:
        return MEMORY_LIMIT_MB
    return max(MEMORY_LIMIT_MIN_MB, min(MEMORY_LIMIT_MB, min(free) // 4))


def growth_kept_with_logical_devices(tf: Any, physical: tuple[Any, ...]) -> bool | None:
    """Whether this TensorFlow keeps memory growth once a logical device is configured (the CPU split is
    already set): growth on, TensorFlow's own computation of the GPU options read, growth off again (the
    GPUs then get a memory_limit). TensorFlow 2.21 drops it. None where it cannot be read."""
    try:
        from tensorflow.python.eager import context

        for dev in physical:
            tf.config.experimental.set_memory_growth(dev, True)
        try:
            options = context.context()._compute_device_options("GPU")
            kept = bool(options.allow_growth)
        finally:
            for dev in physical:
                tf.config.experimental.set_memory_growth(dev, False)
        return kept
    except Exception:  # noqa: BLE001 - a private API: another TensorFlow may not have it
        return None


def _list_gpus(tf: Any) -> tuple[Any, ...]:
    return tuple(d for d in tf.config.list_physical_devices("GPU") if getattr(d, "device_type", None) == "GPU")


def _split_cpu(tf: Any) -> int:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * CPU_SPLIT)
    return CPU_SPLIT


def _bound(tf: Any, physical: tuple[Any, ...], limit: int | None) -> None:
    for dev in physical:
        tf.config.set_logical_device_configuration(dev, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])


def set_up(timeout: float) -> Generator[tuple[TfSetupFacts, float | None], None, TfContext | None]:
    """In a process where TensorFlow is imported and its devices not yet initialised: configure, then create
    the devices. Yields its facts so far with how long the next part may take (None: what is left of the
    probe's own deadline); returns the context of the steps after it, or None where there is none to run
    (TensorFlow cannot be imported, or its devices could not be created: every op would fail the same way,
    and the error of the device creation is the fact)."""
    env = {k: os.environ.get(k) for k in ENV_KEYS}
    try:
        import numpy as np
        import tensorflow as tf
    except Exception as exc:  # noqa: BLE001 - reported by the framework probe as well
        yield TfSetupFacts(False, error_text(exc), None, env=env), None
        return None
    errors: dict[str, str] = {}
    step_budget = max(MIN_STEP_BUDGET, timeout * STEP_SHARE)
    section(errors, "log device placement", lambda: tf.debugging.set_log_device_placement(True), None, capture=False)
    physical: tuple[Any, ...] = section(errors, "list GPUs", lambda: _list_gpus(tf), (), capture=False)
    gpus = tuple(TfDevice(str(d.name), "GPU", gpu_details(tf, d)) for d in physical)
    nvml = memory_snapshot() if gpus else {}
    cpu_split = section(errors, "split the CPU", lambda: _split_cpu(tf), 0, capture=False)
    kept = growth_kept_with_logical_devices(tf, physical) if physical else None
    limit = memory_limit_for(nvml) if physical else None
    section(errors, "memory limit", lambda: _bound(tf, physical, limit), None, capture=False)
    facts = TfSetupFacts(
        True, None, str(getattr(tf, "__version__", "unknown")), gpus, (), cpu_split, limit, kept, (), env, dict(errors)
    )
    yield facts, None

    lines: list[str] = []
    no_devices: list[str] = []
    logical = section(errors, INIT_SECTION, lambda: initialise_devices(tf, None, lines), no_devices, capture=False)
    created = tuple(created_devices(lines))
    facts = dataclasses.replace(facts, logical_devices=tuple(logical), created_devices=created, errors=dict(errors))
    yield facts, step_budget
    if INIT_SECTION in errors:
        return None
    return TfContext(tf, np, physical, gpus, nvml, cpu_split, created, created_limits(lines), step_budget)
