"""Driver layer: do the user-space driver libraries load, initialise and match the kernel module."""

from __future__ import annotations

import os.path
import re
from dataclasses import replace
from typing import Any

from gpucheck import knowledge
from gpucheck.facts import ChildExit, CudaCall, Facts
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.host import gpus_on_bus
from gpucheck.settings import Settings

CUDA_NO_DEVICE = 100
CUDA_STUB_LIBRARY = 34
CUDA_INSUFFICIENT_DRIVER = 35
CUDA_SYSTEM_DRIVER_MISMATCH = 803
CUDA_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804
NVML_DRIVER_NOT_LOADED = 9
NVML_GPU_IS_LOST = 15
NVML_LIB_RM_VERSION_MISMATCH = 18

_LIB_VERSION = re.compile(r"\.so\.(\d+\.\d+(?:\.\d+)?)$")


def library_version(path: str | None) -> str | None:
    """``/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15`` -> ``550.54.15`` (how TensorFlow reads it too)."""
    if not path:
        return None
    m = _LIB_VERSION.search(os.path.basename(path))
    return m.group(1) if m else None


#: Error and fatal log lines: absl's ("E0000 00:00:..."), TensorFlow 1.x/2.x's ("2026-... : F file.cc:37] ..."),
#: and Python's own "Fatal Python error" (faulthandler).
_SEVERE_LINE = re.compile(r"^(?:[EF]\d{4} |\d{4}-\d\d-\d\d [\d:.]+: [EF] )|Fatal Python error")
_TRACE_LINE = re.compile(r"^(?:  File \"|Current thread 0x|Thread 0x|Extension modules:|\s*$)")


def child_evidence(exit_: ChildExit) -> dict[str, Any]:
    """How a probe child ended, with the lines that say why: severe log lines first, then the tail
    of its output without Python's stack frames."""
    return {
        "severe_lines": [ln for ln in exit_.stderr_tail if _SEVERE_LINE.search(ln)][-10:],
        "status": exit_.status,
        "returncode": exit_.returncode,
        "signal": exit_.signal,
        "last_call": exit_.last_stage,
        "duration_s": exit_.duration_s,
        "output_tail": [ln for ln in exit_.stderr_tail if not _TRACE_LINE.match(ln)][-15:],
        "error": exit_.error,
    }


def _call_text(call: CudaCall) -> str:
    return f"{call.function}() returned {call.code} ({call.name or 'unknown'}" + (
        f": {call.message})" if call.message else ")"
    )


def probe_failure(name: str, library: str, exit_: ChildExit, timeout: float) -> Finding | None:
    """A driver probe child that hung or died is a finding of its own."""
    where = exit_.last_stage or "start-up"
    if exit_.status == "timeout":
        return finding(
            "driver-hung",
            Severity.BLOCKER,
            summary=f"A driver call ({where}) did not return within {timeout:g} s.",
            cause=(
                f"The {name} probe hung in {where} and was killed with its process group after {timeout:g} s: the GPU "
                "or the driver is in a bad state, and every CUDA program (TensorFlow too) will hang the same way."
            ),
            remedy=(
                "Look at `sudo dmesg` for Xid errors and at `nvidia-smi`; stop what holds the GPU, then reset it "
                "(`sudo nvidia-smi -r -i <gpu>`) or reboot. If the machine is only slow, raise --gpucheck-timeout."
            ),
            evidence=child_evidence(exit_),
        )
    if exit_.status == "crashed":
        how = exit_.signal or f"exit code {exit_.returncode}"
        return finding(
            "driver-call-crashed",
            Severity.BLOCKER,
            summary=f"{library} crashed the process that called {where} ({how}).",
            cause=(
                f"The {name} probe died with {how} in {where}: the user-space driver is broken or does not match "
                "this system; every CUDA program will die the same way."
            ),
            remedy=(
                "Reinstall the NVIDIA driver (user-space libraries and kernel module of one version) and reboot; "
                "check `sudo dmesg` for Xid errors."
            ),
            evidence=child_evidence(exit_),
        )
    if exit_.status == "error":
        return finding(
            "diagnosis-incomplete",
            Severity.BLOCKER,
            summary=f"The {name} probe could not run.",
            cause=exit_.error or "the probe process could not be started",
            remedy="Check that the Python running pytest can start a child process of itself.",
            evidence=child_evidence(exit_),
        )
    return None


