"""NVML probe: the GPU inventory, memory headroom and health, asked of the driver through nvidia-ml-py.

Runs only inside a probe child process (``gpucheck.probes.child``): on a sick GPU any NVML call can
hang or crash, and the parent turns that into a finding. Before each call the child announces it
(``stage``), so a hang or crash names the call and the GPU.

The library is first loaded with ctypes (for the loader's own message when it cannot be, which
nvidia-ml-py reduces to "NVML Shared Library Not Found"); every later call goes through
:class:`Calls`, which keeps "not supported" and "function not found" (an older driver) apart from
real failures, falls back to an older entry point where the driver lacks the newer one, and never
turns a failure into a silent ``None``: the error, with its code and name, is kept beside the empty
value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

from gpucheck.facts import (
    CudaCall,
    MigInstance,
    NvLinkState,
    NvmlEcc,
    NvmlError,
    NvmlFabric,
    NvmlFacts,
    NvmlGpu,
    NvmlLink,
    NvmlMemory,
    NvmlMig,
    NvmlNvLink,
    NvmlPcie,
    NvmlProcess,
    RemappedRows,
    RetiredPages,
)
from gpucheck.pci import pci_key
from gpucheck.probes.driver import LIBNVML, NVML_ERRORS, load, probe_nvml_basic
from gpucheck.protocol import is_sibling, stage

NOT_SUPPORTED = "not-supported"
FUNCTION_NOT_FOUND = "function-not-found"
FAILED = "failed"

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25

#: nvml.h values; nvidia-ml-py defines NVML_P2P_CAPS_INDEX_READ as a tuple (../shared/PITFALLS.md), so
#: the integers are passed.
P2P_CAPS_INDEX_READ = 0
P2P_CAPS_INDEX_NVLINK = 2
MEMORY_ERROR_TYPE_UNCORRECTED = 1
VOLATILE_ECC = 0
AGGREGATE_ECC = 1
PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT = 0
PAGE_RETIREMENT_CAUSE_DOUBLE_BIT = 1
TEMPERATURE_GPU = 0
MAX_GPUS = 64
#: nvml.h NVML_NVLINK_MAX_LINKS (36 in nvidia-ml-py 13): a bound across architectures, not a GPU's link count.
NVLINK_MAX_LINKS = 36
#: nvmlNvLinkErrorCounter_t: DL replay, DL recovery, CRC flit, CRC data (the counters `nvidia-smi nvlink -e` shows).
NVLINK_COUNTERS = (("replay", 0), ("recovery", 1), ("crc_flit", 2), ("crc_data", 3))


class Calls:
    """Every NVML call of one subject (the system, a GPU, a pair) goes through :meth:`get`."""

    def __init__(self, nv: Any, where: str, announce: bool = True) -> None:
        self.nv = nv
        self.where = where
        #: Whether each call is announced as the child's stage (off where the caller's own stage names the
        #: work, as in the TensorFlow child's steps).
        self.announce = announce
        self.errors: list[NvmlError] = []
        #: The entry point that answered the last successful :meth:`get` (after fallbacks).
        self.answered: str | None = None

    def attempt(self, function: str, call: Callable[[], Any]) -> tuple[Any, NvmlError | None]:
        if self.announce:
            stage(f"{function}({self.where})" if self.where else function)
        try:
            return call(), None
        except self.nv.NVMLError as exc:
            return None, _nvml_error(self.nv, function, exc)
        except self.nv.NVMLLibraryMismatchError:
            # nvidia-ml-py's unversioned names call the newest entry point and say "mismatch" when the
            # driver lacks it (../shared/PITFALLS.md): for us that is "function not found".
            return None, NvmlError(function, FUNCTION_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND,
                                   NVML_ERRORS[NVML_ERROR_FUNCTION_NOT_FOUND], "the driver lacks this entry point")
        except Exception as exc:  # noqa: BLE001 - a bindings error (ctypes.ArgumentError...) is a fact too
            return None, NvmlError(function, FAILED, None, type(exc).__name__, str(exc))

    def get(self, *tries: tuple[str, Callable[[], Any]], absent_ok: tuple[int, ...] = ()) -> Any:
        """The value of the first entry point that answers; an entry point the driver lacks falls
        through to the next (older) one. A final error is recorded, except codes in ``absent_ok``
        (an answer that says "none here", such as NOT_FOUND for an empty MIG slot)."""
        error: NvmlError | None = None
        for function, call in tries:
            value, error = self.attempt(function, call)
            if error is None:
                self.answered = function
                return value
            if error.kind != FUNCTION_NOT_FOUND:
                break
        assert error is not None
        if error.code not in absent_ok:
            self.errors.append(error)
        return None


def _nvml_error(nv: Any, function: str, exc: Any) -> NvmlError:
    code = getattr(exc, "value", None)
    if code == NVML_ERROR_NOT_SUPPORTED:
        kind = NOT_SUPPORTED
    elif code == NVML_ERROR_FUNCTION_NOT_FOUND:
        kind = FUNCTION_NOT_FOUND
    else:
        kind = FAILED
    try:
        message: str | None = str(exc)
    except Exception:  # noqa: BLE001 - nvmlErrorString itself failed
        message = None
    if isinstance(code, int):
        name = NVML_ERRORS.get(code) or next(
            (k for k in dir(nv) if k.startswith("NVML_ERROR_") and getattr(nv, k) == code), f"NVML_ERROR_{code}"
        )
    else:
        name = type(exc).__name__
    return NvmlError(function, kind, code if isinstance(code, int) else None, name, message)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def probe_nvml() -> NvmlFacts:
    lib, loaded = load(LIBNVML, "nvmlInit_v2")
    if lib is None:
        return NvmlFacts(loaded, None, None, None)
    stage("import pynvml")
    try:
        import pynvml as nv
    except Exception as exc:  # noqa: BLE001 - without the bindings, the basic ctypes probe still answers
        return replace(probe_nvml_basic(), bindings=f"nvidia-ml-py cannot be imported: {type(exc).__name__}: {exc}")
    bindings = _bindings_version()
    system = Calls(nv, "")
    _, init_error = system.attempt("nvmlInitWithFlags", nv.nvmlInit)
    init = _as_call("nvmlInitWithFlags", init_error)
    if init_error is not None:
        return NvmlFacts(loaded, init, None, None, (init,), bindings=bindings)
    driver_version = _text(system.get(("nvmlSystemGetDriverVersion", nv.nvmlSystemGetDriverVersion)))
    nvml_version = _text(system.get(("nvmlSystemGetNVMLVersion", nv.nvmlSystemGetNVMLVersion)))
    cuda_version = system.get(
        ("nvmlSystemGetCudaDriverVersion_v2", nv.nvmlSystemGetCudaDriverVersion_v2),
        ("nvmlSystemGetCudaDriverVersion", nv.nvmlSystemGetCudaDriverVersion),
    )
    count = system.get(("nvmlDeviceGetCount_v2", nv.nvmlDeviceGetCount))
    gpus: list[NvmlGpu] = []
    handles: dict[int, Any] = {}
    for index in range(min(count or 0, MAX_GPUS)):
        gpu, handle = _probe_gpu(nv, index)
        gpus.append(gpu)
        if handle is not None:
            handles[index] = handle
    links = _probe_links(nv, handles)
    system.get(("nvmlShutdown", nv.nvmlShutdown))
    return NvmlFacts(
        library=loaded,
        init=init,
        driver_version=driver_version,
        device_count=count,
        calls=(init,),
        bindings=bindings,
        nvml_version=nvml_version,
        cuda_driver_version=cuda_version,
        gpus=tuple(gpus),
        links=links,
        errors=tuple(system.errors),
    )


def _bindings_version() -> str:
    from importlib import metadata

    try:
        return f"nvidia-ml-py {metadata.version('nvidia-ml-py')}"
    except metadata.PackageNotFoundError:
        return "pynvml (version unknown)"


def _as_call(function: str, error: NvmlError | None) -> CudaCall:
    if error is None:
        return CudaCall(function, 0, NVML_ERRORS[0], None)
    return CudaCall(function, error.code, error.name, error.message, missing=error.kind == FUNCTION_NOT_FOUND)


def _probe_gpu(nv: Any, index: int) -> tuple[NvmlGpu, Any]:
    c = Calls(nv, f"GPU {index}")
    handle, error = c.attempt("nvmlDeviceGetHandleByIndex_v2", lambda: nv.nvmlDeviceGetHandleByIndex(index))
    if error is not None:
        return NvmlGpu(index=index, handle_error=error), None
    h = handle
    name = _text(c.get(("nvmlDeviceGetName", lambda: nv.nvmlDeviceGetName(h))))
    uuid = _text(c.get(("nvmlDeviceGetUUID", lambda: nv.nvmlDeviceGetUUID(h))))
    pci = c.get(("nvmlDeviceGetPciInfo_v3", lambda: nv.nvmlDeviceGetPciInfo(h)))
    cc = c.get(("nvmlDeviceGetCudaComputeCapability", lambda: nv.nvmlDeviceGetCudaComputeCapability(h)))
    memory = _memory(nv, c, h)
    processes = _processes(nv, c, h)
    processes_api = c.answered if processes is not None else None
    mig = _mig(nv, c, h)
    ecc = _ecc(nv, c, h)
    retired = _retired_pages(nv, c, h)
    remapped = c.get(("nvmlDeviceGetRemappedRows", lambda: nv.nvmlDeviceGetRemappedRows(h)))
    reasons = c.get(
        ("nvmlDeviceGetCurrentClocksEventReasons", lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h)),
        ("nvmlDeviceGetCurrentClocksThrottleReasons", lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
    )
    util = c.get(("nvmlDeviceGetUtilizationRates", lambda: nv.nvmlDeviceGetUtilizationRates(h)))
    persistence = c.get(("nvmlDeviceGetPersistenceMode", lambda: nv.nvmlDeviceGetPersistenceMode(h)))
    gpu = NvmlGpu(
        index=index,
        handle_error=None,
        name=name,
        uuid=uuid,
        pci_bus_id=_text(pci.busId) if pci is not None else None,
        cc_major=cc[0] if cc is not None else None,
        cc_minor=cc[1] if cc is not None else None,
        memory=memory,
        processes=processes,
        processes_api=processes_api,
        mig=mig,
        compute_mode=c.get(("nvmlDeviceGetComputeMode", lambda: nv.nvmlDeviceGetComputeMode(h))),
        persistence_mode=bool(persistence) if persistence is not None else None,
        ecc=ecc,
        retired_pages=retired,
        remapped_rows=(
            RemappedRows(int(remapped[0]), int(remapped[1]), bool(remapped[2]), bool(remapped[3]))
            if remapped is not None
            else None
        ),
        clocks_event_reasons=int(reasons) if reasons is not None else None,
        temperature_c=c.get(("nvmlDeviceGetTemperature", lambda: nv.nvmlDeviceGetTemperature(h, TEMPERATURE_GPU))),
        power_usage_mw=c.get(("nvmlDeviceGetPowerUsage", lambda: nv.nvmlDeviceGetPowerUsage(h))),
        power_limit_mw=c.get(("nvmlDeviceGetEnforcedPowerLimit", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))),
        pstate=c.get(("nvmlDeviceGetPerformanceState", lambda: nv.nvmlDeviceGetPerformanceState(h))),
        utilization_gpu=int(util.gpu) if util is not None else None,
        utilization_memory=int(util.memory) if util is not None else None,
        pcie=NvmlPcie(
            gen=c.get(("nvmlDeviceGetCurrPcieLinkGeneration", lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h))),
            gen_max=c.get(("nvmlDeviceGetMaxPcieLinkGeneration", lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h))),
            gpu_gen_max=c.get(
                ("nvmlDeviceGetGpuMaxPcieLinkGeneration", lambda: nv.nvmlDeviceGetGpuMaxPcieLinkGeneration(h))
            ),
            width=c.get(("nvmlDeviceGetCurrPcieLinkWidth", lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h))),
            width_max=c.get(("nvmlDeviceGetMaxPcieLinkWidth", lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h))),
        ),
        nvlink=_nvlinks(nv, c, h),
        fabric=_fabric(nv, c, h),
        errors=tuple(c.errors),
    )
    return gpu, handle


def _nvlinks(nv: Any, c: Calls, h: Any) -> NvmlNvLink:
    """Each link index from 0 until NVML refuses one: INVALID_ARGUMENT past the GPU's last link (a GB200 has 18,
    and NVML refuses 18..35: NVIDIA/TensorRT-LLM#17060), NOT_SUPPORTED at link 0 on a GPU without NVLink. Those two
    are answers, kept as ``ended_by``; any other error is also kept in the GPU's errors. The counters are asked
    while the GPU gives them (one NOT_SUPPORTED or missing entry point ends them for the GPU)."""
    links: list[NvLinkState] = []
    counters = True
    for link in range(NVLINK_MAX_LINKS):
        state, error = c.attempt("nvmlDeviceGetNvLinkState", partial(nv.nvmlDeviceGetNvLinkState, h, link))
        if error is not None:
            if error.code not in (NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED) or (
                error.code == NVML_ERROR_NOT_SUPPORTED and link > 0
            ):
                c.errors.append(error)
            return NvmlNvLink(tuple(links), error)
        counts: dict[str, int | None] = {}
        for name, counter in NVLINK_COUNTERS if counters else ():
            value, cerr = c.attempt(
                "nvmlDeviceGetNvLinkErrorCounter", partial(nv.nvmlDeviceGetNvLinkErrorCounter, h, link, counter)
            )
            if cerr is not None:
                # Kept once per link. A trained link without counters means the GPU gives none (not asked again);
                # a link that is down may simply have none to give, and the next link is still asked.
                c.errors.append(cerr)
                if int(state) in (1, 2) and cerr.kind in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
                    counters = False
                break
            counts[name] = int(value)
        links.append(NvLinkState(link, int(state), **counts))
    return NvmlNvLink(tuple(links), None)


def _fabric(nv: Any, c: Calls, h: Any) -> NvmlFabric | None:
    """The GPU's NVLink fabric registration (NVSwitch systems); NOT_SUPPORTED, the answer elsewhere, is kept in
    the GPU's errors as every unsupported call is. Bindings without the calls give None."""
    from ctypes import byref

    def v() -> Any:
        info = nv.c_nvmlGpuFabricInfoV_t()  # its constructor sets the version field (v2)
        nv.nvmlDeviceGetGpuFabricInfoV(h, byref(info))
        return info

    def v1() -> Any:
        info = nv.c_nvmlGpuFabricInfo_t()
        nv.nvmlDeviceGetGpuFabricInfo(h, byref(info))
        return info

    has_v = hasattr(nv, "nvmlDeviceGetGpuFabricInfoV") and hasattr(nv, "c_nvmlGpuFabricInfoV_t")
    has_v1 = hasattr(nv, "nvmlDeviceGetGpuFabricInfo") and hasattr(nv, "c_nvmlGpuFabricInfo_t")
    info, api = None, "nvmlDeviceGetGpuFabricInfoV"
    if has_v:
        info, error = c.attempt(api, v)
        # A driver that lacks the V call, or knows another version of its struct, may still have the older call.
        older = error is not None and (error.kind == FUNCTION_NOT_FOUND or error.code == NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if error is not None and not (older and has_v1):
            c.errors.append(error)
            return None
    if info is None and has_v1:
        api = "nvmlDeviceGetGpuFabricInfo"
        info = c.get((api, v1))
    if info is None:
        return None
    status = int(info.status)
    uuid = bytes(info.clusterUuid).hex()
    return NvmlFabric(
        state=int(info.state),
        status=status,
        status_name=NVML_ERRORS.get(status, f"NVML_ERROR_{status}"),
        clique_id=int(info.cliqueId),
        cluster_uuid=f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}",
        health_mask=int(info.healthMask) if api.endswith("V") else None,
        api=api,
    )


