"""TensorFlow's facts: what its child (the framework facts, the set-up, each step), its libraries probe and its
memory probes saw, as frozen dataclasses that round-trip through JSON (``gpucheck.facts``' codec). They live in
``Facts.units`` under the fields the unit's probes and steps name; the typed accessors below read them there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucheck.facts import Field, NumericCheck
from gpucheck.protocol import INIT_SECTION


@dataclass(frozen=True)
class TfDevice:
    name: str
    device_type: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def capability(self) -> tuple[int, int] | None:
        """The compute capability TensorFlow's device details give, as a pair of integers (``(9, 0)``; ``[9, 0]``
        once through JSON); None where they give none."""
        cc = self.details.get("compute_capability")
        if isinstance(cc, (list, tuple)) and len(cc) == 2 and all(type(v) is int for v in cc):
            return (cc[0], cc[1])
        return None


@dataclass(frozen=True)
class FrameworkFacts:
    importable: bool
    import_error: str | None
    version: str | None
    location: str | None
    build_info: dict[str, Any]
    is_cuda_build: bool | None
    devices: tuple[TfDevice, ...]
    gpus: tuple[TfDevice, ...]
    list_devices_error: str | None
    #: Steps of the TensorFlow child (the units' ``Unit.steps``) that raised, or could not be loaded: key -> error.
    step_errors: dict[str, str] = field(default_factory=dict)


# --- libraries (child process) --------------------------------------------------------


@dataclass(frozen=True)
class SearchDir:
    """One directory of the loader's search for TensorFlow's libraries, in the loader's order."""

    path: str
    #: "LD_LIBRARY_PATH", "RUNPATH of <file>", "ldconfig cache", "default directory".
    source: str


@dataclass(frozen=True)
class CudaLibrary:
    """A CUDA library TensorFlow's build needs, where the loader finds it and what it says it is."""

    key: str
    soname: str
    #: The pip wheel that provides it (e.g. nvidia-cuda-runtime-cu12) and the minimum the framework asks for.
    package: str | None
    min_version: str | None
    #: TensorFlow registers no GPU without it (its TryDlopenCUDALibraries list).
    required: bool
    #: The file the search resolved the name to, and which search entry found it.
    path: str | None
    found_via: str | None
    loaded: bool
    #: The loader's own message (dlerror) when dlopen failed: often names a missing dependency.
    load_error: str | None
    version: str | None
    #: How the version was learnt: the library's own call (e.g. "cudaRuntimeGetVersion") or "file name".
    version_source: str | None
    #: Other files of this soname later in the search (shadowed by the first).
    shadowed: tuple[str, ...] = ()
    #: Files of the same library with another soname version (e.g. libcudart.so.13 when .so.12 is needed).
    other_versions: tuple[str, ...] = ()
    #: The CUDA version the library was built for, when it says (cuDNN: cudnnGetCudartVersion), e.g. "12.5".
    built_for_cuda: str | None = None


@dataclass(frozen=True)
class ToolchainFile:
    name: str
    path: str | None
    searched: tuple[str, ...]
    version: str | None = None


@dataclass(frozen=True)
class LibrariesFacts:
    #: Where TensorFlow's package was found (without importing it), None when it was not.
    framework_location: str | None
    framework_version: str | None
    #: tensorflow/python/platform/build_info.py, read as data; empty when absent.
    build_info: dict[str, Any]
    build_info_source: str | None
    is_cuda_build: bool | None
    #: The wheel's "and-cuda" requirements: pip package -> minimum version.
    requirements: dict[str, str]
    search: tuple[SearchDir, ...]
    libraries: tuple[CudaLibrary, ...]
    #: XLA's PTX compiler and libdevice, looked for where XLA looks.
    ptxas: ToolchainFile | None
    libdevice: ToolchainFile | None
    xla_cuda_data_dir: str | None
    notes: tuple[str, ...] = ()

    def library(self, key: str) -> CudaLibrary | None:
        return next((lib for lib in self.libraries if lib.key == key), None)


