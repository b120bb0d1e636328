"""Libraries layer: do the CUDA libraries of the major versions TensorFlow's build needs load, is
cuDNN new enough, and can XLA find ptxas and libdevice?"""

from __future__ import annotations

import re
from typing import Any

from gpucheck import knowledge
from gpucheck.facts import Facts
from gpucheck.frameworks.tensorflow import facts as tff
from gpucheck.frameworks.tensorflow.facts import CudaLibrary, LibrariesFacts
from gpucheck.model import Finding, Severity, finding
from gpucheck.settings import Settings

_MISSING_DEP = re.compile(r"^(\S+\.so[.\d]*): cannot open shared object file")


def missing_dependency(lib: CudaLibrary) -> str | None:
    """The library the loader could not find while loading ``lib`` (its dependency), if that is what failed."""
    if lib.path is None or not lib.load_error:
        return None
    m = _MISSING_DEP.match(lib.load_error)
    if m and m.group(1) != lib.soname:
        return m.group(1)
    return None


def install_command(lf: LibrariesFacts) -> str:
    version = f"=={lf.framework_version}" if lf.framework_version else ""
    return f'pip install "tensorflow[and-cuda]{version}"'


def _search_evidence(lf: LibrariesFacts) -> list[str]:
    return [f"{d.path} ({d.source})" for d in lf.search] + ["ldconfig cache", "default directories"]


def _lib_evidence(lib: CudaLibrary) -> dict[str, Any]:
    out: dict[str, Any] = {"soname": lib.soname, "found": lib.path, "via": lib.found_via, "loaded": lib.loaded}
    if lib.load_error:
        out["dlerror"] = lib.load_error
    if lib.version:
        out["version"] = f"{lib.version} ({lib.version_source})"
    if lib.other_versions:
        out["other_versions_found"] = list(lib.other_versions)
    if lib.package:
        out["package"] = f"{lib.package}>={lib.min_version}" if lib.min_version else lib.package
    return out


def _describe(lib: CudaLibrary) -> str:
    dep = missing_dependency(lib)
    if dep:
        return f"{lib.soname} is at {lib.path} but does not load: its dependency {dep} is missing"
    if lib.path is not None:
        return f"{lib.soname} is at {lib.path} but does not load ({lib.load_error})"
    other = (
        f" (found only {', '.join(lib.other_versions)}, which the loader does not take for {lib.soname})"
        if lib.other_versions
        else ""
    )
    return f"{lib.soname} is not found{other}"


def needed_cudnn(lf: LibrariesFacts) -> tuple[str | None, str]:
    """The cuDNN version TensorFlow's build needs and where that figure comes from."""
    req = lf.requirements.get("nvidia-cudnn-cu12") or lf.requirements.get("nvidia-cudnn-cu11") or next(
        (v for k, v in lf.requirements.items() if k.startswith("nvidia-cudnn")), None
    )
    if req:
        return ".".join(req.split(".")[:3]), "the wheel's and-cuda requirement"
    tested = knowledge.tested_build(lf.framework_version)
    if tested and tested.get("cudnn"):
        return tested["cudnn"], "TensorFlow's tested build configurations"
    info = lf.build_info.get("cudnn_version")
    return (str(info) if info else None), "build_info cudnn_version"


def _cudnn_for_other_cuda(cudnn: CudaLibrary, cuda_version: str) -> bool:
    """cuDNN built for another CUDA major than the framework's (its own answer, or the support matrix)."""
    major = (knowledge.parse_version(cuda_version) or (0,))[0]
    built = knowledge.parse_version(cudnn.built_for_cuda)
    if built and built[0] != major:
        return True
    return knowledge.cudnn_supports_cuda(cudnn.version or "", major) is False


def library_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """The libraries layer's findings for a CUDA build, in this order: ``cuda-runtime-missing``, then one
    of ``cudnn-missing`` and ``cudnn-version-mismatch`` (a build for another CUDA major, or too old),
    then ``xla-toolchain-missing``."""
    probe = tff.libraries(facts)
    if probe is None or probe.facts is None:
        return []
    lf = probe.facts
    if not lf.is_cuda_build or not lf.libraries:
        return []
    cmd = install_command(lf)
    cuda_version = str(lf.build_info.get("cuda_version"))
    return [*_cuda_runtime_missing(lf, cmd, cuda_version), *_cudnn(lf, cmd, cuda_version), *_toolchain(lf, cmd)]


