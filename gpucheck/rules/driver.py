"""Driver layer: do the user-space driver libraries load, initialise and match the kernel module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpucheck.facts import CudaCall, Facts, FrameworkView
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.common import (
    CUDA_NO_DEVICE,
    CUDA_SYSTEM_NOT_READY,
    gpus_on_bus,
    library_version,
    nvswitches,
    probe_failure,
)
from gpucheck.settings import Settings

CUDA_STUB_LIBRARY = 34
CUDA_INSUFFICIENT_DRIVER = 35
CUDA_SYSTEM_DRIVER_MISMATCH = 803
CUDA_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804
NVML_DRIVER_NOT_LOADED = 9
NVML_GPU_IS_LOST = 15
NVML_LIB_RM_VERSION_MISMATCH = 18


def driver_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """The driver layer's findings, in this order:

    - ``driver-hung``, ``driver-call-crashed``, ``diagnosis-incomplete``: the CUDA probe child hung, died
      or could not run (``rules.common.probe_failure``);
    - ``libcuda-missing``: libcuda.so.1 does not load;
    - else cuInit's error: ``driver-library-mismatch`` (803), ``driver-too-old`` (35),
      ``forward-compat-unsupported`` (804), ``cuda-init-failed`` (the stub library, 34, or any other);
    - the same three for the NVML probe child, unless the CUDA probe's failure has the same id;
    - ``nvml-missing``: libnvidia-ml.so.1 does not load;
    - else nvmlInit's error: ``driver-library-mismatch`` (18), ``driver-not-loaded`` (9), ``gpu-lost`` (15),
      ``nvml-missing`` (any other); one CUDA already reported joins it as evidence;
    - ``driver-library-mismatch``: libcuda's file name and the kernel module differ in version (not for
      a cuda-compat libcuda that cuInit refused with 804: that difference is by design).
    """
    out: list[Finding] = []
    cuda_crash = probe_failure("CUDA driver", "libcuda.so.1", facts.cuda.exit, settings.timeout)
    if cuda_crash is not None:
        out.append(cuda_crash)
    out += _libcuda_missing(facts) or _cuinit_failed(facts)
    nvml_crash = probe_failure("NVML", "libnvidia-ml.so.1", facts.nvml.exit, settings.timeout)
    if nvml_crash is not None and (cuda_crash is None or cuda_crash.id != nvml_crash.id):
        out.append(nvml_crash)
    library_missing = _nvml_library_missing(facts)
    if library_missing is not None:
        out.append(library_missing)
    else:
        out = _with_nvml_init_failed(out, facts)
    out += _versions_differ(facts, out)
    return out


def _libcuda_missing(facts: Facts) -> list[Finding]:
    """``libcuda-missing``: dlopen("libcuda.so.1") failed."""
    cf = facts.cuda.facts
    if cf is None or cf.library.loaded:
        return []
    module, ld_path = facts.kernel.module_version, facts.environment.get("LD_LIBRARY_PATH")
    return [
        finding(
            "libcuda-missing",
            Severity.BLOCKER,
            summary="libcuda.so.1, the CUDA driver library, cannot be loaded.",
            cause=f"dlopen(\"libcuda.so.1\") failed: {cf.library.error}.",
            remedy=(
                f"Install the user-space driver that matches the kernel module {module} (e.g. "
                f"`sudo apt install libnvidia-compute-{module.split('.')[0]}`), or in a container start it with "
                "`--gpus all` so the NVIDIA Container Toolkit mounts it."
                if module
                else "Install the NVIDIA driver (it provides libcuda.so.1); in a container, start it with "
                "`--gpus all` so the NVIDIA Container Toolkit mounts the driver libraries."
            ),
            evidence={"loader_error": cf.library.error, "LD_LIBRARY_PATH": ld_path, "kernel_module": module},
        )
    ]


def _cuinit_failed(facts: Facts) -> list[Finding]:
    """cuInit's error code, read through ``_CUINIT`` (``cuda-init-failed`` for a code not there). No
    finding for CUDA_ERROR_NO_DEVICE when no GPU is on the bus, CUDA_VISIBLE_DEVICES is set, or NVML
    says every GPU is lost or in MIG mode without an instance: the hardware and visibility rules say so. None for
    CUDA_ERROR_SYSTEM_NOT_READY (802) where NVSwitches are on the bus: ``fabric-manager-not-running`` says it."""
    cf = facts.cuda.facts
    init = cf.init if cf is not None else None
    if cf is None or init is None or init.code in (0, None):
        return []
    if init.code == CUDA_NO_DEVICE and (
        not gpus_on_bus(facts) or facts.visibility.cuda_visible_devices is not None or nvml_explains_no_device(facts)
    ):
        return []
    if init.code == CUDA_SYSTEM_NOT_READY and nvswitches(facts):
        return []
    evidence: dict[str, Any] = {"cuInit": init.code, "name": init.name, "message": init.message, "libcuda": cf.library.path}
    return [_CUINIT.get(init.code, _cuda_init_failed)(facts, init, cf.library.path, evidence)]


def _cuinit_driver_mismatch(facts: Facts, init: CudaCall, lib_path: str | None, evidence: dict[str, Any]) -> Finding:
    """``driver-library-mismatch``: cuInit returned CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)."""
    return _driver_library_mismatch(facts.kernel.module_version, library_version(lib_path), evidence)


def _driver_too_old(facts: Facts, init: CudaCall, lib_path: str | None, evidence: dict[str, Any]) -> Finding:
    """``driver-too-old``: cuInit returned CUDA_ERROR_INSUFFICIENT_DRIVER (35)."""
    return finding(
        "driver-too-old",
        Severity.BLOCKER,
        summary="cuInit says the driver is too old for this CUDA driver library.",
        cause=_call_text(init) + ": the loaded libcuda is newer than the kernel driver can serve.",
        remedy="Install a newer NVIDIA driver (`sudo apt install nvidia-driver-<newer branch>`) and reboot.",
        evidence=evidence,
    )


def _forward_compat_unsupported(
    facts: Facts, init: CudaCall, lib_path: str | None, evidence: dict[str, Any]
) -> Finding:
    """``forward-compat-unsupported``: cuInit returned CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804). The
    compat libcuda differs from the kernel module by design: no ``driver-library-mismatch`` (reboot) beside it."""
    module, library = facts.kernel.module_version, library_version(lib_path)
    by_design = (
        f" Its version ({library}) differs from the kernel module's ({module}) by design: rebooting changes nothing."
        if library and module and library != module
        else ""
    )
    return finding(
        "forward-compat-unsupported",
        Severity.BLOCKER,
        summary="cuInit refuses the CUDA forward-compatibility package on this GPU (804).",
        cause=(
            f"{_call_text(init)}: the libcuda.so.1 loaded ({lib_path}) is a cuda-compat package newer than "
            "the kernel driver, and forward compatibility only works on data-center GPUs (and some "
            "NGC-ready RTX); on this GPU the user-space driver must match the kernel module." + by_design
        ),
        remedy=(
            "Remove the forward-compatibility libraries from the loader's path (the cuda-compat "
            "directory, e.g. /usr/local/cuda/compat, from LD_LIBRARY_PATH or /etc/ld.so.conf.d, then "
            "`sudo ldconfig`), or upgrade the NVIDIA driver itself to the CUDA version you need."
        ),
        evidence={**evidence, "kernel_module": module, "user_space": library,
                  "LD_LIBRARY_PATH": facts.environment.get("LD_LIBRARY_PATH")},
    )


def _cuda_stub_library(facts: Facts, init: CudaCall, lib_path: str | None, evidence: dict[str, Any]) -> Finding:
    """``cuda-init-failed``: cuInit returned CUDA_ERROR_STUB_LIBRARY (34), the toolkit's link stub was loaded."""
    return finding(
        "cuda-init-failed",
        Severity.BLOCKER,
        summary="The libcuda.so.1 that was loaded is the CUDA toolkit's link stub, not the driver.",
        cause=f"{_call_text(init)}; the stub at {lib_path} comes first on the loader's path.",
        remedy="Remove the toolkit's `stubs` directory from LD_LIBRARY_PATH (and from /etc/ld.so.conf.d), then run `sudo ldconfig`.",
        evidence={**evidence, "LD_LIBRARY_PATH": facts.environment.get("LD_LIBRARY_PATH")},
    )