def _memory(nv: Any, c: Calls, h: Any) -> NvmlMemory | None:
    mem = c.get(
        ("nvmlDeviceGetMemoryInfo_v2", lambda: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)),
        ("nvmlDeviceGetMemoryInfo", lambda: nv.nvmlDeviceGetMemoryInfo(h)),
    )
    if mem is None:
        return None
    api = c.answered or "nvmlDeviceGetMemoryInfo"
    reserved = int(mem.reserved) if api.endswith("_v2") else None
    return NvmlMemory(total=int(mem.total), free=int(mem.free), used=int(mem.used), reserved=reserved, api=api)


def _processes(nv: Any, c: Calls, h: Any, names: bool = True) -> tuple[NvmlProcess, ...] | None:
    procs = c.get(
        ("nvmlDeviceGetComputeRunningProcesses_v3", lambda: nv.nvmlDeviceGetComputeRunningProcesses(h)),
        ("nvmlDeviceGetComputeRunningProcesses_v2", lambda: nv.nvmlDeviceGetComputeRunningProcesses_v2(h)),
    )
    if procs is None:
        return None
    answered = c.answered
    out = []
    for p in procs:
        pid = int(p.pid)
        if is_sibling(pid):
            continue  # gpucheck's own TensorFlow process, started beside this one
        name = _text(c.get(("nvmlSystemGetProcessName", partial(nv.nvmlSystemGetProcessName, pid)))) if names else None
        used = p.usedGpuMemory
        out.append(NvmlProcess(pid=pid, used_memory=int(used) if used is not None else None, name=name))
    c.answered = answered
    return tuple(out)


