"""Resources-layer probes. The GPU memory step of the one TensorFlow process (``gpucheck.frameworks.tensorflow.child``):
a test allocation on each GPU, what TensorFlow's allocator may use there, what NVML says. And memory
settings that TensorFlow takes only before it touches a GPU, each in a TensorFlow process of its own,
forked from the main TensorFlow child once it has imported TensorFlow (``gpucheck.probes.forked``; started beside it
where that child does not run), and judged by what happened rather than by an error string.

Memory growth is applied when the process holds about what it allocated (NVML's per-process reading
after a 64 MiB allocation); a process that holds nearly the whole GPU has growth off whatever
``get_memory_growth`` answers. An allocation that fails because other processes hold the memory says
nothing about the setting: it is "not checked", and NVML's own reading names those processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from gpucheck.facts import gpu_index
from gpucheck.frameworks.tensorflow.common import (
    created_devices,
    created_limits,
    initialise_devices,
    section,
    tf_message,
)
from gpucheck.frameworks.tensorflow.facts import GpuMemory, GpuMemoryFacts, MemoryConfigFacts
from gpucheck.frameworks.tensorflow.imports import import_tensorflow
from gpucheck.frameworks.tensorflow.libraries import registers_no_gpu_without
from gpucheck.frameworks.tensorflow.setup import Nvml, TfContext, memory_limit_for
from gpucheck.pci import pci_key
from gpucheck.probes.nvml import memory_snapshot
from gpucheck.protocol import stage

#: Test allocation (float32 elements: 64 MiB).
ALLOC_ELEMENTS = 16 * 1024 * 1024
ALLOC_MB = ALLOC_ELEMENTS * 4 // (1 << 20)
#: What the test allocation may add with growth on beyond itself: cuBLAS/cuDNN workspaces, the allocator's
#: rounding and region doubling. Without growth it adds nearly the whole GPU.
GROWTH_SLACK_MB = 1024


# --- the GPU memory step of the main TensorFlow process ---------------------------------------------------


def nvml_process_usage() -> dict[str, int]:
    """What NVML says this process holds on each GPU (MiB), by canonical PCI bus id; empty where NVML
    does not list this process (no NVML, a container that hides process ids)."""
    out: dict[str, int] = {}
    me = os.getpid()
    for bus, gpu in memory_snapshot().items():
        for pid, used in gpu.processes:
            if pid == me and used is not None:
                out[bus] = used
    return out


def gpu_memory(tf: Any, nvml: Nvml, created: list[tuple[str, str]], limits: dict[int, int], count: int) -> list[GpuMemory]:
    """A test allocation on each GPU; what TensorFlow's allocator may use there (its "Created device ...
    with N MB" line), what NVML said before TensorFlow started, and what it says this process holds now."""
    keys = {i: pci_key(bus) for dev, bus in created if (i := gpu_index(dev)) is not None}
    buses = {i: key.text if key is not None else None for i, key in keys.items()}
    # What this process holds once its devices exist, before the test allocation (its CUDA context).
    base = nvml_process_usage() if nvml else {}
    infos: list[tuple[dict[str, int] | None, str | None]] = []
    for i in range(count):
        info = None
        error = None
        try:
            with tf.device(f"/GPU:{i}"):
                t = tf.random.uniform((ALLOC_ELEMENTS,), dtype=tf.float32)
                _ = float(t[0])
            raw = tf.config.experimental.get_memory_info(f"GPU:{i}")
            info = {str(k): int(v) for k, v in raw.items()}
            del t
        except Exception as exc:  # noqa: BLE001
            error = f"{type(exc).__name__}: {tf_message(exc)}"
        infos.append((info, error))
    held = nvml_process_usage() if nvml else {}
    out: list[GpuMemory] = []
    for i, (info, error) in enumerate(infos):
        bus = buses.get(i)
        gpu = nvml.get(bus) if bus else None
        free, total, procs = (gpu.free_mb, gpu.total_mb, gpu.processes) if gpu is not None else (None, None, ())
        out.append(
            GpuMemory(
                f"/GPU:{i}", bus, limits.get(i), info, free, total, procs, error, held.get(bus or ""), base.get(bus or "")
            )
        )
    return out


