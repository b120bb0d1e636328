"""PyTorch's framework layer: is torch importable, a CUDA build, and does it see the GPUs; where
``cudaGetDeviceCount`` failed with an error the lower layers name (802, 803, 804, 805, the unknown error), that layer's id
with torch's text as its evidence, unless the CUDA driver probe's own ``cuInit`` already failed (the driver layer then
names it)."""

from __future__ import annotations

from gpucheck.facts import ChildExit, Facts
from gpucheck.frameworks.torch.facts import FoundFirst, TorchFacts, torch_facts
from gpucheck.frameworks.torch.rules.common import (
    base_version,
    driver_cuda,
    error_number,
    install_command,
    too_old,
    wheel_variant,
)
from gpucheck.frameworks.torch.rules.resources import config_broke_import
from gpucheck.knowledge import cuda_int_to_text, data
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.common import FrameworkProbe, framework_crashed, framework_probe_failure
from gpucheck.settings import Settings

#: How the findings about PyTorch's probe child name it.
PROBE = FrameworkProbe("PyTorch", "import torch", 'python -c "import torch; print(torch.cuda.is_available())"')
#: cudaErrorSystemNotReady, cudaErrorSystemDriverMismatch, cudaErrorCompatNotSupportedOnDevice,
#: cudaErrorMpsConnectionFailed, cudaErrorUnknown.
SYSTEM_NOT_READY, DRIVER_MISMATCH, COMPAT_NOT_SUPPORTED, MPS_CONNECTION_FAILED, UNKNOWN = 802, 803, 804, 805, 999


def framework_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """The framework layer's one finding at most, the first that holds of: ``framework-hung`` (the child timed out
    before it reported), ``framework-crashed`` (it died or reported nothing), ``framework-missing`` (``import torch``
    fails; either with its cause where a malformed allocator configuration stopped ``import torch``),
    ``framework-cpu-only`` (a wheel without CUDA), then for a CUDA build that sees no GPU: the lower layer's
    id of the error cudaGetDeviceCount gave (``fabric-manager-not-running`` 802, ``driver-library-mismatch`` 803,
    ``forward-compat-unsupported`` 804, ``mps-connection-failed`` 805, ``cuda-init-failed`` for the unknown error),
    else ``framework-gpu-init-failed`` (as TensorFlow's: where a lower layer is broken, it is the root cause)."""
    probe = torch_facts(facts)
    if probe is None:
        return []
    exit_, tf = probe.exit, probe.facts
    if tf is None:
        return [config_broke_import(framework_probe_failure(PROBE, exit_, settings.timeout), exit_.stderr_tail,
                                    facts.environment)]
    if exit_.status in ("crashed", "error"):
        return [config_broke_import(framework_crashed(PROBE, exit_), exit_.stderr_tail, facts.environment)]
    if not tf.importable:
        if tf.found_first is not None:
            return [_library_found_first(tf, tf.found_first)]
        return [config_broke_import(_framework_missing(tf), (tf.import_error or "",), facts.environment)]
    if not tf.cuda_build:
        return [_framework_cpu_only(tf, facts)]
    if tf.available and tf.device_count:
        return []  # NVML's count alone (torch 2.14's device_count() before CUDA starts) is no GPU torch can use
    said = error_number(tf.warnings)
    cf = facts.cuda.facts
    lower_said = cf is not None and cf.init is not None and cf.init.code not in (0, None)
    if said is not None and not lower_said and said[0] in BY_ERROR:
        return [_lower_layers_id(tf, *said)]
    if lower_said or any(too_old(w) for w in tf.warnings):
        return []  # the driver layer, or the compatibility layer, names it
    return [_framework_gpu_init_failed(tf, exit_)]


def _framework_missing(tf: TorchFacts) -> Finding:
    """``framework-missing``: ``import torch`` failed (or a file of that name shadows the package)."""
    return finding(
        "framework-missing",
        Severity.BLOCKER,
        summary="PyTorch cannot be imported.",
        cause=f"`import torch` failed: {tf.import_error}",
        remedy=(
            f"Rename or remove {tf.location} (it hides the real package), then run again."
            if tf.location and tf.import_error and "shadows" in tf.import_error
            else "Install it into this environment: `pip install torch`."
        ),
        evidence={"import_error": tf.import_error},
    )