# --- placement, numerics, memory configuration, XLA (child processes) --------


@dataclass(frozen=True)
class OpRun:
    """One op (a float32 matmul) under ``tf.device(requested)``, as TensorFlow ran it or refused to."""

    requested: str
    #: "eager" or "function" (inside a tf.function).
    mode: str
    soft_placement: bool
    ok: bool
    #: The device of the result tensor: where the op really ran.
    device: str | None
    #: The exception's class and TensorFlow's exact message when it refused.
    error_type: str | None
    error: str | None


@dataclass(frozen=True)
class FallbackOp:
    """An op of the training step that asked for a GPU and ran on the CPU, with the reason."""

    name: str
    op_type: str
    dtype: str | None
    requested: str
    device: str
    #: "no GPU device", "no GPU kernel", "no GPU kernel for <dtype>", "GPU kernel exists (placed by colocation)".
    reason: str


@dataclass(frozen=True)
class TrainingStepPlacement:
    """A small training step in a tf.function under ``tf.device(requested)`` with device-placement logging on."""

    requested: str
    ok: bool
    error: str | None
    #: How many ops TensorFlow's placer logged, and how many of them it put on a GPU.
    placed_ops: int
    on_gpu: int
    fallbacks: tuple[FallbackOp, ...]


@dataclass(frozen=True)
class XlaRun:
    """A ``jit_compile=True`` function on one device."""

    device: str
    ok: bool
    ran_on: str | None
    error: str | None
    #: XLA's own log lines about ptxas / libdevice / the CUDA directories it searched.
    log_lines: tuple[str, ...]
    #: The directories XLA says it searched for the CUDA toolkit ("Searched for CUDA in ...").
    searched: tuple[str, ...]
    #: max relative error against a float64 reference, when it ran.
    max_error: float | None = None


@dataclass(frozen=True)
class MultiDeviceRun:
    """A data-parallel gradient step split across several devices (logical ones where there are not
    enough physical GPUs), reduced on the first and compared with a float64 reference."""

    devices: tuple[str, ...]
    #: "gpus", "logical-gpus" or "logical-cpus".
    kind: str
    ok: bool
    ran_on: tuple[str, ...]
    error: float | None
    tolerance: float
    exception: str | None


@dataclass(frozen=True)
class GpuMemory:
    """What TensorFlow got of one GPU's memory, and what NVML said was free before it started."""

    device: str
    pci_bus_id: str | None
    #: What TensorFlow's allocator may use on the device (its memory_limit; the "Created device ... with
    #: N MB memory" figure).
    tf_limit_mb: int | None
    #: tf.config.experimental.get_memory_info after a test allocation: {"current": bytes, "peak": bytes}.
    memory_info: dict[str, int] | None
    nvml_free_mb: int | None
    nvml_total_mb: int | None
    #: Compute processes NVML lists on the GPU before TensorFlow started (pid, used MiB).
    nvml_processes: tuple[tuple[int, int | None], ...]
    error: str | None
    #: What NVML says this process holds on the GPU after the test allocation (MiB); None where NVML does
    #: not list it (no NVML, or a container that hides the process ids).
    process_used_mb: int | None = None
    #: The same reading once the devices exist, before the test allocation (the process's CUDA context).
    process_base_mb: int | None = None


