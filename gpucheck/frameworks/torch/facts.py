"""PyTorch's facts: what its child saw (``gpucheck.frameworks.torch.child``), as frozen dataclasses that round-trip
through JSON (``gpucheck.facts``' codec). They live in ``Facts.units`` under ``FIELD``, read through ``torch_facts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from gpucheck.facts import Facts, Field, NumericCheck, ProbeOutcome

#: The ``Facts.units`` field the PyTorch child fills (and its probe's name).
FIELD = "torch"
#: The ``Facts.units`` field of ``/dev/shm`` as the pytest process reads it where PyTorch is asked.
SHM_FIELD = "torch_shm"


@dataclass(frozen=True)
class TorchDevice:
    """A CUDA device as torch lists it (``torch.cuda.get_device_name`` / ``get_device_capability``)."""

    index: int
    name: str | None
    #: (major, minor); None where torch did not say.
    capability: tuple[int, int] | None
    error: str | None = None


@dataclass(frozen=True)
class AllocatorConfig:
    """A caching-allocator configuration the environment sets and the build reads (``gpucheck.frameworks.torch.memory``):
    its keys, those the build's parsing libraries do not hold, and torch's own parser's word on it."""

    #: "PYTORCH_CUDA_ALLOC_CONF" or "PYTORCH_ALLOC_CONF".
    variable: str
    value: str
    keys: tuple[str, ...]
    #: The keys none of ``libraries`` holds: options this build does not know.
    unknown: tuple[str, ...]
    #: What is wrong with its form (an option without ``:value``...), which aborts ``import torch`` in torch 2.14; None
    #: where it is a list of ``key:value`` options.
    malformed: str | None
    #: The libraries of the build the keys were looked up in.
    libraries: tuple[str, ...]
    #: torch's own parser's error on the value, run without starting CUDA (None: accepted, or not asked).
    torch_said: str | None = None


@dataclass(frozen=True)
class SharedMemory:
    """``/dev/shm``, where NCCL makes its shared-memory segments (read in the pytest process, below the host view)."""

    path: str
    #: Its size and what is free of it, in bytes (``os.statvfs``); None where it could not be read.
    size: int | None
    free: int | None
    writable: bool | None
    error: str | None


@dataclass(frozen=True)
class FoundFirst:
    """A library ``import torch`` needed a symbol of, and which copy of it lacks the symbol: where ``import torch``
    failed with "undefined symbol: S, version libX.so.N", another copy of libX.so.N than the one torch's libraries were
    built with was found first (preloaded, on ``LD_LIBRARY_PATH``), or the ``nvidia-*`` wheels do not go together."""

    #: The library's soname ("libnvJitLink.so.13") and the symbol missing from the copy found first.
    soname: str
    symbol: str
    #: The copy that lacks the symbol (``child.found_first`` says how it is found); None where none is seen to.
    loaded: str | None
    #: How that copy came in: "LD_PRELOAD", "LD_LIBRARY_PATH", "loaded" (already in the process before torch's libraries,
    #: by something else), "wheel" (the wheels' own copy); None with ``loaded``.
    how: str | None
    #: The copies the installed ``nvidia-*`` wheels bring (``<site-packages>/nvidia/*/lib/<soname>``).
    wheel_copies: tuple[str, ...] = ()
    #: The folder of ``LD_LIBRARY_PATH`` it was found in, as the variable writes it ("" is the working directory).
    folder: str | None = None
    #: The loader's words ("undefined symbol: S, version libX.so.N").
    said: str = ""


@dataclass(frozen=True)
class TorchFacts:
    importable: bool
    import_error: str | None
    #: ``torch.__version__`` ("2.13.0+cpu").
    version: str | None = None
    #: Where ``import torch`` found the package.
    location: str | None = None
    #: ``torch.version.cuda``: the CUDA the wheel was built for ("13.0"); None on a CPU-only wheel.
    cuda: str | None = None
    #: ``torch._C._cuda_getCompiledVersion()`` (13000); None where the build has no CUDA.
    compiled_cuda: int | None = None
    #: ``torch.backends.cudnn.version()`` (91002); None where torch has no cuDNN.
    cudnn: int | None = None
    #: ``torch.cuda.is_available()``: whether the CUDA runtime opened a GPU.
    available: bool | None = None
    #: The warnings torch gave while the child read it (their text names the cause: "Error 804: ..."; c10 gives a
    #: CUDA initialisation warning once a process, at whichever reading asked the runtime first).
    warnings: tuple[str, ...] = ()
    #: ``torch.cuda.device_count()``: before CUDA is initialised torch 2.14 counts with NVML, so it may count GPUs the
    #: runtime cannot open (``available`` False).
    device_count: int | None = None
    #: The devices torch lists, read only where ``available``.
    devices: tuple[TorchDevice, ...] = ()
    #: ``torch.cuda.get_arch_list()``: the architectures the build has code for ("sm_90", "compute_90").
    arch_list: tuple[str, ...] = ()
    #: The CUDA libraries (and torch's own) the process had loaded once it was done, from ``/proc/self/maps``.
    libraries: tuple[str, ...] = ()
    #: A reading that raised: what it was -> the exception in one line.
    errors: dict[str, str] = field(default_factory=dict)
    #: The allocator configurations the environment sets and this CUDA build reads (none on a CPU-only build).
    allocator: tuple[AllocatorConfig, ...] = ()
    #: Where ``import torch`` failed for a symbol missing from a CUDA library: which copy was found first.
    found_first: FoundFirst | None = None

    @property
    def cuda_build(self) -> bool:
        return self.cuda is not None