def _mig(nv: Any, c: Calls, h: Any) -> NvmlMig | None:
    # A GPU without MIG answers NOT_SUPPORTED: kept in the errors, as every other unsupported call.
    mode = c.get(("nvmlDeviceGetMigMode", lambda: nv.nvmlDeviceGetMigMode(h)))
    if mode is None:
        return None
    current, pending = int(mode[0]), int(mode[1])
    if current != 1:
        return NvmlMig(current, pending, None)
    max_devices = c.get(("nvmlDeviceGetMaxMigDeviceCount", lambda: nv.nvmlDeviceGetMaxMigDeviceCount(h)))
    instances: list[MigInstance] = []
    for k in range(int(max_devices or 0)):
        # NOT_FOUND: no MIG device in this slot, which is an answer, not a failure.
        mig = c.get(
            ("nvmlDeviceGetMigDeviceHandleByIndex", partial(nv.nvmlDeviceGetMigDeviceHandleByIndex, h, k)),
            absent_ok=(NVML_ERROR_NOT_FOUND,),
        )
        if mig is None:
            continue
        mem = c.get(
            ("nvmlDeviceGetMemoryInfo_v2", partial(nv.nvmlDeviceGetMemoryInfo, mig, version=nv.nvmlMemory_v2)),
            ("nvmlDeviceGetMemoryInfo", partial(nv.nvmlDeviceGetMemoryInfo, mig)),
        )
        instances.append(
            MigInstance(
                index=k,
                uuid=_text(c.get(("nvmlDeviceGetUUID", partial(nv.nvmlDeviceGetUUID, mig)))),
                name=_text(c.get(("nvmlDeviceGetName", partial(nv.nvmlDeviceGetName, mig)))),
                memory_total=int(mem.total) if mem is not None else None,
            )
        )
    return NvmlMig(current, pending, int(max_devices) if max_devices is not None else None, tuple(instances))


