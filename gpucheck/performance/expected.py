"""Expected peak performance of a GPU model, read from ``gpucheck/data/gpu_performance.json``.

The data file holds vendor peak figures (dense, no sparsity, at the boost clock) per NVIDIA GPU model with
their sources; see its ``_source``. This module only reads it: :func:`expected_for` finds the model a device
name belongs to, and :func:`pcie_gbps` turns a PCIe link (generation, width) into its theoretical bandwidth.

Standard library only; no probe or rule state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from gpucheck import knowledge

#: The data file, under ``gpucheck/data/``.
DATA_FILE = "gpu_performance.json"

#: The dtypes a model's ``tflops`` may name: plain FP32 (CUDA cores), and the tensor-core TF32, FP16, BF16.
DTYPES: tuple[str, ...] = ("float32", "tf32", "float16", "bfloat16")

@dataclass(frozen=True)
class Expected:
    """One model's expected peak figures; None where the data file gives none."""

    model: str
    compute_capability: str | None
    #: Dense peak TFLOPS by dtype (``float32``, ``tf32``, ``float16``, ``bfloat16``); a dtype the GPU has no
    #: tensor-core support for is absent.
    tflops: dict[str, float]
    #: Device memory bandwidth, GB/s (10^9 bytes/s).
    memory_gbps: float | None
    pcie_generation: int | None
    pcie_width: int | None
    #: Total bidirectional NVLink bandwidth per GPU, GB/s (the bridged figure for bridge-capable PCIe cards).
    nvlink_gbps: float | None
    sources: tuple[str, ...]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _integer(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _entry(row: dict[str, Any]) -> Expected:
    tflops_raw = row.get("tflops") or {}
    tflops: dict[str, float] = {}
    for dtype in DTYPES:
        figure = _number(tflops_raw.get(dtype))
        if figure is not None:
            tflops[dtype] = figure
    pcie = row.get("pcie") or {}
    capability = row.get("compute_capability")
    return Expected(
        model=str(row["model"]),
        compute_capability=str(capability) if capability is not None else None,
        tflops=tflops,
        memory_gbps=_number(row.get("memory_gbps")),
        pcie_generation=_integer(pcie.get("generation")),
        pcie_width=_integer(pcie.get("width")),
        nvlink_gbps=_number(row.get("nvlink_gbps")),
        sources=tuple(str(source) for source in row.get("sources") or ()),
    )


@cache
def _table() -> knowledge.ModelTable[Expected]:
    return knowledge.model_table(knowledge.data(DATA_FILE)["models"], _entry)


def models() -> tuple[Expected, ...]:
    """Every model in the data file, in file order."""
    return tuple(_copy(entry) for _patterns, entry in _table())


def expected_for(name: str | None) -> Expected | None:
    """The expected figures of the model a device name belongs to; None for None or an unknown model.

    ``name`` is the device name as NVML, nvidia-smi or TensorFlow report it (``"NVIDIA A100-SXM4-40GB"``,
    ``"Tesla T4"``). A leading ``NVIDIA `` and ``Tesla `` are removed, then each model's ``names`` are tried
    with :func:`re.fullmatch`, case-insensitively, in file order; the first model that matches wins.
    """
    entry = knowledge.find_model(_table(), name)
    return _copy(entry) if entry is not None else None


def _copy(entry: Expected) -> Expected:
    # The cached entry stays unchanged whatever a caller does with the dict it gets.
    return replace(entry, tflops=dict(entry.tflops))


#: Per-lane signalling rate (GT/s) and line-code efficiency by PCIe generation. Gen 1-2 use 8b/10b, gen 3-5
#: 128b/130b; gen 6 (PAM4 with FLIT mode) is taken as 242/256, the share of a 256-byte FLIT that carries data.
_PCIE_LANE: dict[int, tuple[float, float]] = {
    1: (2.5, 8 / 10),
    2: (5.0, 8 / 10),
    3: (8.0, 128 / 130),
    4: (16.0, 128 / 130),
    5: (32.0, 128 / 130),
    6: (64.0, 242 / 256),
}


def pcie_gbps(generation: int | None, width: int | None) -> float | None:
    """Theoretical one-direction bandwidth of a PCIe link in GB/s (10^9 bytes/s).

    Per-lane rate by generation (1: 2.5, 2: 5, 3: 8, 4: 16, 5: 32, 6: 64 GT/s) times the encoding efficiency
    (8b/10b for gen 1-2, 128b/130b for gen 3-5; gen 6 is taken as 242/256, the data share of its FLIT), times
    the lane count, over 8 bits. Gen 4 x16 -> 31.5 GB/s, gen 3 x16 -> 15.75 GB/s, gen 5 x16 -> 63 GB/s.
    None when either is None, the generation is unknown, or the width is not a positive lane count.
    """
    if generation is None or width is None or width <= 0:
        return None
    lane = _PCIE_LANE.get(generation)
    if lane is None:
        return None
    rate, efficiency = lane
    return rate * efficiency * width / 8