def _cuda_init_failed(facts: Facts, init: CudaCall, lib_path: str | None, evidence: dict[str, Any]) -> Finding:
    """``cuda-init-failed``: cuInit returned an error code no other rule explains."""
    return finding(
        "cuda-init-failed",
        Severity.BLOCKER,
        summary=f"cuInit failed with {init.name or init.code}.",
        cause=_call_text(init) + ".",
        remedy=(
            "Read `sudo dmesg | grep -iE 'nvrm|xid'` and `nvidia-smi`; check that /dev/nvidia-uvm exists "
            "(`sudo modprobe nvidia-uvm`); reinstall the driver if the error persists."
        ),
        evidence=evidence,
    )


#: cuInit's error code -> the finding it means.
_CUINIT: dict[int, Callable[[Facts, CudaCall, str | None, dict[str, Any]], Finding]] = {
    CUDA_SYSTEM_DRIVER_MISMATCH: _cuinit_driver_mismatch,
    CUDA_INSUFFICIENT_DRIVER: _driver_too_old,
    CUDA_COMPAT_NOT_SUPPORTED_ON_DEVICE: _forward_compat_unsupported,
    CUDA_STUB_LIBRARY: _cuda_stub_library,
}


def _nvml_library_missing(facts: Facts) -> Finding | None:
    """``nvml-missing``: dlopen("libnvidia-ml.so.1") failed; a blocker where a framework goes blind without it."""
    nf = facts.nvml.facts
    if nf is None or nf.library.loaded:
        return None
    blind = _blind_without_nvml(facts)
    capabilities = facts.environment.get("NVIDIA_DRIVER_CAPABILITIES") or None  # empty: the toolkit's default
    no_utility = capabilities is not None and not _has_utility(capabilities)
    return finding(
        "nvml-missing",
        # Monitoring (and gpucheck's health checks) go blind without NVML; a framework may go blind too.
        Severity.BLOCKER if blind else Severity.DEGRADED,
        summary=(
            f"libnvidia-ml.so.1 (NVML) cannot be loaded, and {blind.title} {blind.version} registers no GPU without "
            f"it, although the CUDA driver sees {_count_text(facts)}."
            if blind
            else "libnvidia-ml.so.1 (NVML, what nvidia-smi uses) cannot be loaded."
        ),
        cause=f"dlopen(\"libnvidia-ml.so.1\") failed: {nf.library.error}."
        + (f" {blind.blind_without_nvml}" if blind else "")
        + (
            f" NVIDIA_DRIVER_CAPABILITIES={capabilities} leaves out `utility`, so the NVIDIA Container "
            "Toolkit did not mount libnvidia-ml into the container."
            if no_utility
            else ""
        ),
        remedy=(
            "Start the container with NVML mounted: `-e NVIDIA_DRIVER_CAPABILITIES=compute,utility` (or "
            "`all`) with `--gpus all`."
            if no_utility
            else "Install the NVIDIA driver's NVML library of the same version as libcuda (package "
            "`libnvidia-compute-<branch>` or the driver installer); in a container use `--gpus all`."
        ),
        evidence={
            "loader_error": nf.library.error,
            "LD_LIBRARY_PATH": facts.environment.get("LD_LIBRARY_PATH"),
            "NVIDIA_DRIVER_CAPABILITIES": capabilities,
            **({f"{blind.name}_gpus": 0, "cuda_devices": _count(facts)} if blind else {}),
        },
    )