def _ecc(nv: Any, c: Calls, h: Any) -> NvmlEcc | None:
    mode = c.get(("nvmlDeviceGetEccMode", lambda: nv.nvmlDeviceGetEccMode(h)))
    if mode is None:
        return None
    enabled = bool(mode[0])
    volatile = aggregate = None
    if enabled:
        volatile = c.get(
            ("nvmlDeviceGetTotalEccErrors",
             lambda: nv.nvmlDeviceGetTotalEccErrors(h, MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC))
        )
        aggregate = c.get(
            ("nvmlDeviceGetTotalEccErrors",
             lambda: nv.nvmlDeviceGetTotalEccErrors(h, MEMORY_ERROR_TYPE_UNCORRECTED, AGGREGATE_ECC))
        )
    return NvmlEcc(
        enabled=enabled,
        pending_enabled=bool(mode[1]),
        volatile_uncorrected=int(volatile) if volatile is not None else None,
        aggregate_uncorrected=int(aggregate) if aggregate is not None else None,
    )


def _retired_pages(nv: Any, c: Calls, h: Any) -> RetiredPages | None:
    # Ampere and later replace page retirement with row remapping: NOT_SUPPORTED there.
    sbe = c.get(
        ("nvmlDeviceGetRetiredPages",
         lambda: nv.nvmlDeviceGetRetiredPages(h, PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT))
    )
    if sbe is None:
        return None
    dbe = c.get(("nvmlDeviceGetRetiredPages", lambda: nv.nvmlDeviceGetRetiredPages(h, PAGE_RETIREMENT_CAUSE_DOUBLE_BIT)))
    pending = c.get(("nvmlDeviceGetRetiredPagesPendingStatus", lambda: nv.nvmlDeviceGetRetiredPagesPendingStatus(h)))
    if dbe is None or pending is None:
        return None
    return RetiredPages(multiple_sbe=len(sbe), double_bit=len(dbe), pending=bool(pending))