def driver_rules(facts: Facts, settings: Settings) -> list[Finding]:
    out: list[Finding] = []
    on_bus = gpus_on_bus(facts)
    cuda, nvml, kernel = facts.cuda, facts.nvml, facts.kernel
    ld_path = facts.environment.get("LD_LIBRARY_PATH")

    crash = probe_failure("CUDA driver", "libcuda.so.1", cuda.exit, settings.timeout)
    if crash is not None:
        out.append(crash)
    cf = cuda.facts
    if cf is not None and not cf.library.loaded:
        module = kernel.module_version
        out.append(
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
        )
    elif cf is not None and cf.init is not None and cf.init.code not in (0, None):
        out.extend(_cuinit_findings(facts, cf.init, cf.library.path, on_bus))

    nvml_crash = probe_failure("NVML", "libnvidia-ml.so.1", nvml.exit, settings.timeout)
    if nvml_crash is not None and (crash is None or crash.id != nvml_crash.id):
        out.append(nvml_crash)
    nf = nvml.facts
    if nf is not None and not nf.library.loaded:
        blind = _tensorflow_blind_without_nvml(facts)
        capabilities = facts.environment.get("NVIDIA_DRIVER_CAPABILITIES") or None  # empty: the toolkit's default
        no_utility = capabilities is not None and not _has_utility(capabilities)
        out.append(
            finding(
                "nvml-missing",
                # Monitoring (and gpucheck's health checks) go blind without NVML; TensorFlow 2.21 goes blind too.
                Severity.BLOCKER if blind else Severity.DEGRADED,
                summary=(
                    f"libnvidia-ml.so.1 (NVML) cannot be loaded, and TensorFlow {blind} registers no GPU without it, "
                    f"although the CUDA driver sees {_count_text(facts)}."
                    if blind
                    else "libnvidia-ml.so.1 (NVML, what nvidia-smi uses) cannot be loaded."
                ),
                cause=f"dlopen(\"libnvidia-ml.so.1\") failed: {nf.library.error}."
                + (_BLIND_CAUSE if blind else "")
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
                    "LD_LIBRARY_PATH": ld_path,
                    "NVIDIA_DRIVER_CAPABILITIES": capabilities,
                    **({"tensorflow_gpus": 0, "cuda_devices": _count(facts)} if blind else {}),
                },
            )
        )
    elif nf is not None and nf.init is not None and nf.init.code not in (0, None) and on_bus:
        # NVML_ERROR_DRIVER_NOT_LOADED agreeing with the kernel layer is one finding, the kernel's (NVML's
        # answer is in its evidence); said alone (the module looks loaded), it is NVML's own.
        kernel_says_unloaded = (
            kernel.version_line is None and not kernel.module_in_sysfs and not facts.hardware.wsl_dxg
        )
        blind = _tensorflow_blind_without_nvml(facts)
        for f in _nvml_init_findings(nf.init, kernel.module_version):
            if f.id == "driver-not-loaded" and kernel_says_unloaded:
                continue
            if f.id == "nvml-missing" and blind:
                # TensorFlow's CUDA platform needs nvmlInit_v2 to succeed too (see _tensorflow_blind_without_nvml).
                f = replace(
                    f,
                    severity=Severity.BLOCKER,
                    summary=f"{f.summary[:-1]}, and TensorFlow {blind} registers no GPU without it, although the "
                    f"CUDA driver sees {_count_text(facts)}.",
                    cause=f.cause + _BLIND_CAUSE,
                    remedy="Reinstall the NVIDIA driver so that libnvidia-ml matches it: TensorFlow needs NVML to "
                    "initialise, not only monitoring.",
                    evidence={**f.evidence, "tensorflow_gpus": 0, "cuda_devices": _count(facts)},
                )
            same = next((i for i, o in enumerate(out) if o.id == f.id and o.subject == f.subject), None)
            if same is None:
                out.append(f)
            else:
                # CUDA said it first (cuInit 803 for a mismatch): one finding, NVML's answer joins its evidence.
                out[same] = replace(out[same], evidence={**out[same].evidence, "nvmlInit": f.evidence})

    # The version in libcuda's file name against the kernel module's: an upgrade without a reboot.
    lib_version = library_version(cf.library.path) if cf is not None else None
    if (
        lib_version
        and kernel.module_version
        and lib_version != kernel.module_version
        and not any(f.id == "driver-library-mismatch" for f in out)
    ):
        out.append(_mismatch(kernel.module_version, lib_version, {"libcuda": cf.library.path if cf else None}))
    return out


