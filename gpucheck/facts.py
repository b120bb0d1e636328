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
class CudaDriverFacts:
    library: LibraryLoad
    init: CudaCall | None
    driver_version: int | None
    device_count: int | None
    calls: tuple[CudaCall, ...] = ()


@dataclass(frozen=True)
class NvmlBasicFacts:
    library: LibraryLoad
    init: CudaCall | None
    driver_version: str | None
    device_count: int | None
    calls: tuple[CudaCall, ...] = ()


# --- framework ------------------------------------------------------------------------


@dataclass(frozen=True)
class TfDevice:
    name: str
    device_type: str
    details: dict[str, Any] = field(default_factory=dict)


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


# --- a probe that ran in a child process ----------------------------------------------


@dataclass(frozen=True)
class ChildExit:
    """How a probe child process ended."""

    #: "ok", "crashed" (signal or non-zero exit without a result), "timeout", "error" (could not start).
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
    nvml: ProbeOutcome[NvmlBasicFacts]
    framework: ProbeOutcome[FrameworkFacts]


def to_json(obj: Any) -> Any:
    """Dataclasses to plain JSON data (tuples become lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
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
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _build(hints[f.name], data[f.name])
        return tp(**kwargs)
    return data