def _probe_links(nv: Any, handles: dict[int, Any]) -> tuple[NvmlLink, ...]:
    indices = sorted(handles)
    return tuple(
        _probe_link(nv, a, b, handles[a], handles[b]) for i, a in enumerate(indices) for b in indices[i + 1 :]
    )


def _probe_link(nv: Any, a: int, b: int, ha: Any, hb: Any) -> NvmlLink:
    c = Calls(nv, f"GPU {a}, GPU {b}")
    return NvmlLink(
        a=a,
        b=b,
        p2p_read=c.get(("nvmlDeviceGetP2PStatus", lambda: nv.nvmlDeviceGetP2PStatus(ha, hb, P2P_CAPS_INDEX_READ))),
        p2p_nvlink=c.get(("nvmlDeviceGetP2PStatus", lambda: nv.nvmlDeviceGetP2PStatus(ha, hb, P2P_CAPS_INDEX_NVLINK))),
        topology=c.get(("nvmlDeviceGetTopologyCommonAncestor", lambda: nv.nvmlDeviceGetTopologyCommonAncestor(ha, hb))),
        errors=tuple(c.errors),
    )


# --- the reading the TensorFlow processes take before TensorFlow reserves memory ------------------------


class GpuHeadroom(NamedTuple):
    """One GPU as NVML sees it at one moment: free and total MiB, and the compute processes on it (pid,
    used MiB), gpucheck's own sibling probes left out."""

    free_mb: int
    total_mb: int
    processes: tuple[tuple[int, int | None], ...]