def _mismatch(module: str | None, library: str | None, evidence: dict[str, Any]) -> Finding:
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


def _cuinit_findings(facts: Facts, init: CudaCall, lib_path: str | None, on_bus: bool) -> list[Finding]:
    code = init.code
    vis = facts.visibility
    evidence: dict[str, Any] = {"cuInit": code, "name": init.name, "message": init.message, "libcuda": lib_path}
    if code == CUDA_NO_DEVICE and (not on_bus or vis.cuda_visible_devices is not None or nvml_explains_no_device(facts)):
        # No GPU at all (hardware layer says so), hidden by CUDA_VISIBLE_DEVICES, or every GPU lost or in MIG
        # mode without an instance (the visibility layer says so).
        return []
    if code == CUDA_SYSTEM_DRIVER_MISMATCH:
        return [_mismatch(facts.kernel.module_version, library_version(lib_path), evidence)]
    if code == CUDA_INSUFFICIENT_DRIVER:
        return [
            finding(
                "driver-too-old",
                Severity.BLOCKER,
                summary="cuInit says the driver is too old for this CUDA driver library.",
                cause=_call_text(init) + ": the loaded libcuda is newer than the kernel driver can serve.",
                remedy="Install a newer NVIDIA driver (`sudo apt install nvidia-driver-<newer branch>`) and reboot.",
                evidence=evidence,
            )
        ]
    if code == CUDA_COMPAT_NOT_SUPPORTED_ON_DEVICE:
        return [
            finding(
                "forward-compat-unsupported",
                Severity.BLOCKER,
                summary="cuInit refuses the CUDA forward-compatibility package on this GPU (804).",
                cause=(
                    f"{_call_text(init)}: the libcuda.so.1 loaded ({lib_path}) is a cuda-compat package newer than "
                    "the kernel driver, and forward compatibility only works on data-center GPUs (and some "
                    "NGC-ready RTX); on this GPU the user-space driver must match the kernel module."
                ),
                remedy=(
                    "Remove the forward-compatibility libraries from the loader's path (the cuda-compat "
                    "directory, e.g. /usr/local/cuda/compat, from LD_LIBRARY_PATH or /etc/ld.so.conf.d, then "
                    "`sudo ldconfig`), or upgrade the NVIDIA driver itself to the CUDA version you need."
                ),
                evidence={**evidence, "LD_LIBRARY_PATH": facts.environment.get("LD_LIBRARY_PATH")},
            )
        ]
    if code == CUDA_STUB_LIBRARY:
        return [
            finding(
                "cuda-init-failed",
                Severity.BLOCKER,
                summary="The libcuda.so.1 that was loaded is the CUDA toolkit's link stub, not the driver.",
                cause=f"{_call_text(init)}; the stub at {lib_path} comes first on the loader's path.",
                remedy="Remove the toolkit's `stubs` directory from LD_LIBRARY_PATH (and from /etc/ld.so.conf.d), then run `sudo ldconfig`.",
                evidence={**evidence, "LD_LIBRARY_PATH": facts.environment.get("LD_LIBRARY_PATH")},
            )
        ]
    return [
        finding(
            "cuda-init-failed",
            Severity.BLOCKER,
            summary=f"cuInit failed with {init.name or code}.",
            cause=_call_text(init) + ".",
            remedy=(
                "Read `sudo dmesg | grep -iE 'nvrm|xid'` and `nvidia-smi`; check that /dev/nvidia-uvm exists "
                "(`sudo modprobe nvidia-uvm`); reinstall the driver if the error persists."
            ),
            evidence=evidence,
        )
    ]