def _with_nvml_init_failed(out: list[Finding], facts: Facts) -> list[Finding]:
    """``out`` with nvmlInit's error (a GPU on the bus), read by ``_nvml_init_error``. NVML_ERROR_DRIVER_NOT_LOADED agreeing with the kernel layer is one finding, the
    kernel's (NVML's answer is in its evidence); said alone (the module looks loaded), it is NVML's own.
    A finding CUDA already reported (cuInit 803 for a mismatch) takes NVML's answer into its evidence."""
    nf = facts.nvml.facts
    init = nf.init if nf is not None else None
    if init is None or init.code in (0, None) or not gpus_on_bus(facts):
        return out
    kernel = facts.kernel
    kernel_says_unloaded = kernel.version_line is None and not kernel.module_in_sysfs and not facts.hardware.wsl_dxg
    evidence: dict[str, Any] = {"nvmlInit": init.code, "name": init.name, "message": init.message}
    f = _nvml_init_error(init, kernel.module_version, evidence)
    if f.id == "driver-not-loaded" and kernel_says_unloaded:
        return out
    if f.id == "nvml-missing":
        f = _blind_without_nvml_init(f, facts)
    same = next((i for i, o in enumerate(out) if o.id == f.id and o.subject == f.subject), None)
    if same is None:
        return [*out, f]
    return [*out[:same], replace(out[same], evidence={**out[same].evidence, "nvmlInit": f.evidence}), *out[same + 1 :]]


#: nvmlInit's error codes that name a fault of their own -> (finding id, summary, remedy); the cause is
#: the call's answer. A version mismatch (18) is ``driver-library-mismatch``, any other code ``nvml-missing``.
_NVML_INIT_ERRORS: dict[int, tuple[str, str, str]] = {
    NVML_DRIVER_NOT_LOADED: (
        "driver-not-loaded",
        "NVML says the NVIDIA kernel driver is not loaded.",
        "Load the nvidia kernel module (`sudo modprobe nvidia`); see `sudo dmesg | grep -i nvidia` if it fails.",
    ),
    NVML_GPU_IS_LOST: (
        "gpu-lost",
        "NVML reports a GPU lost (fallen off the bus).",
        "Look for Xid 79 in `sudo dmesg`; reset the GPU (`sudo nvidia-smi -r`) or reboot; check power and seating.",
    ),
}


