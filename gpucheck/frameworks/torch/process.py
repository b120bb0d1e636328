"""What PyTorch does in the test process itself, for the suite's fixtures (``gpucheck.suite``): bound what its caching
allocator may take of each GPU (--gpucheck-worker-memory) through ``torch.cuda.set_per_process_memory_fraction``.
Imports torch, so only when asked: a ``torch_device`` that hands out a GPU."""

from __future__ import annotations

import importlib
from typing import Any

MiB = 1 << 20


def fraction(megabytes: int, total: int) -> float:
    """The share of a GPU of ``total`` bytes that ``megabytes`` MiB is, as ``set_per_process_memory_fraction`` takes it
    (a float from 0 to 1; torch allows ``total * fraction``): the whole GPU where the bound is larger than it, or its
    size is not known."""
    if total <= 0 or megabytes * MiB >= total:
        return 1.0
    return max(0.0, megabytes * MiB / total)


def bound_memory(megabytes: int) -> list[str]:
    """Each GPU torch lists in this process gets ``megabytes`` MiB (its caching allocator refuses an allocation past
    ``total * fraction``, with torch's out-of-memory error). Unlike TensorFlow's bound it can be set at any time, but it
    limits only what is allocated from then on: a GPU where this process already holds more than the bound gets a
    sentence that says so."""
    torch: Any = importlib.import_module("torch")
    late = []
    for index in range(torch.cuda.device_count()):
        total = int(torch.cuda.get_device_properties(index).total_memory)
        torch.cuda.set_per_process_memory_fraction(fraction(megabytes, total), index)
        held = int(torch.cuda.memory_reserved(index))
        if held > megabytes * MiB:
            late.append(
                f"did not bound cuda:{index} in time: this process already holds {held // MiB} MiB there (torch's caching "
                f"allocator), more than the {megabytes} MiB; the bound limits what is allocated from now on"
            )
    return late