def _cuda_runtime_missing(lf: LibrariesFacts, cmd: str, cuda_version: str) -> list[Finding]:
    """``cuda-runtime-missing``: a CUDA library the build needs (cuDNN apart) does not load."""
    broken = [lib for lib in lf.libraries if lib.required and lib.key != "cudnn" and not lib.loaded]
    if not broken:
        return []
    names = ", ".join(lib.soname for lib in broken)
    deps = sorted({d for lib in broken if (d := missing_dependency(lib))})
    return [
        finding(
            "cuda-runtime-missing",
            Severity.BLOCKER,
            summary=f"CUDA {cuda_version.split('.')[0]} libraries TensorFlow needs do not load: {names}.",
            cause=(
                "; ".join(_describe(lib) for lib in broken)
                + f". TensorFlow {lf.framework_version or ''} (built with CUDA {cuda_version}) dlopens these "
                "at start-up and registers no GPU without them ('Cannot dlopen some GPU libraries', and its "
                "'Could not find cuda drivers on your machine' means this runtime, not the driver)."
            ),
            remedy=(
                f"`{cmd}` (installs the nvidia-*-cu{cuda_version.split('.')[0]} wheels that TensorFlow's RUNPATH "
                "points at)"
                + (f"; the missing dependency {', '.join(deps)} comes with the same command" if deps else "")
                + "; or put a CUDA "
                f"{cuda_version.split('.')[0]}.x toolkit's lib64 directory on LD_LIBRARY_PATH."
            ),
            evidence={
                "missing": [lib.soname for lib in broken],
                "libraries": [_lib_evidence(lib) for lib in broken],
                "missing_dependencies": deps,
                "search_order": _search_evidence(lf),
                "command": cmd,
            },
        )
    ]


def _cudnn(lf: LibrariesFacts, cmd: str, cuda_version: str) -> list[Finding]:
    """cuDNN's one finding at most: ``cudnn-missing`` if it does not load, else, if it says its version,
    ``cudnn-version-mismatch`` for a build for another CUDA major or one older than the build needs."""
    cudnn = lf.library("cudnn")
    if cudnn is None:
        return []
    if not cudnn.loaded:
        return [_cudnn_missing(lf, cmd, cudnn)]
    if not cudnn.version:
        return []
    if _cudnn_for_other_cuda(cudnn, cuda_version):
        return [_cudnn_for_other_cuda_major(lf, cudnn, cudnn.version, cuda_version)]
    return _cudnn_too_old(lf, cmd, cudnn, cudnn.version)


def _cudnn_missing(lf: LibrariesFacts, cmd: str, cudnn: CudaLibrary) -> Finding:
    """``cudnn-missing``: libcudnn does not load."""
    pkg = cudnn.package or "nvidia-cudnn"
    return finding(
        "cudnn-missing",
        Severity.BLOCKER,
        summary=f"cuDNN ({cudnn.soname}) does not load: {_describe(cudnn)}.",
        cause=(
            f"TensorFlow's build needs cuDNN {lf.build_info.get('cudnn_version')} ({cudnn.soname}) for "
            "convolutions and RNNs and registers no GPU without it."
        ),
        remedy=(
            f"`{cmd}`, or only cuDNN: `pip install \"{pkg}>={cudnn.min_version or lf.build_info.get('cudnn_version')}\"`"
            + ("" if cudnn.path is None else f"; {cudnn.path} is there but broken: reinstall it")
            + "."
        ),
        evidence={**_lib_evidence(cudnn), "search_order": _search_evidence(lf), "command": cmd},
    )


