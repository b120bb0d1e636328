"""Driver-layer probes: load ``libcuda.so.1`` and ``libnvidia-ml.so.1`` and ask them the first questions.

These run only inside a probe child process (``gpucheck.probes.child``):
``cuInit`` and ``nvmlInit`` can hang or crash on a sick machine.
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Callable
from functools import cache
from importlib import resources

from gpucheck.facts import CudaCall, CudaDevice, CudaDriverFacts, LibraryLoad, NvmlFacts
from gpucheck.protocol import stage

LIBCUDA = "libcuda.so.1"
LIBNVML = "libnvidia-ml.so.1"

# NVML return codes (nvml.h, enum nvmlReturn_enum); used for names in evidence.
NVML_ERRORS = {
    0: "NVML_SUCCESS",
    1: "NVML_ERROR_UNINITIALIZED",
    2: "NVML_ERROR_INVALID_ARGUMENT",
    3: "NVML_ERROR_NOT_SUPPORTED",
    4: "NVML_ERROR_NO_PERMISSION",
    6: "NVML_ERROR_NOT_FOUND",
    9: "NVML_ERROR_DRIVER_NOT_LOADED",
    10: "NVML_ERROR_TIMEOUT",
    12: "NVML_ERROR_LIBRARY_NOT_FOUND",
    13: "NVML_ERROR_FUNCTION_NOT_FOUND",
    14: "NVML_ERROR_CORRUPTED_INFOROM",
    15: "NVML_ERROR_GPU_IS_LOST",
    16: "NVML_ERROR_RESET_REQUIRED",
    17: "NVML_ERROR_OPERATING_SYSTEM",
    18: "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    19: "NVML_ERROR_IN_USE",
    20: "NVML_ERROR_MEMORY",
    21: "NVML_ERROR_NO_DATA",
    23: "NVML_ERROR_INSUFFICIENT_RESOURCES",
    25: "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
    27: "NVML_ERROR_NOT_READY",
    999: "NVML_ERROR_UNKNOWN",
}


@cache
def cuda_error_names() -> dict[int, str]:
    raw = json.loads(resources.files("gpucheck").joinpath("data/cuda_errors.json").read_text("utf-8"))
    return {int(k): v for k, v in raw.items() if not k.startswith("_")}


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _library_file(lib: ctypes.CDLL, symbol: str) -> str | None:
    """The file the loader resolved ``lib`` to, asked of ``dladdr`` with one of its symbols."""
    try:
        func = getattr(lib, symbol)
        libc = ctypes.CDLL(None)
        info = _DlInfo()
        if libc.dladdr(ctypes.cast(func, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            name: bytes = info.dli_fname
            return os.path.realpath(name.decode(errors="replace"))
    except (AttributeError, OSError):
        return None
    return None


def load(name: str, symbol: str) -> tuple[ctypes.CDLL | None, LibraryLoad]:
    stage(f"dlopen {name}")
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        return None, LibraryLoad(name, False, None, str(exc))
    return lib, LibraryLoad(name, True, _library_file(lib, symbol), None)


def _call(
    lib: ctypes.CDLL,
    function: str,
    describe: Callable[[ctypes.CDLL, int], tuple[str | None, str | None]],
    *args: object,
) -> CudaCall:
    """Call a C entry point that returns a status code; an absent entry point is a fact, not an error."""
    fn = getattr(lib, function, None)
    if fn is None:
        return CudaCall(function, None, None, None, missing=True)
    stage(function)
    fn.restype = ctypes.c_int
    code = int(fn(*args))
    name, message = describe(lib, code)
    return CudaCall(function, code, name, message)


def _cuda_call(lib: ctypes.CDLL, function: str, *args: object) -> CudaCall:
    return _call(lib, function, _cuda_error_text, *args)


def _cuda_error_text(lib: ctypes.CDLL, code: int) -> tuple[str | None, str | None]:
    name = message = None
    for fn_name in ("cuGetErrorName", "cuGetErrorString"):
        fn = getattr(lib, fn_name, None)
        if fn is None:
            continue
        out = ctypes.c_char_p()
        fn.restype = ctypes.c_int
        if fn(ctypes.c_int(code), ctypes.byref(out)) == 0 and out.value:
            text = out.value.decode(errors="replace")
            if fn_name == "cuGetErrorName":
                name = text
            else:
                message = text
    return name or cuda_error_names().get(code), message


def probe_cuda_driver() -> CudaDriverFacts:
    lib, loaded = load(LIBCUDA, "cuInit")
    if lib is None:
        return CudaDriverFacts(loaded, None, None, None)
    calls: list[CudaCall] = []
    version = ctypes.c_int(0)
    # cuDriverGetVersion answers without cuInit and without touching the GPU.
    ver_call = _cuda_call(lib, "cuDriverGetVersion", ctypes.byref(version))
    calls.append(ver_call)
    init = _cuda_call(lib, "cuInit", ctypes.c_uint(0))
    calls.append(init)
    count: int | None = None
    if init.code == 0:
        n = ctypes.c_int(0)
        count_call = _cuda_call(lib, "cuDeviceGetCount", ctypes.byref(n))
        calls.append(count_call)
        count = n.value if count_call.code == 0 else None
    devices = tuple(probe_cuda_device(lib, i) for i in range(min(count or 0, MAX_DEVICES)))
    return CudaDriverFacts(
        library=loaded,
        init=init,
        driver_version=version.value if ver_call.code == 0 else None,
        device_count=count,
        calls=tuple(calls),
        devices=devices,
    )


#: cuda.h, enum CUdevice_attribute.
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
MAX_DEVICES = 64


class _CUuuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 16)]


def _format_uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def probe_cuda_device(lib: ctypes.CDLL, ordinal: int) -> CudaDevice:
    """Name, compute capability, memory, PCI bus id and UUID of CUDA device ``ordinal``, and its free
    memory seen from a (primary) context. Every failed call is kept; none stops the others."""
    calls: list[CudaCall] = []

    def call(function: str, *args: object) -> bool:
        c = _cuda_call(lib, function, *args)
        calls.append(c)
        return c.code == 0

    dev = ctypes.c_int(0)
    if not call("cuDeviceGet", ctypes.byref(dev), ctypes.c_int(ordinal)):
        return CudaDevice(ordinal, None, None, None, None, None, None, None, calls[-1], tuple(calls))
    name_buf = ctypes.create_string_buffer(256)
    name = name_buf.value.decode(errors="replace") if call(
        "cuDeviceGetName", name_buf, ctypes.c_int(len(name_buf)), dev
    ) else None
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    ok_major = call("cuDeviceGetAttribute", ctypes.byref(major), ctypes.c_int(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), dev)
    ok_minor = call("cuDeviceGetAttribute", ctypes.byref(minor), ctypes.c_int(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), dev)
    total = ctypes.c_size_t(0)
    ok_total = call("cuDeviceTotalMem_v2", ctypes.byref(total), dev)
    bus_buf = ctypes.create_string_buffer(64)
    bus = bus_buf.value.decode(errors="replace") if call(
        "cuDeviceGetPCIBusId", bus_buf, ctypes.c_int(len(bus_buf)), dev
    ) else None
    raw_uuid = _CUuuid()
    uuid = None
    if call("cuDeviceGetUuid_v2", ctypes.byref(raw_uuid), dev) or (
        calls[-1].missing and call("cuDeviceGetUuid", ctypes.byref(raw_uuid), dev)
    ):
        uuid = _format_uuid(bytes(raw_uuid.bytes))
    free, context_error = _free_memory(lib, dev, calls)
    return CudaDevice(
        ordinal=ordinal,
        name=name,
        cc_major=major.value if ok_major else None,
        cc_minor=minor.value if ok_minor else None,
        memory_total=total.value if ok_total else None,
        pci_bus_id=bus,
        uuid=uuid,
        memory_free=free,
        context_error=context_error,
        calls=tuple(calls),
    )


def _free_memory(lib: ctypes.CDLL, dev: ctypes.c_int, calls: list[CudaCall]) -> tuple[int | None, CudaCall | None]:
    """cuMemGetInfo inside the device's primary context (what a framework will get), then release it."""
    ctx = ctypes.c_void_p()
    retain = _cuda_call(lib, "cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    calls.append(retain)
    if retain.code != 0:
        return None, retain
    try:
        current = _cuda_call(lib, "cuCtxSetCurrent", ctx)
        calls.append(current)
        if current.code != 0:
            return None, current
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        info = _cuda_call(lib, "cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        calls.append(info)
        _cuda_call(lib, "cuCtxSetCurrent", ctypes.c_void_p())
        return (free.value, None) if info.code == 0 else (None, info)
    finally:
        release = _cuda_call(lib, "cuDevicePrimaryCtxRelease_v2", dev)
        if release.missing:
            release = _cuda_call(lib, "cuDevicePrimaryCtxRelease", dev)
        calls.append(release)


def _nvml_error_text(lib: ctypes.CDLL, code: int) -> tuple[str | None, str | None]:
    message = None
    err = getattr(lib, "nvmlErrorString", None)
    if err is not None:
        err.restype = ctypes.c_char_p
        raw = err(ctypes.c_int(code))
        message = raw.decode(errors="replace") if raw else None
    return NVML_ERRORS.get(code, f"NVML_ERROR_{code}"), message


def _nvml_call(lib: ctypes.CDLL, function: str, *args: object) -> CudaCall:
    return _call(lib, function, _nvml_error_text, *args)


def probe_nvml_basic() -> NvmlFacts:
    lib, loaded = load(LIBNVML, "nvmlInit_v2")
    if lib is None:
        return NvmlFacts(loaded, None, None, None)
    calls: list[CudaCall] = []
    init = _nvml_call(lib, "nvmlInit_v2")
    if init.missing:
        init = _nvml_call(lib, "nvmlInit")
    calls.append(init)
    driver_version = None
    count = None
    if init.code == 0:
        buf = ctypes.create_string_buffer(96)
        ver = _nvml_call(lib, "nvmlSystemGetDriverVersion", buf, ctypes.c_uint(len(buf)))
        calls.append(ver)
        if ver.code == 0:
            driver_version = buf.value.decode(errors="replace")
        n = ctypes.c_uint(0)
        cnt = _nvml_call(lib, "nvmlDeviceGetCount_v2", ctypes.byref(n))
        calls.append(cnt)
        if cnt.code == 0:
            count = n.value
        calls.append(_nvml_call(lib, "nvmlShutdown"))
    return NvmlFacts(loaded, init, driver_version, count, tuple(calls))