@dataclass(frozen=True)
class TfSetupFacts:
    """The shared set-up of the one TensorFlow process on the critical path, before its steps: the GPUs
    TensorFlow registers, what gpucheck configured before the devices existed (the CPU split, a memory
    limit), and the devices TensorFlow then created (``gpucheck.frameworks.tensorflow.setup``)."""

    importable: bool
    import_error: str | None
    version: str | None
    #: Physical GPUs TensorFlow registers, with their details (compute capability, name).
    gpus: tuple[TfDevice, ...] = ()
    logical_devices: tuple[str, ...] = ()
    #: Logical CPU devices gpucheck split the CPU into (they appear in TensorFlow's device lists).
    cpu_split: int = 0
    #: The memory_limit (MiB) gpucheck gave every GPU of this process, so that it never reserves a GPU's
    #: memory while another process needs it; None where TensorFlow registers no GPU.
    memory_limit_mb: int | None = None
    #: Whether this TensorFlow keeps memory growth once any logical device is configured (a CPU split):
    #: TensorFlow 2.21 drops it (``context._compute_device_options``) while get_memory_growth answers True.
    #: None where it was not looked at (no GPU).
    growth_kept_with_logical_devices: bool | None = None
    #: TensorFlow's own word on which GPU each of its devices is: its "Created device .../device:GPU:N
    #: ... pci bus id: <id>" log lines, as (GPU:N, PCI bus id).
    created_devices: tuple[tuple[str, str], ...] = ()
    #: The memory / XLA settings of the environment, as TensorFlow reads them.
    env: dict[str, str | None] = field(default_factory=dict)
    #: Sections that raised unexpectedly (name: error); ``initialise devices`` there: no step ran after.
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def devices_created(self) -> bool:
        """TensorFlow created its GPU devices (with gpucheck's memory limit)."""
        return bool(self.created_devices) and INIT_SECTION not in self.errors


@dataclass(frozen=True)
class PlacementFacts:
    """The placement step: a float32 matmul pinned to each GPU (and one past the last), eagerly and in a
    tf.function, with soft placement off and on."""

    soft_placement_default: bool | None = None
    runs: tuple[OpRun, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainingStepFacts:
    """The training-step step: where TensorFlow's placer put the ops of a small training step."""

    run: TrainingStepPlacement | None = None
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NumericsFacts:
    """The numerics step: computations on each GPU (on the CPU with --gpucheck-deep where there is none)
    against a float64 reference."""

    checks: tuple[NumericCheck, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class XlaFacts:
    """The XLA step: a ``jit_compile=True`` function on each GPU (on the CPU with --gpucheck-deep)."""

    runs: tuple[XlaRun, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MultiDeviceFacts:
    """The multi-device step: a gradient step split across the GPUs, or the logical CPUs with fewer than two."""

    run: MultiDeviceRun | None = None
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuMemoryFacts:
    """The GPU memory step of the resources layer: a test allocation on each GPU of the main TensorFlow
    process, with what its allocator may use there and what NVML says."""

    memory: tuple[GpuMemory, ...] = ()
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryConfigFacts:
    """A memory setting tried in a TensorFlow process of its own (it can only be made before TensorFlow
    initialises its GPUs; cuda_malloc_async aborts the process where unsupported), judged by what happened."""

    #: "memory-growth", "cuda-malloc-async".
    name: str
    #: What was configured, in TensorFlow's terms.
    setting: str
    #: True: it worked (growth: the process holds about what it allocated); False: it did not; None: not
    #: checked (``not_checked`` says why: the memory was held by others, NVML does not list the process).
    applied: bool | None
    error: str | None
    memory: tuple[GpuMemory, ...]
    logical_gpus: tuple[str, ...]
    multi_device: MultiDeviceRun | None = None
    not_checked: str | None = None
    #: Bytes allocated on each GPU to judge the setting.
    allocated_mb: int | None = None





# --- where they are in the facts ------------------------------------------------------


framework = Field("framework", FrameworkFacts)
libraries = Field("libraries", LibrariesFacts)
tf_setup = Field("tf_setup", TfSetupFacts)
placement = Field("placement", PlacementFacts)
training_step = Field("training_step", TrainingStepFacts)
numerics = Field("numerics", NumericsFacts)
xla = Field("xla", XlaFacts)
multi_device = Field("multi_device", MultiDeviceFacts)
gpu_memory = Field("gpu_memory", GpuMemoryFacts)
memory_growth = Field("memory_growth", MemoryConfigFacts)
cuda_malloc_async = Field("cuda_malloc_async", MemoryConfigFacts)