def _library_found_first(tf: TorchFacts, first: FoundFirst) -> Finding:
    """``cuda-library-shadowed`` (``cudnn-version-mismatch`` for a cuDNN library, the id explain gives the same words):
    ``import torch`` failed because the copy of a CUDA library the loader took lacks a symbol torch's own libraries
    need ("undefined symbol: S, version libX.so.N"); the copy that lacks it, and how it came in, are named."""
    wheels = ", ".join(first.wheel_copies)
    # Where no nvidia-* wheel brings the library (conda, a container's CUDA, a build from source), torch's own copy is
    # the one its libraries were built with, wherever that is.
    own = f"the copy of torch's nvidia-* wheels ({wheels})" if wheels else "the copy torch's libraries were built with"
    loaded = first.loaded or ""
    summary = f"Another {first.soname} than PyTorch's own is loaded first: it lacks {first.symbol}."
    if first.how == "LD_PRELOAD":
        where = f"{loaded}, preloaded (LD_PRELOAD) before torch's libraries"
        remedy = f"Take {loaded} out of LD_PRELOAD in the environment the program starts with, so that {own} is loaded."
    elif first.how == "LD_LIBRARY_PATH":
        folder = first.folder if first.folder else "the empty entry (the working directory)"
        where = f"{loaded}, found in {folder} on LD_LIBRARY_PATH (searched before the wheels' own folders)"
        remedy = (
            f"Remove {folder} from LD_LIBRARY_PATH in the environment the program starts with (`echo $LD_LIBRARY_PATH`), "
            f"so that {own} is found; or install there the CUDA of torch's version."
        )
    elif first.how == "loaded":
        where = f"{loaded}, already in the process before torch's libraries (loaded by an earlier import, or another library)"
        remedy = (
            f"Find what loads {loaded} first (`LD_DEBUG=libs python -c \"import torch\"` names each library and who "
            f"needed it) and import torch before it, or remove that install from the loader's path, so that {own} is loaded."
        )
    elif first.how == "wheel":
        summary = f"PyTorch's own {first.soname} lacks {first.symbol}: its nvidia-* wheels do not go together."
        where = f"{loaded}, torch's own nvidia-* wheel's, which is older than the wheels that need it"
        remedy = (
            "Install the nvidia-* wheels at the versions this torch asks for: `pip check` names the mismatch; "
            "`pip install --force-reinstall torch==<its version>` (with its index URL) puts them back together."
        )
    else:
        where = "a copy neither preloaded, nor on LD_LIBRARY_PATH, nor still loaded (/etc/ld.so.conf.d, ldconfig's cache)"
        remedy = (
            f"Find which {first.soname} the loader takes (`ldconfig -p | grep {first.soname}`) and remove that older "
            f"install from the loader's path, so that {own} is found."
        )
    return finding(
        "cudnn-version-mismatch" if first.soname.startswith("libcudnn") else "cuda-library-shadowed",
        Severity.BLOCKER,
        summary=summary,
        cause=(
            f"`import torch` failed: {first.said or tf.import_error}. The copy that lacks {first.symbol} is {where}"
            + (f"; not {own}." if first.how != "wheel" else ".")
        ),
        remedy=remedy,
        evidence={
            "import_error": tf.import_error,
            "library": first.soname,
            "symbol": first.symbol,
            "loaded": first.loaded,
            "found_by": first.how,
            "folder": first.folder,
            "wheel_copies": list(first.wheel_copies),
        },
    )


def _framework_cpu_only(tf: TorchFacts, facts: Facts) -> Finding:
    """``framework-cpu-only``: ``torch.version.cuda`` is None (a ``+cpu`` wheel, or a platform without CUDA
    wheels). The remedy names the wheel for the CUDA the driver serves, where a driver answers."""
    serves = driver_cuda(facts)
    variant = wheel_variant(serves)
    wheels = data("torch_wheels.json")
    return finding(
        "framework-cpu-only",
        Severity.BLOCKER,
        summary=f"PyTorch {tf.version} is a CPU-only build: it cannot use a GPU.",
        cause=(
            "torch.version.cuda is None: this wheel was built without CUDA"
            + (" (its version ends in +cpu: it came from PyTorch's CPU index)." if tf.version and "+cpu" in tf.version else ".")
        ),
        remedy=(
            f"Install the CUDA wheel for this driver's CUDA {cuda_int_to_text(serves)}: `{install_command(tf.version, variant)}`."
            if variant is not None
            else (
                f"Install the NVIDIA driver, then the CUDA wheel of torch {base_version(tf.version)} for the CUDA version "
                f"`nvidia-smi` shows: `pip install --force-reinstall torch=={base_version(tf.version)} --index-url "
                f"{wheels['index']}cuXYZ` ({', '.join(wheels['variants'])}; {wheels['selector']})."
            )
        ),
        evidence={
            "version": tf.version,
            "location": tf.location,
            "torch.version.cuda": tf.cuda,
            "driver_cuda": cuda_int_to_text(serves),
            "wheel_variant": variant,
        },
    )