def memory_snapshot() -> dict[str, GpuHeadroom]:
    """Every GPU NVML can read, by canonical PCI bus id (``0000:3b:00.0``), through the same calls and
    fallbacks as :func:`probe_nvml`, unannounced (the caller's stage names the work). Empty without NVML;
    a GPU whose bus id or memory cannot be read is left out."""
    try:
        import pynvml as nv
    except Exception:  # noqa: BLE001 - without the bindings there is nothing to compare with
        return {}
    system = Calls(nv, "", announce=False)
    _, init_error = system.attempt("nvmlInitWithFlags", nv.nvmlInit)
    if init_error is not None:
        return {}
    out: dict[str, GpuHeadroom] = {}
    try:
        count = system.get(("nvmlDeviceGetCount_v2", nv.nvmlDeviceGetCount))
        for index in range(min(count or 0, MAX_GPUS)):
            c = Calls(nv, f"GPU {index}", announce=False)
            h, error = c.attempt("nvmlDeviceGetHandleByIndex_v2", partial(nv.nvmlDeviceGetHandleByIndex, index))
            if error is not None:
                continue
            pci = c.get(("nvmlDeviceGetPciInfo_v3", partial(nv.nvmlDeviceGetPciInfo, h)))
            bus = pci_key(_text(pci.busId)) if pci is not None else None
            memory = _memory(nv, c, h)
            if bus is None or memory is None:
                continue
            processes = _processes(nv, c, h, names=False) or ()
            out[bus.text] = GpuHeadroom(
                memory.free // (1 << 20),
                memory.total // (1 << 20),
                tuple((p.pid, p.used_memory // (1 << 20) if p.used_memory is not None else None) for p in processes),
            )
    finally:
        system.get(("nvmlShutdown", nv.nvmlShutdown))
    return out
