"""Facts: what the probes saw, as plain frozen dataclasses that round-trip through JSON.

Facts never hold exceptions; an error is a fact (its code, name, message,
stderr lines). Probe outcomes that ran in a child process carry the way the
child ended, so a crash or a timeout is a fact too.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

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


# --- frameworks -----------------------------------------------------------------------


@dataclass(frozen=True)
class FrameworkGpu:
    """A GPU a framework registers: its name for it ("GPU:0"), the CUDA ordinal it is (None where that cannot be
    told), and what the framework says of it."""

    device: str
    cuda_ordinal: int | None
    name: str | None = None
    capability: tuple[int, int] | None = None


@dataclass(frozen=True)
class FrameworkView:
    """What a framework unit says of itself in terms every module can read (``gpucheck.unit.Framework.view``): the header line's part,
    whether it can run at all, the GPUs it registers, its entries in a benchmark's ``machine_info``. The modules
    outside ``gpucheck.frameworks`` read a framework only through this."""

    #: Its name in --gpucheck-framework ("tensorflow") and as people write it ("TensorFlow").
    name: str
    title: str
    #: Its part of the header line ("TensorFlow 2.20.0 (CPU-only build) sees 0 GPU(s)").
    header: str
    #: Whether it runs at all, even on the CPU (imports, did not crash or hang); None where its probe left no word.
    runs: bool | None
    version: str | None
    #: The GPUs it registers, in its own order.
    gpus: tuple[FrameworkGpu, ...]
    #: Its entries in a benchmark's ``machine_info`` (DESIGN.md's contract: ``tensorflow``, ``cuda_build``...).
    machine_info: dict[str, Any] = field(default_factory=dict)
    #: Whether its multi-GPU collectives' library (NCCL) loads; None where that was not looked at.
    collectives: bool | None = None
    #: Why it registers no GPU because NVML does not initialise (a sentence), where that is why; None otherwise.
    blind_without_nvml: str | None = None
    #: What a test hands the framework to run on its GPU N in the test process, with ``{}`` for N: TensorFlow's
    #: ``tf.device`` takes "/GPU:0", PyTorch's ``torch.device`` "cuda:0" (the ``gpus`` fixture's ``device``).
    device_name: str = "/GPU:{}"


def gpu_index(device: str) -> int | None:
    """The number of the TensorFlow GPU a device name names, as TensorFlow writes it in any case: ``/GPU:1``,
    ``GPU:1``, ``/job:localhost/replica:0/task:0/device:GPU:1`` -> 1; None for another device (``/CPU:0``) or
    no number (``/GPU:x``, ``/GPU:-1``)."""
    dev = device.upper()
    if "GPU:" not in dev:
        return None
    tail = dev.rsplit("GPU:", 1)[1]
    return int(tail) if tail.isascii() and tail.isdigit() else None



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
    #: The units' facts by field (a framework's: ``framework``, ``libraries``, its steps' ...; ``performance``,
    #: ``cluster_config``, ``cluster``): each unit reads its own through a typed accessor of its package; in JSON
    #: they stand beside the fields above. A unit this run did not check has its field, as None.
    units: dict[str, Any] = field(default_factory=dict, metadata={"flatten": True})
    #: Child probes not started, and why (``memory-growth``: "no NVIDIA GPU on the PCI bus").
    not_run: dict[str, str] = field(default_factory=dict)
    #: The environment variables the rules weigh (``gpucheck.probes.host.ENVIRONMENT_KEYS``), as this run
    #: saw them: rules read them here, never from ``os.environ``.
    environment: dict[str, str | None] = field(default_factory=dict)
    #: What each framework this run asked for says of itself (``FrameworkView``), by its name: what the modules
    #: outside the framework's unit read of it. Derived from the unit's facts by the diagnosis
    #: (``gpucheck.registry.with_views``), so not in the JSON: the facts it rests on are.
    frameworks: dict[str, FrameworkView] = field(default_factory=dict, metadata={"derived": True})

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


class Field(Generic[T]):
    """A field of ``Facts.units`` a unit fills, read as its probe outcome (None where this run has none): a unit's typed
    accessor, ``placement = Field("placement", PlacementFacts)`` then ``placement(facts)``."""

    def __init__(self, name: str, cls: type[T]) -> None:
        self.name = name
        self.cls = cls

    def __call__(self, facts: Facts) -> ProbeOutcome[T] | None:
        return typing.cast("ProbeOutcome[T] | None", facts.unit(self.name))


@dataclass(frozen=True)
class NumericCheck:
    """One computation on a device against a float64 CPU reference (fresh random inputs), as each framework's numerics
    step records it."""

    device: str
    #: "matmul", "conv2d" (cuDNN on a GPU), a sum ("reduce_sum" in TensorFlow's, "sum" in PyTorch's).
    op: str
    #: "float32" (TF32 off), "tensorfloat32", "float16", "bfloat16".
    precision: str
    ok: bool
    ran_on: str | None
    #: max |result - reference| / max |reference| (for a sum: / sum |x|).
    error: float | None
    tolerance: float
    exception: str | None
    shape: str


#: The tolerances of the numerics steps' matmuls and convolution: max |result - reference| / max |reference|, fit for
#: each precision (inputs rounded to it, accumulation in float32). On this project's build machine's CPU the errors are
#: about 6e-7 (float32 matmul), 5e-4 (float16), 4e-3 (bfloat16), 3e-7 (conv2d); the margins leave room for the other
#: summation orders of cuBLAS / cuDNN algorithms, while a wrong result is off by order 1. Each framework adds its sum.
NUMERIC_TOLERANCE: dict[tuple[str, str], float] = {
    ("matmul", "float32"): 1e-5,
    ("matmul", "tensorfloat32"): 1e-2,
    ("matmul", "float16"): 1e-2,
    ("matmul", "bfloat16"): 3e-2,
    ("conv2d", "float32"): 1e-4,
}


def to_json(obj: Any) -> Any:
    """Dataclasses to plain JSON data (tuples become lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = to_json(getattr(obj, f.name))
            if f.metadata.get("derived"):
                continue  # computed from the fields that are written (Facts.frameworks)
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


@functools.cache
def _hints(tp: type[Any]) -> dict[str, Any]:
    """A dataclass's field types, resolved once per class: ``typing.get_type_hints`` compiles every annotation string
    again on each call, and a kernel log of 16,000 records is 16,000 calls (7 of a doctor run's 11 s under a profiler)."""
    return typing.get_type_hints(tp)


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
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _build(hints[f.name], data[f.name])
        return typing.cast(Any, tp)(**kwargs)
    return data