def _nvml_init_error(init: CudaCall, module: str | None, evidence: dict[str, Any]) -> Finding:
    """What nvmlInit's error code means: ``driver-library-mismatch`` (NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18),
    ``driver-not-loaded`` (NVML_ERROR_DRIVER_NOT_LOADED, 9), ``gpu-lost`` (NVML_ERROR_GPU_IS_LOST, 15), else
    ``nvml-missing`` (NVML loads but does not initialise)."""
    if init.code == NVML_LIB_RM_VERSION_MISMATCH:
        return _driver_library_mismatch(module, None, evidence)
    if init.code in _NVML_INIT_ERRORS:
        cause_id, summary, remedy = _NVML_INIT_ERRORS[init.code]
        cause = _call_text(init) + "."
        return finding(cause_id, Severity.BLOCKER, summary=summary, cause=cause, remedy=remedy, evidence=evidence)
    return finding(
        "nvml-missing",
        Severity.DEGRADED,
        summary=f"NVML loads but does not initialise ({init.name}).",
        cause=_call_text(init) + ".",
        remedy="Reinstall the NVIDIA driver so that libnvidia-ml matches it; monitoring and health checks need NVML.",
        evidence=evidence,
    )


def _blind_without_nvml_init(f: Finding, facts: Facts) -> Finding:
    """``nvml-missing`` made a blocker where a framework needs nvmlInit_v2 to succeed too (TensorFlow's CUDA
    platform: ``FrameworkView.blind_without_nvml``)."""
    blind = _blind_without_nvml(facts)
    if not blind:
        return f
    return replace(
        f,
        severity=Severity.BLOCKER,
        summary=f"{f.summary[:-1]}, and {blind.title} {blind.version} registers no GPU without it, although the "
        f"CUDA driver sees {_count_text(facts)}.",
        cause=f"{f.cause} {blind.blind_without_nvml}",
        remedy=f"Reinstall the NVIDIA driver so that libnvidia-ml matches it: {blind.title} needs NVML to "
        "initialise, not only monitoring.",
        evidence={**f.evidence, f"{blind.name}_gpus": 0, "cuda_devices": _count(facts)},
    )


def _versions_differ(facts: Facts, out: list[Finding]) -> list[Finding]:
    """``driver-library-mismatch``: the version in libcuda's file name is not the kernel module's (an
    upgrade without a reboot), unless a driver call already said so, or cuInit said the library is a
    cuda-compat package (``forward-compat-unsupported``), which differs from the module by design."""
    cf = facts.cuda.facts
    lib_version = library_version(cf.library.path) if cf is not None else None
    module = facts.kernel.module_version
    if not lib_version or not module or lib_version == module:
        return []
    if any(f.id in ("driver-library-mismatch", "forward-compat-unsupported") for f in out):
        return []
    return [_driver_library_mismatch(module, lib_version, {"libcuda": cf.library.path if cf else None})]


def _driver_library_mismatch(module: str | None, library: str | None, evidence: dict[str, Any]) -> Finding:
    """``driver-library-mismatch``: the kernel module and the user-space driver are of different versions."""
    return finding(
        "driver-library-mismatch",
        Severity.BLOCKER,
        summary=f"The kernel module ({module or 'unknown'}) and the user-space driver ({library or 'unknown'}) differ.",
        cause=(
            "The driver was upgraded (or downgraded) but the running kernel module is still the old one: user-space "
            "libraries refuse to talk to a kernel module of another version."
        ),
        remedy="Reboot, or unload and reload the nvidia modules (`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`).",
        evidence={"kernel_module": module, "user_space": library, **evidence},
    )


def _call_text(call: CudaCall) -> str:
    return f"{call.function}() returned {call.code} ({call.name or 'unknown'}" + (
        f": {call.message})" if call.message else ")"
    )


def nvml_explains_no_device(facts: Facts) -> bool:
    """NVML lists GPUs and none of them can run CUDA work for a reason the visibility rules report."""
    from gpucheck.rules.nvml import answered, lost, mig_without_instances

    nf = answered(facts)
    return nf is not None and bool(nf.gpus) and all(lost(g) or mig_without_instances(g) for g in nf.gpus)


def _count(facts: Facts) -> int | None:
    return facts.cuda.facts.device_count if facts.cuda is not None and facts.cuda.facts is not None else None


def _count_text(facts: Facts) -> str:
    n = _count(facts)
    return f"{n} GPU{'s' if n != 1 else ''}" if n is not None else "GPUs"


def _has_utility(capabilities: str) -> bool:
    names = {c.strip().lower() for c in capabilities.split(",")}
    return bool(names & {"utility", "all"})


def _blind_without_nvml(facts: Facts) -> FrameworkView | None:
    """The diagnosed framework that registers no GPU because NVML does not initialise, if one does (its unit says
    so: ``FrameworkView.blind_without_nvml``)."""
    return next((v for v in facts.frameworks.values() if v.blind_without_nvml), None)
