"""Facts: what the probes saw, as plain frozen dataclasses that round-trip through JSON.

Facts never hold exceptions; an error is a fact (its code, name, message,
stderr lines). Probe outcomes that ran in a child process carry the way the
child ended, so a crash or a timeout is a fact too.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from gpucheck.protocol import INIT_SECTION

T = TypeVar("T")


# --- hardware -------------------------------------------------------------------------


@dataclass(frozen=True)
class PciDevice:
    bus_id: str
    vendor: str
    device: str
    pci_class: str
    #: The kernel driver bound to the device (``nvidia``, ``nouveau``, ``vfio-pci``) or None.
    driver: str | None


@dataclass(frozen=True)
class HardwareFacts:
    #: The sysfs directory that was read.
    source: str
    readable: bool
    error: str | None
    #: How many PCI functions were read in all (any vendor).
    pci_device_count: int
    #: /dev/dxg exists: WSL2, where GPUs are reached through DirectX and not on a visible PCI bus.
    wsl_dxg: bool
    nvidia_devices: tuple[PciDevice, ...]
    #: NVIDIA functions that are GPUs (class 0x03xxxx: display / 3D controllers).
    nvidia_gpus: tuple[PciDevice, ...]
    #: The reads of sysfs did not finish within their time limit (``error`` says which limit).
    unanswered: bool = False


# --- kernel ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceNode:
    path: str
    exists: bool
    is_char_device: bool
    readable: bool
    writable: bool
    mode: str | None
    error: str | None


@dataclass(frozen=True)
class KernelFacts:
    version_file: str
    #: First line of /proc/driver/nvidia/version, e.g. "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15 ...".
    version_line: str | None
    module_version: str | None
    version_error: str | None
    nodes: tuple[DeviceNode, ...]
    #: Whether /sys/module/nvidia exists (module loaded even if /proc/driver/nvidia is hidden).
    module_in_sysfs: bool
    #: Other drivers that can claim an NVIDIA GPU and are loaded (nouveau, vfio_pci).
    competing_modules: tuple[str, ...]
    #: The reads of procfs and /dev did not finish within their time limit (``version_error`` says which).
    unanswered: bool = False
    #: /proc/driver/nvidia/params ``NvLinkDisable``: the module was loaded with NVreg_NvLinkDisable=1 (cloud VMs that
    #: get one GPU of an NVLink board do this); None where the file was not read.
    nvlink_disabled: bool | None = None
    #: The GPUs the nvidia driver holds as ``/proc/driver/nvidia/gpus`` lists them, each with its device minor number
    #: (``/dev/nvidia<minor>``, its ``information`` file's "Device Minor"); None where the folder was not read. A
    #: container's view lists only the GPUs it was given (the container toolkit mounts theirs alone).
    driver_gpus: tuple[DriverGpu, ...] | None = None


@dataclass(frozen=True)
class DriverGpu:
    """A GPU the nvidia driver holds: its folder in ``/proc/driver/nvidia/gpus`` and its device minor number."""

    bus_id: str
    minor: int | None


# --- visibility -----------------------------------------------------------------------


@dataclass(frozen=True)
class VisibleEntry:
    text: str
    #: "index", "uuid", "mig", or "invalid".
    kind: str
    #: Index for kind "index"; otherwise None.
    index: int | None
    #: False when the entry (or one before it) makes the driver stop reading the list.
    honoured: bool
    reason: str | None


@dataclass(frozen=True)
class VisibilityFacts:
    cuda_visible_devices: str | None
    nvidia_visible_devices: str | None
    cuda_device_order: str | None
    entries: tuple[VisibleEntry, ...]
    #: True when CUDA_VISIBLE_DEVICES, as the driver reads it, leaves no device at all.
    hides_all: bool
    #: Number of GPUs the process could see from the list, when it can be told.
    visible_count: int | None
    #: How many GPUs the list was judged against (sysfs count), None when unknown.
    device_count: int | None
    notes: tuple[str, ...]


# --- driver (child processes) ---------------------------------------------------------


@dataclass(frozen=True)
class LibraryLoad:
    name: str
    loaded: bool
    #: The file the loader resolved the name to (from /proc/self/maps), when loaded.
    path: str | None
    #: The loader's own message when it failed (dlerror text).
    error: str | None


@dataclass(frozen=True)
class CudaCall:
    function: str
    code: int | None
    name: str | None
    message: str | None
    #: Set when the entry point itself is absent from the library.
    missing: bool = False


@dataclass(frozen=True)
class CudaDevice:
    """One device as the CUDA driver API enumerates it (CUDA ordinal order, after CUDA_VISIBLE_DEVICES)."""

    ordinal: int
    name: str | None
    cc_major: int | None
    cc_minor: int | None
    memory_total: int | None
    pci_bus_id: str | None
    uuid: str | None
    #: Free memory as cuMemGetInfo reports it inside a context on this device.
    memory_free: int | None
    #: The failed call when a context could not be made (or memory not read): its code is the fact.
    context_error: CudaCall | None = None
    calls: tuple[CudaCall, ...] = ()

    @property
    def compute_capability(self) -> str | None:
        if self.cc_major is None or self.cc_minor is None:
            return None
        return f"{self.cc_major}.{self.cc_minor}"


@dataclass(frozen=True)
class CudaDriverFacts:
    library: LibraryLoad
    init: CudaCall | None
    driver_version: int | None
    device_count: int | None
    calls: tuple[CudaCall, ...] = ()
    devices: tuple[CudaDevice, ...] = ()


# --- NVML inventory and health (child process, nvidia-ml-py) ----------------------------


@dataclass(frozen=True)
class NvmlError:
    """An NVML call that gave no value: kept with its code and name, never turned into a silent None."""

    #: The NVML entry point (C name), e.g. "nvmlDeviceGetMemoryInfo_v2".
    function: str
    #: "not-supported" (this GPU or driver has no such thing), "function-not-found" (the driver predates the
    #: entry point) or "failed" (a real error).
    kind: str
    code: int | None
    name: str
    message: str | None


@dataclass(frozen=True)
class NvmlMemory:
    total: int
    free: int
    used: int
    #: Driver and firmware reservation (only the _v2 call reports it apart from "used").
    reserved: int | None
    #: The entry point that answered: nvmlDeviceGetMemoryInfo_v2, or the v1 call on older drivers.
    api: str


@dataclass(frozen=True)
class NvmlProcess:
    pid: int
    #: Bytes of GPU memory it holds; None where NVML cannot tell (NVML_VALUE_NOT_AVAILABLE).
    used_memory: int | None
    #: From nvmlSystemGetProcessName; None when it cannot be read (the error is in the GPU's errors).
    name: str | None


@dataclass(frozen=True)
class MigInstance:
    index: int
    uuid: str | None
    name: str | None
    memory_total: int | None


@dataclass(frozen=True)
class NvmlMig:
    current: int
    pending: int
    max_devices: int | None
    instances: tuple[MigInstance, ...] = ()


@dataclass(frozen=True)
class NvmlEcc:
    enabled: bool
    pending_enabled: bool
    volatile_uncorrected: int | None
    aggregate_uncorrected: int | None


@dataclass(frozen=True)
class RetiredPages:
    multiple_sbe: int
    double_bit: int
    pending: bool


@dataclass(frozen=True)
class RemappedRows:
    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool


@dataclass(frozen=True)
class NvmlPcie:
    gen: int | None
    #: The maximum of this GPU in this slot (nvmlDeviceGetMaxPcieLinkGeneration / ...Width).
    gen_max: int | None
    #: What the GPU itself supports, whatever the slot (newer drivers only).
    gpu_gen_max: int | None
    width: int | None
    width_max: int | None


@dataclass(frozen=True)
class NvLinkState:
    """One NVLink of a GPU: what nvmlDeviceGetNvLinkState answered for its index, and its error counters."""

    link: int
    #: NVML_NVLINK_STATE_*: 0 inactive, 1 active, 2 asleep (a trained link in a low-power state).
    state: int
    #: nvmlDeviceGetNvLinkErrorCounter (DL replay, DL recovery, CRC flit, CRC data): counts since the driver
    #: loaded or the counters were last reset (``nvidia-smi nvlink -re``); None where NVML gives none.
    replay: int | None = None
    recovery: int | None = None
    crc_flit: int | None = None
    crc_data: int | None = None

    @property
    def up(self) -> bool:
        """Trained: active, or asleep in a low-power state (which is power saving, not a fault)."""
        return self.state in (1, 2)


@dataclass(frozen=True)
class NvmlNvLink:
    """A GPU's NVLinks as NVML lists them: each link index from 0 that nvmlDeviceGetNvLinkState answered, up to
    the first it refused. NVML answers for every link the GPU has, trained or not (an H100 NVL without a bridge
    answers 18 inactive links), and refuses the next index with NVML_ERROR_INVALID_ARGUMENT; a GPU without
    NVLink refuses link 0 with NVML_ERROR_NOT_SUPPORTED."""

    links: tuple[NvLinkState, ...]
    #: The answer that ended the walk (None when every index up to NVML_NVLINK_MAX_LINKS answered).
    ended_by: NvmlError | None = None

    @property
    def active(self) -> int:
        return sum(1 for link in self.links if link.up)

    @property
    def inactive(self) -> tuple[int, ...]:
        return tuple(link.link for link in self.links if not link.up)


@dataclass(frozen=True)
class NvmlFabric:
    """nvmlDeviceGetGpuFabricInfoV (else nvmlDeviceGetGpuFabricInfo): the GPU's registration with the NVLink
    fabric of an NVSwitch system (HGX, GB200 NVL). NOT_SUPPORTED (no such fabric) is the normal answer elsewhere."""

    #: nvmlGpuFabricState_t: 0 not supported, 1 not started, 2 in progress, 3 completed.
    state: int
    #: An nvmlReturn_t: the outcome of the registration once completed (0 success; e.g. 23 insufficient resources).
    status: int | None
    status_name: str | None
    clique_id: int | None
    cluster_uuid: str | None
    #: The V call's health mask (NVML_GPU_FABRIC_HEALTH_MASK_*); None from the older call.
    health_mask: int | None
    api: str


@dataclass(frozen=True)
class NvmlGpu:
    index: int
    #: Why no handle could be had (e.g. NVML_ERROR_GPU_IS_LOST): then every other field is empty.
    handle_error: NvmlError | None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    cc_major: int | None = None
    cc_minor: int | None = None
    memory: NvmlMemory | None = None
    #: None when the list could not be read (the error is in ``errors``).
    processes: tuple[NvmlProcess, ...] | None = None
    processes_api: str | None = None
    mig: NvmlMig | None = None
    #: nvmlComputeMode_t: 0 default, 2 prohibited, 3 exclusive process.
    compute_mode: int | None = None
    persistence_mode: bool | None = None
    ecc: NvmlEcc | None = None
    retired_pages: RetiredPages | None = None
    remapped_rows: RemappedRows | None = None
    #: nvmlClocksEventReason* bit mask.
    clocks_event_reasons: int | None = None
    temperature_c: int | None = None
    power_usage_mw: int | None = None
    power_limit_mw: int | None = None
    #: Performance state (0 = P0, the highest).
    pstate: int | None = None
    utilization_gpu: int | None = None
    utilization_memory: int | None = None
    pcie: NvmlPcie | None = None
    #: Its NVLinks; None where they were not read (no handle, an older probe).
    nvlink: NvmlNvLink | None = None
    fabric: NvmlFabric | None = None
    #: Every call about this GPU that gave no value.
    errors: tuple[NvmlError, ...] = ()

    @property
    def id(self) -> str:
        """The GPU as checks and findings name it: ``GPU-<NVML index>``."""
        return f"GPU-{self.index}"

    @property
    def compute_capability(self) -> str | None:
        if self.cc_major is None or self.cc_minor is None:
            return None
        return f"{self.cc_major}.{self.cc_minor}"


@dataclass(frozen=True)
class NvmlLink:
    """Two GPUs (NVML indices a < b): peer-to-peer status and PCIe topology between them."""

    a: int
    b: int
    #: nvmlGpuP2PStatus_t for reads over PCIe and for NVLink: 0 OK, 1 chipset, 2 GPU, 3 IOH topology,
    #: 4 disabled by regkey, 5 not supported, 6 unknown.
    p2p_read: int | None
    p2p_nvlink: int | None
    #: nvmlGpuTopologyLevel_t of the common ancestor: 0 internal, 10 single switch, 20 multiple switches,
    #: 30 host bridge, 40 NUMA node, 50 system (across sockets).
    topology: int | None
    errors: tuple[NvmlError, ...] = ()


@dataclass(frozen=True)
class NvmlFacts:
    """What NVML says: the loader's view and init (from ctypes), then what nvidia-ml-py reads; without
    the bindings only the first fields are filled (``probes.driver.probe_nvml_basic``)."""

    library: LibraryLoad
    init: CudaCall | None
    driver_version: str | None
    device_count: int | None
    calls: tuple[CudaCall, ...] = ()
    #: The nvidia-ml-py version used, or why it could not be imported.
    bindings: str | None = None
    nvml_version: str | None = None
    #: As nvmlSystemGetCudaDriverVersion returns it, e.g. 12040.
    cuda_driver_version: int | None = None
    gpus: tuple[NvmlGpu, ...] = ()
    links: tuple[NvmlLink, ...] = ()
    #: System-level calls that gave no value.
    errors: tuple[NvmlError, ...] = ()


# --- framework ------------------------------------------------------------------------


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


def gpu_index(device: str) -> int | None:
    """The number of the TensorFlow GPU a device name names, as TensorFlow writes it in any case: ``/GPU:1``,
    ``GPU:1``, ``/job:localhost/replica:0/task:0/device:GPU:1`` -> 1; None for another device (``/CPU:0``) or
    no number (``/GPU:x``, ``/GPU:-1``)."""
    dev = device.upper()
    if "GPU:" not in dev:
        return None
    tail = dev.rsplit("GPU:", 1)[1]
    return int(tail) if tail.isascii() and tail.isdigit() else None


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
class NumericCheck:
    """One computation on a device against a float64 CPU reference (fresh random inputs)."""

    device: str
    #: "matmul", "conv2d" (cuDNN on a GPU), "reduce_sum".
    op: str
    #: "float32", "tensorfloat32", "float16", "bfloat16".
    precision: str
    ok: bool
    ran_on: str | None
    #: max |result - reference| / max |reference| (for a sum: / sum |x|).
    error: float | None
    tolerance: float
    exception: str | None
    shape: str


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




# --- a probe that ran in a child process ----------------------------------------------


@dataclass(frozen=True)
class ChildExit:
    """How a probe child process ended."""

    #: "ok", "crashed" (signal or non-zero exit without a result), "timeout", "error" (could not start),
    #: "cancelled" (killed by gpucheck, or never started, because the run was interrupted).
    status: str
    returncode: int | None
    signal: str | None
    duration_s: float
    #: The last lines the child wrote to stderr (its own log, the loader's, TensorFlow's).
    stderr_tail: tuple[str, ...]
    #: The last stage the child announced before it ended (e.g. "cuInit").
    last_stage: str | None
    error: str | None


@dataclass(frozen=True)
class ProbeOutcome(Generic[T]):
    name: str
    exit: ChildExit
    facts: T | None


@dataclass(frozen=True)
class Facts:
    hardware: HardwareFacts
    kernel: KernelFacts
    visibility: VisibilityFacts
    cuda: ProbeOutcome[CudaDriverFacts]
    nvml: ProbeOutcome[NvmlFacts]
    #: None with --gpucheck-framework=none (and so are libraries and placement).
    framework: ProbeOutcome[FrameworkFacts] | None = None
    #: CUDA libraries TensorFlow needs; None when that probe was not run.
    libraries: ProbeOutcome[LibrariesFacts] | None = None
    #: The steps of the one TensorFlow process after its framework facts, each an outcome of its own (the
    #: exit is that process's): its shared set-up, then placement, the training step, numerics, XLA, the
    #: multi-device step (the placement layer's) and the GPU memory step (the resources layer's). None when
    #: not run (--gpucheck-framework=none); an outcome without facts where the process ended before the step.
    tf_setup: ProbeOutcome[TfSetupFacts] | None = None
    placement: ProbeOutcome[PlacementFacts] | None = None
    training_step: ProbeOutcome[TrainingStepFacts] | None = None
    numerics: ProbeOutcome[NumericsFacts] | None = None
    xla: ProbeOutcome[XlaFacts] | None = None
    multi_device: ProbeOutcome[MultiDeviceFacts] | None = None
    gpu_memory: ProbeOutcome[GpuMemoryFacts] | None = None
    #: Memory growth, in a TensorFlow process of its own; None when not tried (``not_run`` says why).
    memory_growth: ProbeOutcome[MemoryConfigFacts] | None = None
    #: TF_GPU_ALLOCATOR=cuda_malloc_async, in a TensorFlow process of its own; None when not tried.
    cuda_malloc_async: ProbeOutcome[MemoryConfigFacts] | None = None
    #: The units' facts by field (``performance``, ``cluster_config``, ``cluster``): each unit reads its own
    #: through a typed accessor of its package; in JSON they stand beside the fields above. A unit this run
    #: did not check has its field, as None.
    units: dict[str, Any] = field(default_factory=dict, metadata={"flatten": True})
    #: Child probes not started, and why (``memory-growth``: "no NVIDIA GPU on the PCI bus").
    not_run: dict[str, str] = field(default_factory=dict)
    #: The environment variables the rules weigh (``gpucheck.probes.host.ENVIRONMENT_KEYS``), as this run
    #: saw them: rules read them here, never from ``os.environ``.
    environment: dict[str, str | None] = field(default_factory=dict)

    def unit(self, name: str) -> Any:
        """A unit's facts field (None when this run has none): read through the unit's typed accessor."""
        return self.units.get(name)

    def with_field(self, name: str, value: Any) -> Facts:
        """These facts with one field set: a field of the root, or a unit's."""
        if name in {f.name for f in dataclasses.fields(self)}:
            return dataclasses.replace(self, **{name: value})
        return dataclasses.replace(self, units={**self.units, name: value})


def facts_of(outcome: ProbeOutcome[T] | None) -> T | None:
    """A probe's (or a TensorFlow step's) facts, or None where it did not run or left none."""
    return outcome.facts if outcome is not None else None


def to_json(obj: Any) -> Any:
    """Dataclasses to plain JSON data (tuples become lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = to_json(getattr(obj, f.name))
            if f.metadata.get("flatten"):
                out.update(value)  # a mapping of fields that stand beside the others (Facts.units)
            else:
                out[f.name] = value
        return out
    if isinstance(obj, (list, tuple)):
        return [to_json(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    return obj


def from_json(cls: type[T], data: Any) -> T:
    """Rebuild a facts dataclass from :func:`to_json` output; unknown keys are ignored."""
    return typing.cast(T, _build(cls, data))


def _build(tp: Any, data: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if data is None:
            return None
        return _build(args[0], data)
    if origin is tuple:
        (item_tp, *_rest) = typing.get_args(tp)
        return tuple(_build(item_tp, x) for x in (data or ()))
    if origin in (dict, list) or tp is Any:
        return data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _build(hints[f.name], data[f.name])
        return typing.cast(Any, tp)(**kwargs)
    return data