def _framework_gpu_init_failed(tf: TorchFacts, exit_: ChildExit) -> Finding:
    """``framework-gpu-init-failed``: a CUDA build whose ``torch.cuda.is_available()`` is False with no cause named."""
    return finding(
        "framework-gpu-init-failed",
        Severity.BLOCKER,
        summary=f"PyTorch {tf.version} (CUDA {tf.cuda}) sees no GPU.",
        cause=(
            "torch.cuda.is_available() is False"
            + (f" and torch warned: {tf.warnings[0]}" if tf.warnings else " without a warning")
            + (
                f"; torch.cuda.device_count() says {tf.device_count}, counted through NVML before CUDA starts, not by "
                "the CUDA runtime"
                if tf.device_count
                else ""
            )
            + "; no lower layer explains it."
        ),
        remedy=(
            "Run `python -c \"import torch; print(torch.cuda.is_available())\"` in the environment the program starts "
            "with and read torch's warning; check CUDA_VISIBLE_DEVICES there (an empty or invalid first entry hides "
            "every GPU)."
        ),
        evidence={
            "torch": tf.version,
            "torch_cuda": tf.cuda,
            "torch_warnings": list(tf.warnings),
            "errors": tf.errors,
            "libraries": list(tf.libraries),
            "output_tail": list(exit_.stderr_tail[-10:]),
        },
    )


def _lower_layers_id(tf: TorchFacts, code: int, text: str, warning: str) -> Finding:
    """The lower layer's id of the error cudaGetDeviceCount gave (``BY_ERROR``), torch's warning its evidence."""
    cause_id, what, remedy = BY_ERROR[code]
    return finding(
        cause_id,
        Severity.BLOCKER,
        summary=f"PyTorch's CUDA runtime says {what} ({code}).",
        cause=f"torch.cuda.is_available() is False and torch warned: {warning.strip()}",
        remedy=remedy,
        evidence={"cudaGetDeviceCount": code, "error": text, "torch": tf.version, "torch_warnings": list(tf.warnings)},
    )


#: cudaGetDeviceCount's error -> the lower layer's id, what it means, the remedy.
BY_ERROR: dict[int, tuple[str, str, str]] = {
    SYSTEM_NOT_READY: (
        "fabric-manager-not-running",
        "the system is not ready: the NVLink fabric is not set up",
        "Start NVIDIA Fabric Manager of the driver's version: `sudo systemctl enable --now nvidia-fabricmanager` (it "
        "must be the same version as the driver).",
    ),
    DRIVER_MISMATCH: (
        "driver-library-mismatch",
        "the driver libraries and the kernel module differ",
        "Reboot, or unload and reload the nvidia modules (`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && "
        "sudo modprobe nvidia`).",
    ),
    COMPAT_NOT_SUPPORTED: (
        "forward-compat-unsupported",
        "the CUDA forward-compatibility package is refused on this GPU",
        "Remove the forward-compatibility libraries from the loader's path (the cuda-compat directory, e.g. "
        "/usr/local/cuda/compat, from LD_LIBRARY_PATH or /etc/ld.so.conf.d, then `sudo ldconfig`), or upgrade the "
        "NVIDIA driver itself to the CUDA version torch needs.",
    ),
    MPS_CONNECTION_FAILED: (
        "mps-connection-failed",
        "it cannot reach the MPS control daemon",
        "Start the MPS daemon as the user the job runs as (`nvidia-cuda-mps-control -d`) with the same "
        "CUDA_MPS_PIPE_DIRECTORY, or unset CUDA_MPS_PIPE_DIRECTORY to run without MPS.",
    ),
    UNKNOWN: (
        "cuda-init-failed",
        "CUDA unknown error",
        "Check that the nvidia_uvm module is loaded and /dev/nvidia-uvm exists (`sudo modprobe nvidia-uvm`), and that "
        "CUDA_VISIBLE_DEVICES is set before the program starts, never changed after it.",
    ),
}