def _cudnn_for_other_cuda_major(lf: LibrariesFacts, cudnn: CudaLibrary, version: str, cuda_version: str) -> Finding:
    """``cudnn-version-mismatch``: the cuDNN loaded is a build for another CUDA major than the framework's."""
    build_major = cuda_version.split(".")[0]
    return finding(
        "cudnn-version-mismatch",
        Severity.BLOCKER,
        summary=(
            f"cuDNN {version} is loaded, but it is a build for CUDA {cudnn.built_for_cuda or '?'}; this "
            f"TensorFlow uses CUDA {cuda_version}."
        ),
        cause=(
            f"{cudnn.path} reports cudnnGetCudartVersion() = {cudnn.built_for_cuda} (cuDNN {version}): "
            f"cuDNN must be the build for TensorFlow's CUDA major ({build_major}); cuDNN "
            f"{version.split('.')[0]}.x ships separate builds per CUDA major (cuDNN support matrix)."
        ),
        remedy=(
            f"`pip install \"nvidia-cudnn-cu{build_major}>={cudnn.min_version or lf.build_info.get('cudnn_version')}\"` "
            f"and remove the other build (e.g. `pip uninstall nvidia-cudnn-cu{cudnn.built_for_cuda.split('.')[0] if cudnn.built_for_cuda else '<major>'}`) "
            "or its directory from LD_LIBRARY_PATH."
        ),
        evidence={**_lib_evidence(cudnn), "built_for_cuda": cudnn.built_for_cuda, "build_cuda": cuda_version},
    )


def _cudnn_too_old(lf: LibrariesFacts, cmd: str, cudnn: CudaLibrary, version: str) -> list[Finding]:
    """``cudnn-version-mismatch``: the cuDNN loaded does not satisfy the version the build needs (same
    major, equal or higher minor)."""
    needed, where = needed_cudnn(lf)
    if not needed or knowledge.cudnn_satisfies(version, needed):
        return []
    return [
        finding(
            "cudnn-version-mismatch",
            Severity.BLOCKER,
            summary=f"cuDNN {version} is loaded but this TensorFlow needs cuDNN >= {needed} of the same major.",
            cause=(
                f"{cudnn.path} reports {version} ({cudnn.version_source}); TensorFlow "
                f"{lf.framework_version or ''} needs {needed} ({where}). TensorFlow's rule: 'CuDNN library "
                "needs to have matching major version and equal or higher minor version'; with an older "
                "one it logs 'Loaded runtime CuDNN library: … but source was compiled with: …' and "
                "convolutions fail ('DNN library initialization failed')."
            ),
            remedy=(
                f"`pip install \"{cudnn.package or 'nvidia-cudnn'}>={needed}\"` (or `{cmd}`); if an older "
                f"libcudnn comes first on the search ({cudnn.found_via}), remove that directory from "
                "LD_LIBRARY_PATH."
            ),
            evidence={**_lib_evidence(cudnn), "needed": needed, "needed_from": where},
        )
    ]


def _toolchain(lf: LibrariesFacts, cmd: str) -> list[Finding]:
    """``xla-toolchain-missing``: XLA's ptxas or libdevice was looked for and not found."""
    missing = [t for t in (lf.ptxas, lf.libdevice) if t is not None and t.path is None]
    if not missing:
        return []
    major = str(lf.build_info.get("cuda_version", "12")).split(".")[0]
    names = " and ".join(t.name for t in missing)
    return [
        finding(
            "xla-toolchain-missing",
            Severity.DEGRADED,
            summary=f"XLA cannot find {names}: `jit_compile=True` and XLA-compiled functions will fail on the GPU.",
            cause=(
                "XLA compiles its GPU kernels with ptxas and links libdevice.10.bc; it looks in "
                "--xla_gpu_cuda_data_dir (XLA_FLAGS), PATH (ptxas), /usr/local/cuda, /opt/cuda and the "
                "nvidia-cuda-nvcc wheel beside TensorFlow, and found no "
                + names
                + " there ('libdevice not found at …', 'Can't find libdevice directory ${CUDA_DIR}/nvvm/libdevice', "
                "'Couldn't get ptxas version')."
            ),
            remedy=(
                f"`pip install \"nvidia-cuda-nvcc-cu{major}\"` (or `{cmd}`); or point XLA at a CUDA toolkit: "
                "`export XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda-<version>`."
            ),
            evidence={
                t.name: {"found": t.path, "searched": list(t.searched)[:12], "version": t.version}
                for t in (lf.ptxas, lf.libdevice)
                if t is not None
            }
            | {"XLA_FLAGS cuda_data_dir": lf.xla_cuda_data_dir},
        )
    ]