#: The ``Facts.units`` fields of the placement layer's steps in the PyTorch child (``gpucheck.frameworks.torch.placement``).
PLACEMENT_FIELD, NUMERICS_FIELD, TRAINING_FIELD = "torch_placement", "torch_numerics", "torch_training"
#: The ``Facts.units`` field of the resources layer's step in the PyTorch child (``gpucheck.frameworks.torch.fraction``),
#: and how its stages begin (a child that dies or overruns there is that step's, not the placement layer's).
FRACTION_FIELD, FRACTION_STAGE = "torch_fraction", "memory fraction on"


@dataclass(frozen=True)
class MemoryFraction:
    """``torch.cuda.set_per_process_memory_fraction`` on one GPU, as ``--gpucheck-worker-memory`` and ``torch_device``
    use it: a cap far below what is free, then a tensor under it and one past it."""

    device: str
    fraction: float
    cap_mib: int
    #: The tensors' sizes (MiB).
    under_mib: int
    over_mib: int
    #: The tensor under the cap was made (False: torch refused it, so memory is held elsewhere: not judged).
    under_granted: bool | None
    #: The tensor past the cap was refused with torch's out-of-memory error naming what is allowed (False: made, the cap
    #: does not hold; None: not tried, or refused for want of free memory rather than by the cap: not judged).
    over_refused: bool | None
    #: torch's words where it refused a tensor.
    said: str | None = None
    #: What stopped the check, and where: "set" (torch would not set the fraction: it cannot bound the process) or
    #: "allocate" (an error other than out-of-memory making a tensor: nothing judged).
    error: str | None = None
    failed_at: str | None = None


@dataclass(frozen=True)
class TorchFractionFacts:
    fractions: tuple[MemoryFraction, ...]
    #: ``torch.cuda.get_allocator_backend()``: "native" (the caching allocator) or "cudaMallocAsync".
    backend: str | None = None
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TorchOpRun:
    """A tensor made on ``device`` and an op on it: where torch says each is, or what it raised."""

    device: str
    #: ``str(tensor.device)`` of the tensor made there and of the op's result; None where it raised.
    tensor_on: str | None
    result_on: str | None
    exception: str | None = None


@dataclass(frozen=True)
class TorchTrainingRun:
    """One SGD step of a small network on ``devices`` (two: its layers split between them), against the same step in
    float64 on the CPU from the same weights and data."""

    devices: tuple[str, ...]
    ok: bool
    #: max |weight after - reference| / max |reference weight|, over every parameter.
    error: float | None
    tolerance: float
    #: The loss before the step, there and in the reference.
    loss: float | None
    reference_loss: float | None
    exception: str | None = None


@dataclass(frozen=True)
class TorchPlacementFacts:
    runs: tuple[TorchOpRun, ...]
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TorchNumericsFacts:
    checks: tuple[NumericCheck, ...]
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TorchTrainingFacts:
    runs: tuple[TorchTrainingRun, ...]
    errors: dict[str, str] = field(default_factory=dict)


def torch_facts(facts: Facts) -> ProbeOutcome[TorchFacts] | None:
    """The PyTorch child's outcome (None where this run did not start it)."""
    return cast("ProbeOutcome[TorchFacts] | None", facts.unit(FIELD))


def shared_memory(facts: Facts) -> SharedMemory | None:
    """``/dev/shm`` as this run read it (None where the resources layer or PyTorch was not asked)."""
    return cast("SharedMemory | None", facts.unit(SHM_FIELD))


#: The steps' facts, each read as its outcome in the PyTorch child.
placement_facts = Field(PLACEMENT_FIELD, TorchPlacementFacts)
numerics_facts = Field(NUMERICS_FIELD, TorchNumericsFacts)
training_facts = Field(TRAINING_FIELD, TorchTrainingFacts)
fraction_facts = Field(FRACTION_FIELD, TorchFractionFacts)