def nvml_explains_no_device(facts: Facts) -> bool:
    """NVML lists GPUs and none of them can run CUDA work for a reason the visibility rules report."""
    from gpucheck.rules.nvml import answered, lost, mig_without_instances

    nf = answered(facts)
    return nf is not None and bool(nf.gpus) and all(lost(g) or mig_without_instances(g) for g in nf.gpus)


def _nvml_init_findings(init: CudaCall, module: str | None) -> list[Finding]:
    evidence: dict[str, Any] = {"nvmlInit": init.code, "name": init.name, "message": init.message}
    if init.code == NVML_LIB_RM_VERSION_MISMATCH:
        return [_mismatch(module, None, evidence)]
    if init.code == NVML_DRIVER_NOT_LOADED:
        return [
            finding(
                "driver-not-loaded",
                Severity.BLOCKER,
                summary="NVML says the NVIDIA kernel driver is not loaded.",
                cause=_call_text(init) + ".",
                remedy="Load the nvidia kernel module (`sudo modprobe nvidia`); see `sudo dmesg | grep -i nvidia` if it fails.",
                evidence=evidence,
            )
        ]
    if init.code == NVML_GPU_IS_LOST:
        return [
            finding(
                "gpu-lost",
                Severity.BLOCKER,
                summary="NVML reports a GPU lost (fallen off the bus).",
                cause=_call_text(init) + ".",
                remedy="Look for Xid 79 in `sudo dmesg`; reset the GPU (`sudo nvidia-smi -r`) or reboot; check power and seating.",
                evidence=evidence,
            )
        ]
    return [
        finding(
            "nvml-missing",
            Severity.DEGRADED,
            summary=f"NVML loads but does not initialise ({init.name}).",
            cause=_call_text(init) + ".",
            remedy="Reinstall the NVIDIA driver so that libnvidia-ml matches it; monitoring and health checks need NVML.",
            evidence=evidence,
        )
    ]


#: Read off libtensorflow_framework.so.2 of the tensorflow 2.21.0 wheel: stream_executor::gpu's
#: PlatformInitialize calls cuInit, then nvmlInit_v2, and an NVML failure makes VisibleDeviceCount -1.
#: Earlier releases were not checked, so only 2.21 and later are said to need NVML.
_BLIND_SINCE = (2, 21)
_BLIND_CAUSE = (
    " TensorFlow's CUDA platform calls nvmlInit_v2 right after a successful cuInit and, when that fails, "
    "counts no device, without a log line at the default level."
)


def _count(facts: Facts) -> int | None:
    return facts.cuda.facts.device_count if facts.cuda is not None and facts.cuda.facts is not None else None


def _count_text(facts: Facts) -> str:
    n = _count(facts)
    return f"{n} GPU{'s' if n != 1 else ''}" if n is not None else "GPUs"


def _has_utility(capabilities: str) -> bool:
    names = {c.strip().lower() for c in capabilities.split(",")}
    return bool(names & {"utility", "all"})


def _tensorflow_blind_without_nvml(facts: Facts) -> str | None:
    """The TensorFlow version, when NVML explains why this TensorFlow lists no GPU: a CUDA build of 2.21
    or later, whose device listing raised nothing, on a driver whose cuInit succeeded, which counts
    devices and is of the build's CUDA major or newer, with every library TensorFlow dlopens loading."""
    cuda = facts.cuda.facts if facts.cuda is not None else None
    fw = facts.framework.facts if facts.framework is not None else None
    if cuda is None or fw is None or not fw.importable or not fw.is_cuda_build or fw.gpus or fw.list_devices_error:
        return None
    version = knowledge.parse_version(fw.version)
    if version is None or version[:2] < _BLIND_SINCE:
        return None
    if cuda.init is None or cuda.init.code != 0 or not cuda.device_count:
        return None
    build_cuda = knowledge.parse_version(str(fw.build_info.get("cuda_version") or ""))
    if build_cuda is None or cuda.driver_version is None or cuda.driver_version // 1000 < build_cuda[0]:
        return None
    # Only when nothing else explains it: every library TensorFlow dlopens before it registers a GPU loads.
    libs = facts.libraries.facts if facts.libraries is not None else None
    if libs is None or any(lib.required and not lib.loaded for lib in libs.libraries):
        return None
    return fw.version
