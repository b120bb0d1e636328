"""What the performance layer measures on a machine: one :class:`Spec` per benchmark, a pure function of
the GPUs the measuring framework lists (``gpucheck.registry.measuring_framework``) and of the benchmarks its child
measures (``gpucheck.unit.Framework.benchmarks``). The parent names its pytest items after it
(``test_matmul[GPU:0-bfloat16]``) and hands it to that framework's benchmark child (TensorFlow's
``gpucheck.frameworks.tensorflow.benchmarks``, PyTorch's ``gpucheck.frameworks.torch.benchmarks``), which measures
each one. Devices are named the same for every framework: ``/CPU:k``, ``/GPU:i`` (the i-th GPU the framework lists).

Standard library only: the parent imports it without any framework.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

#: The benchmarks the performance child measures, as JSON (``to_env``, ``from_env``).
BENCH_PLAN_ENV = "GPUCHECK_BENCH_PLAN"
#: pytest-benchmark's --benchmark-max-time where the run was given another value than its default (seconds, as
#: ``repr(float)``): how long the child repeats each benchmark's rounds (``max_time_from_env``).
BENCH_MAX_TIME_ENV = "GPUCHECK_BENCH_MAX_TIME"
#: pytest-benchmark's own default for --benchmark-max-time: that value leaves gpucheck's measuring times as they are.
PYTEST_BENCHMARK_MAX_TIME = 1.0

#: Logical CPU devices the benchmark child splits the CPU into: multi-device code paths (all-reduce,
#: scaling) run on them where there is no second GPU. They share the CPU's cores: their figures are
#: reported, their scaling is never judged.
LOGICAL_CPUS = 4

#: The benchmark kinds, in the order they run (the test functions of ``performance/checks_performance.py``).
REDUCTIONS = (None, "nccl", "hierarchical-copy", "one-device")
#: What a split or fallback matpow is compared with: matpow on the first GPU, else on the CPU.
MATPOW_REFERENCES = ("test_matpow[GPU:0]", "test_matpow[CPU:0]")
KINDS = ("matmul", "matpow", "matpow_fallback", "copy", "conv", "launch", "allreduce", "scaling")


@dataclass(frozen=True)
class Spec:
    """One benchmark: the test function it belongs to (``kind``), its parameter id, the devices it runs on
    (``/CPU:k``, ``/GPU:i``), and what varies (dtype, copy direction, eager or function, towers or MirroredStrategy)."""

    kind: str
    param: str
    devices: tuple[str, ...]
    dtype: str | None = None
    variant: str | None = None
    #: Whether its devices are separate hardware (GPUs), rather than logical CPU devices sharing cores.
    physical: bool = True
    #: How MirroredStrategy reduces across its devices: "nccl", "hierarchical-copy" (GPUs without NCCL),
    #: "one-device" (logical CPUs).
    reduction: str | None = None

    @property
    def name(self) -> str:
        """The pytest item's name, as pytest-benchmark records it."""
        return f"test_{self.kind}[{self.param}]"

    @property
    def group(self) -> str:
        return self.kind if self.dtype is None else f"{self.kind} {self.dtype}"


def gpu_dtypes(cc: tuple[int, int] | None) -> tuple[str, ...]:
    """Matmul dtypes a GPU of compute capability ``cc`` runs on Tensor Cores (float32 always, with TF32
    off): float16 from 7.0, TF32 and bfloat16 from 8.0."""
    out = ["float32"]
    if cc is None or cc >= (7, 0):
        out.append("float16")
    if cc is None or cc >= (8, 0):
        out += ["tf32", "bfloat16"]
    return tuple(out)


def _counts(n: int) -> list[int]:
    """1, 2, 4 … up to n, and n itself."""
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return [*out, n]


def plan(gpus: list[tuple[int, int] | None], nccl: bool = True, measures: tuple[str, ...] | None = None) -> list[Spec]:
    """The benchmarks for a machine whose measuring framework lists ``len(gpus)`` GPUs (their compute
    capabilities, None where unknown): the CPU always, each GPU, and the multi-device ones. Without NCCL
    (``nccl``: the loader finds libnccl.so.2) GPUs reduce by copies, as MirroredStrategy can. ``measures``: the
    benchmarks the framework's child measures (:func:`measured`); None, every one."""
    return [s for s in _plan(gpus, nccl) if measured(s, measures)]


def measured(spec: Spec, measures: tuple[str, ...] | None) -> bool:
    """Whether a framework whose child measures ``measures`` (kinds, ``"matmul"``, or a kind's variant,
    ``"launch:eager"``; None: every benchmark) measures ``spec``."""
    return measures is None or spec.kind in measures or f"{spec.kind}:{spec.variant}" in measures