def gpu_memory_step(ctx: TfContext, timeout: float) -> Iterator[tuple[GpuMemoryFacts, float | None]]:
    """The resources layer's step in the main TensorFlow process (``Unit.steps``, ``gpucheck.frameworks.tensorflow``), on every
    GPU it has."""
    errors: dict[str, str] = {}
    memory: list[GpuMemory] = []
    if ctx.gpus:
        created = list(ctx.created)
        memory = section(
            errors, "memory", lambda: gpu_memory(ctx.tf, ctx.nvml, created, ctx.limits, len(ctx.gpus)), []
        )
    yield GpuMemoryFacts(tuple(memory), errors), None


# --- memory settings, each in a TensorFlow process of its own -------------------------------------------


def growth_ceiling_mb(total_mb: int | None) -> int:
    """The most a process with growth on may add by allocating ALLOC_MB (at most half the GPU)."""
    ceiling = 4 * ALLOC_MB + GROWTH_SLACK_MB
    return min(ceiling, total_mb // 2) if total_mb else ceiling


def _out_of_memory(error: str | None) -> bool:
    return error is not None and ("ResourceExhausted" in error or "OOM" in error or "out of memory" in error.lower())


def judge_growth(memory: list[GpuMemory]) -> tuple[bool | None, str | None, str | None]:
    """(applied, error, not_checked) from what each GPU's process reading shows: what the test allocation
    added to what the process held once its devices existed (its CUDA context: ~0.5 GiB on an H100, more
    with CUDA_MODULE_LOADING=EAGER)."""
    if not memory:
        return None, None, "TensorFlow created no GPU device to allocate on"
    for m in memory:
        if m.error is not None and _out_of_memory(m.error):
            free = f"{m.nvml_free_mb} MiB" if m.nvml_free_mb is not None else "too little memory"
            held = ", ".join(f"pid {pid} ({used if used is not None else '?'} MiB)" for pid, used in m.nvml_processes)
            return None, None, f"a {ALLOC_MB} MiB allocation on {m.device} failed with {free} free" + (
                f", held by {held}" if held else ""
            )
        if m.error is not None:
            return False, m.error, None
    for m in memory:
        used = m.process_used_mb
        if used is None:
            return None, None, "NVML does not list this process's memory (no NVML, or process ids hidden by a container)"
        added = used - (m.process_base_mb or 0)
        ceiling = growth_ceiling_mb(m.nvml_total_mb)
        if added > ceiling:
            return (
                False,
                f"allocating {ALLOC_MB} MiB on {m.device} made this process hold {added} MiB more ({used} MiB in "
                f"all, more than {ceiling} MiB added): TensorFlow reserved the GPU's memory, memory growth is not "
                "in effect",
                None,
            )
    return True, None, None


def _tf_process(
    name: str, setting: str, configure: Callable[[Any, list[Any]], None]
) -> tuple[Any, list[GpuMemory], list[str], MemoryConfigFacts | None, str | None]:
    """Import TensorFlow, configure, create the devices, allocate on each GPU. Nothing is captured but
    device creation: where TensorFlow aborts, its last lines reach the parent through the pipe."""
    stage("find the CUDA libraries")
    missing = registers_no_gpu_without()
    if missing:
        # TensorFlow would list no GPU: its import (most of this process's cost) would tell nothing more.
        why = f"TensorFlow registers no GPU: the loader finds no {', '.join(missing)} for it"
        return None, [], [], MemoryConfigFacts(name, setting, None, None, (), (), not_checked=why), None
    stage("import tensorflow")
    try:
        tf: Any = import_tensorflow()
    except Exception as exc:  # noqa: BLE001 - the framework probe reports it; here nothing could be tried
        facts = MemoryConfigFacts(name, setting, None, None, (), (), not_checked=f"TensorFlow cannot be imported: {exc}")
        return None, [], [], facts, None

    gpus = list(tf.config.list_physical_devices("GPU"))
    if not gpus:
        return tf, [], [], MemoryConfigFacts(name, setting, None, None, (), (), not_checked="TensorFlow registers no GPU"), None
    nvml = memory_snapshot()
    error = None
    stage(f"{name}: configure")
    try:
        configure(tf, gpus)
    except Exception as exc:  # noqa: BLE001 - the refusal is the fact
        error = f"{type(exc).__name__}: {tf_message(exc)}"
    stage(f"{name}: initialise devices")
    lines: list[str] = []
    try:
        logical = initialise_devices(tf, "GPU", lines)
    except Exception as exc:  # noqa: BLE001 - TensorFlow could not create its devices with this configuration
        # Not judged here: whether the setting is at fault, the main TensorFlow process (which created its
        # devices without it, or failed the same way) tells; the rules weigh both. Out of memory says nothing
        # of the setting: no error then, only why it was not checked.
        failed = error or f"{type(exc).__name__}: {tf_message(exc)}"
        oom = _out_of_memory(failed)
        why = f"out of memory: other processes hold the GPU ({failed})" if oom else failed
        facts = MemoryConfigFacts(
            name, setting, None, None if oom else failed, (), (),
            not_checked=f"TensorFlow could not create its GPU devices: {why}",
        )
        return tf, [], [], facts, None
    stage(f"{name}: allocate")
    memory = gpu_memory(tf, nvml, created_devices(lines), created_limits(lines), len(logical))
    return tf, memory, logical, None, error


def probe_memory_growth() -> MemoryConfigFacts:
    name, setting = "memory-growth", "tf.config.experimental.set_memory_growth(gpu, True) on every GPU"

    def configure(tf: Any, gpus: list[Any]) -> None:
        for g in gpus:
            tf.config.experimental.set_memory_growth(g, True)

    tf, memory, logical, done, error = _tf_process(name, setting, configure)
    if done is not None:
        return done
    if error is None:
        for g in tf.config.list_physical_devices("GPU"):
            if not tf.config.experimental.get_memory_growth(g):
                error = f"memory growth is off on {g.name} after set_memory_growth(True)"
    applied, problem, not_checked = (False, error, None) if error is not None else judge_growth(memory)
    return MemoryConfigFacts(
        name, setting, applied, problem, tuple(memory), tuple(logical), not_checked=not_checked, allocated_mb=ALLOC_MB
    )


def probe_cuda_malloc_async() -> MemoryConfigFacts:
    """TF_GPU_ALLOCATOR=cuda_malloc_async (set by the parent), with a bounded memory limit: TensorFlow
    aborts creating its devices where CUDA's stream-ordered allocator is unsupported."""
    name, setting = "cuda-malloc-async", "TF_GPU_ALLOCATOR=cuda_malloc_async"

    def configure(tf: Any, gpus: list[Any]) -> None:
        limit = memory_limit_for(memory_snapshot())
        for g in gpus:
            tf.config.set_logical_device_configuration(g, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])

    _tf, memory, logical, done, error = _tf_process(name, setting, configure)
    if done is not None:
        return done
    failed = next((m.error for m in memory if m.error is not None), None)
    problem = error or failed
    if problem is not None and error is None and _out_of_memory(problem):
        # Other processes hold the memory: that says nothing of the allocator.
        return MemoryConfigFacts(
            name, setting, None, problem, tuple(memory), tuple(logical), not_checked=problem, allocated_mb=ALLOC_MB
        )
    return MemoryConfigFacts(name, setting, problem is None, problem, tuple(memory), tuple(logical), allocated_mb=ALLOC_MB)