def _plan(gpus: list[tuple[int, int] | None], nccl: bool) -> list[Spec]:
    gpu_reduction = "nccl" if nccl else "hierarchical-copy"
    cpu = "/CPU:0"
    gpu = [f"/GPU:{i}" for i in range(len(gpus))]
    specs: list[Spec] = []
    for dtype in ("float32", "float16", "bfloat16"):
        specs.append(Spec("matmul", f"CPU:0-{dtype}", (cpu,), dtype))
    for i, cc in enumerate(gpus):
        specs += [Spec("matmul", f"GPU:{i}-{dtype}", (gpu[i],), dtype) for dtype in gpu_dtypes(cc)]
    specs.append(Spec("matpow", "CPU:0", (cpu,), "float32"))
    specs += [Spec("matpow", f"GPU:{i}", (gpu[i],), "float32") for i in range(len(gpus))]
    if len(gpus) >= 2:
        specs.append(Spec("matpow", "GPU:0+GPU:1", (gpu[0], gpu[1]), "float32"))
    # The same program asked for a GPU that does not exist: soft placement runs it on the CPU, silently.
    specs.append(Spec("matpow_fallback", f"GPU:{len(gpus)}-absent", (f"/GPU:{len(gpus)}",), "float32"))
    specs.append(Spec("copy", "CPU:0-host", (cpu,), variant="host"))
    for i in range(len(gpus)):
        for variant in ("h2d-pinned", "h2d-pageable", "d2h", "d2d"):
            specs.append(Spec("copy", f"GPU:{i}-{variant}", (gpu[i],), variant=variant))
    if len(gpus) >= 2:
        specs.append(Spec("copy", "GPU:0-GPU:1", (gpu[0], gpu[1]), variant="peer"))
    specs += [Spec("conv", f"CPU:0-{dtype}", (cpu,), dtype) for dtype in ("float32", "bfloat16")]
    for i, cc in enumerate(gpus):
        dtypes = [d for d in gpu_dtypes(cc) if d != "tf32"]
        specs += [Spec("conv", f"GPU:{i}-{dtype}", (gpu[i],), dtype) for dtype in dtypes]
    for dev, label in [(cpu, "CPU:0"), *((g, g[1:]) for g in gpu)]:
        specs += [Spec("launch", f"{label}-{v}", (dev,), variant=v) for v in ("eager", "function")]
    cpus = [f"/CPU:{i}" for i in range(LOGICAL_CPUS)]
    for n in (2, LOGICAL_CPUS):
        specs.append(Spec("allreduce", f"CPU-x{n}", tuple(cpus[:n]), "float32", physical=False, reduction="one-device"))
    if len(gpus) >= 2:
        specs.append(Spec("allreduce", f"GPU-x{len(gpus)}", tuple(gpu), "float32", reduction=gpu_reduction))
    for variant in ("towers", "mirrored"):
        on_cpu = "one-device" if variant == "mirrored" else None
        on_gpu = gpu_reduction if variant == "mirrored" else None
        for n in _counts(LOGICAL_CPUS):
            specs.append(
                Spec("scaling", f"{variant}-CPU-x{n}", tuple(cpus[:n]), "float32", variant, False, on_cpu)
            )
        if len(gpus) >= 2:
            for n in _counts(len(gpus)):
                specs.append(Spec("scaling", f"{variant}-GPU-x{n}", tuple(gpu[:n]), "float32", variant, True, on_gpu))
    return specs


def to_env(specs: list[Spec]) -> str:
    return json.dumps([asdict(s) for s in specs], separators=(",", ":"))


def from_env(text: str) -> list[Spec]:
    """The plan as the parent handed it down (JSON, never evaluated): malformed entries are dropped."""
    try:
        raw = json.loads(text)
    except ValueError:
        return []
    out = []
    for item in raw if isinstance(raw, list) else []:
        spec = _spec(item)
        if spec is not None:
            out.append(spec)
    return out


def _spec(item: Any) -> Spec | None:
    if not isinstance(item, dict) or item.get("kind") not in KINDS:
        return None
    devices = item.get("devices")
    if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
        return None
    dtype, variant, reduction = item.get("dtype"), item.get("variant"), item.get("reduction")
    if not isinstance(item.get("param"), str) or not all(isinstance(v, str | None) for v in (dtype, variant, reduction)):
        return None
    if reduction not in REDUCTIONS:
        return None
    physical = bool(item.get("physical", True))
    return Spec(item["kind"], item["param"], tuple(devices), dtype, variant, physical, reduction)


def max_time_from_env(value: str) -> float | None:
    """The seconds a benchmark's rounds are repeated for, as the parent passed them in BENCH_MAX_TIME_ENV; None
    where none was passed or the value is not a positive finite number (the child's own defaults then hold)."""
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def max_time_option(value: object) -> float | None:
    """What pytest-benchmark's --benchmark-max-time (a decimal string, checked by pytest-benchmark) asks of gpucheck's
    benchmarks: its seconds, or None where it was not given, is its default (PYTEST_BENCHMARK_MAX_TIME) or is no
    positive finite number (gpucheck's own measuring times then hold)."""
    if value is None:
        return None
    seconds = max_time_from_env(str(value))
    return None if seconds == PYTEST_BENCHMARK_MAX_TIME else seconds
