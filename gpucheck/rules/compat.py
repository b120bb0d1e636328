"""Compatibility layer: is the driver new enough for a framework's CUDA, and is each GPU's
architecture covered by the build's SASS or PTX? Knowledge comes from data/cuda_compat.json
through gpucheck.knowledge; this module only applies it to the facts. A framework unit says what its build is
(:class:`Build`) and registers a rule that calls :func:`judge` with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucheck import knowledge
from gpucheck.facts import CudaDevice, Facts
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.common import library_version


@dataclass(frozen=True)
class Words:
    """How the findings name a framework's build and its other builds: each framework unit gives its own (the
    defaults name none)."""

    #: "TensorFlow", "PyTorch".
    title: str = "the framework"
    #: What the framework does with a GPU its build cannot run on, in its own words.
    refusal: str = "the framework cannot use the device"
    #: Where the builds for other CUDA versions are.
    other_builds: str = "a build of the framework for the CUDA this driver serves"
    #: An older release that still covers an architecture.
    older_build: str = "an older release whose build still compiles for this architecture"
    #: How to build it for an architecture from source (``{cc}`` is the compute capability).
    from_source: str = "build it from source for compute capability {cc}"


@dataclass(frozen=True)
class Build:
    """What the framework was built with, wherever it was read from."""

    framework_version: str | None
    cuda_version: str
    archs: tuple[str, ...]
    source: str
    #: The CUDA runtime it loaded (its libcudart's version), where known.
    runtime: str | None = None
    #: How the findings name it.
    words: Words = Words()


def driver_version_text(facts: Facts) -> str | None:
    """The driver's own version: the kernel module's, else libcuda's file name, else NVML's answer."""
    if facts.kernel.module_version:
        return facts.kernel.module_version
    cf = facts.cuda.facts
    if cf is not None:
        from_file = library_version(cf.library.path)
        if from_file:
            return from_file
    nf = facts.nvml.facts
    return nf.driver_version if nf is not None else None


def judge(build: Build | None, facts: Facts) -> list[Finding]:
    """The compatibility layer's findings for a framework's CUDA build (None: a CPU build, or one not known) on this
    machine's driver and GPUs: the rules a framework unit registers for the layer call this with its build."""
    cf = facts.cuda.facts
    if build is None or cf is None or not cf.library.loaded:
        return []
    if cf.init is not None and cf.init.code not in (0, None):
        # cuInit failed: the driver layer names why; nothing here can be judged on top of it.
        return []
    out: list[Finding] = []
    driver = driver_version_text(facts)
    judgement = knowledge.judge_driver(build.cuda_version, driver, cf.driver_version)
    runtime = build.runtime
    runtime_judgement = (
        knowledge.judge_driver(runtime, driver, cf.driver_version) if runtime else None
    )
    archs = knowledge.parse_archs(list(build.archs))
    arch_of = {
        d.ordinal: knowledge.judge_arch(d.cc_major, d.cc_minor, archs)
        for d in cf.devices
        if d.cc_major is not None and d.cc_minor is not None and archs
    }
    jit_gpus = [d for d in cf.devices if d.ordinal in arch_of and arch_of[d.ordinal].status == "ptx"]
    evidence: dict[str, Any] = {
        "driver_version": driver,
        "driver_cuda": judgement.driver_cuda,
        "cuDriverGetVersion": cf.driver_version,
        "build_cuda": build.cuda_version,
        "build_source": build.source,
        "required_driver": judgement.required_driver,
        "required_driver_basis": judgement.required_driver_basis,
        "minor_version_floor": judgement.minor_version_floor,
        "cuda_runtime_loaded": runtime,
    }
    worst = judgement
    if runtime_judgement is not None and _rank(runtime_judgement.status) > _rank(judgement.status):
        worst = runtime_judgement
    if worst.status == "too-old":
        out.append(_too_old(worst, build, evidence))
    elif worst.status == "minor-version-compatibility":
        if jit_gpus:
            out.append(_ptx_needs_newer_driver(worst, build, jit_gpus, arch_of, evidence))
        else:
            out.append(_minor_version_compatibility(worst, driver, evidence))
    for dev in cf.devices:
        verdict = arch_of.get(dev.ordinal)
        if verdict is None:
            continue
        if verdict.status == "unsupported":
            out.append(_arch_unsupported(dev, verdict, build))
        elif verdict.status == "ptx" and not any(f.id == "driver-too-old" for f in out):
            out.append(_ptx_jit(dev, verdict, build, facts.environment))
    return out


def _at_least(j: knowledge.DriverJudgement) -> str:
    """The driver a remedy asks for: the table's, else (a CUDA release newer than the table) its CUDA version."""
    if j.required_driver:
        return f">= {j.required_driver} (CUDA {j.build_cuda})"
    return f"of CUDA {j.build_cuda} or newer (`nvidia-smi` shows the CUDA version a driver serves)"


def _rank(status: str) -> int:
    return {"unknown": 0, "ok": 0, "minor-version-compatibility": 1, "too-old": 2}[status]


def _minor_version_compatibility(
    j: knowledge.DriverJudgement, driver: str | None, evidence: dict[str, Any]
) -> Finding:
    """A note that the build runs: an id of its own, never driver-too-old (one id, one cause, at one
    severity: a fleet that counts driver-too-old must not count machines that work)."""
    return finding(
        "driver-minor-version-compat",
        Severity.INFO,
        summary=(
            f"Driver {driver or j.driver_cuda} (CUDA {j.driver_cuda}) is older than CUDA "
            f"{j.build_cuda} but runs it under minor version compatibility."
        ),
        cause=(
            f"CUDA {j.build_cuda} asks for driver >= {j.required_driver or '?'} "
            f"({j.required_driver_basis or knowledge.TABLE}); within CUDA "
            f"{j.build_cuda.split('.')[0]}.x a driver >= {j.minor_version_floor} runs it "
            "anyway, except features that need the newer driver and PTX from the newer toolkit "
            "(every GPU here has SASS in the build, so no PTX JIT is needed)."
        ),
        remedy=(
            f"Nothing is required; to lift the limits install a driver {_at_least(j)} "
            "(`sudo apt install nvidia-driver-<branch>` or the data-center driver) and reboot."
        ),
        evidence=evidence,
    )


def _too_old(j: knowledge.DriverJudgement, build: Build, evidence: dict[str, Any]) -> Finding:
    floor_text = (
        f" and below the floor of minor version compatibility for CUDA {j.build_cuda.split('.')[0]}.x "
        f"(>= {j.minor_version_floor})"
        if j.minor_version_floor
        else " (CUDA releases before 11 have no minor version compatibility)"
    )
    return finding(
        "driver-too-old",
        Severity.BLOCKER,
        summary=(
            f"The NVIDIA driver {j.driver_version or ''} (CUDA {j.driver_cuda or '?'}) is too old for CUDA "
            f"{j.build_cuda}, which {build.words.title} {build.framework_version or ''} uses.".replace("  ", " ")
        ),
        cause=(
            f"CUDA {j.build_cuda} needs driver >= {j.required_driver or '?'} ({j.required_driver_basis or knowledge.TABLE}); "
            f"this driver serves CUDA {j.driver_cuda or '?'}{floor_text}: the CUDA runtime refuses to start "
            "(cudaErrorInsufficientDriver)."
        ),
        remedy=(
            f"Install an NVIDIA driver {_at_least(j)} "
            "(e.g. `sudo apt install nvidia-driver-<branch>` or the data-center driver for your GPU) and reboot; "
            f"or use {build.words.other_builds}."
        ),
        evidence=evidence,
    )


def _ptx_needs_newer_driver(
    j: knowledge.DriverJudgement,
    build: Build,
    gpus: list[CudaDevice],
    arch_of: dict[int, knowledge.ArchJudgement],
    evidence: dict[str, Any],
) -> Finding:
    names = ", ".join(f"GPU {d.ordinal} ({d.name}, compute capability {d.compute_capability})" for d in gpus)
    return finding(
        "driver-too-old",
        Severity.BLOCKER,
        summary=(
            f"{names} only has PTX in this {build.words.title} build, and driver {j.driver_version or ''} (CUDA "
            f"{j.driver_cuda}) is too old to JIT-compile PTX from CUDA {j.build_cuda}."
        ),
        cause=(
            f"Minor version compatibility lets driver CUDA {j.driver_cuda} run CUDA {j.build_cuda} code, but not "
            f"JIT-compile its PTX: the build has no SASS for this GPU ({', '.join(arch_of[gpus[0].ordinal].sass)}), "
            f"only {arch_of[gpus[0].ordinal].uses}, which needs a driver of CUDA {j.build_cuda} or newer "
            "(cudaErrorUnsupportedPtxVersion)."
        ),
        remedy=(
            f"Install an NVIDIA driver {_at_least(j)} and reboot; or use a build "
            "with SASS for this GPU."
        ),
        evidence={**evidence, "gpus": [_gpu_evidence(d, arch_of[d.ordinal]) for d in gpus]},
    )


def _gpu_evidence(dev: CudaDevice, verdict: knowledge.ArchJudgement) -> dict[str, Any]:
    return {
        "cuda_ordinal": dev.ordinal,
        "name": dev.name,
        "compute_capability": verdict.compute_capability,
        "pci_bus_id": dev.pci_bus_id,
        "build_sass": list(verdict.sass),
        "build_ptx": list(verdict.ptx),
        "uses": verdict.uses,
    }


def _arch_unsupported(dev: CudaDevice, verdict: knowledge.ArchJudgement, build: Build) -> Finding:
    cuda_major = int(build.cuda_version.split(".")[0])
    floor = knowledge.min_compute_capability(cuda_major)
    oldest = min(
        (a for a in knowledge.parse_archs(list(build.archs))), key=lambda a: (a.major, a.minor), default=None
    )
    too_new_note = ""
    if oldest is not None and (dev.cc_major or 0, dev.cc_minor or 0) > (oldest.major, oldest.minor):
        too_new_note = (
            " It is newer than every SASS and there is no PTX to JIT-compile (a build for newer GPUs is needed)."
        )
    floor_note = (
        f" CUDA {cuda_major} itself supports compute capability >= {floor}."
        if floor
        else ""
    )
    return finding(
        "gpu-arch-unsupported",
        Severity.BLOCKER,
        summary=(
            f"GPU {dev.ordinal} ({dev.name}, compute capability {verdict.compute_capability}) is not supported by "
            f"this {build.words.title} build (SASS {', '.join(verdict.sass) or 'none'}; PTX {', '.join(verdict.ptx) or 'none'})."
        ),
        cause=(
            f"SASS runs only on its own major architecture with an equal or higher minor, PTX only on the same or "
            f"newer architectures: nothing in the build can run on compute capability {verdict.compute_capability}; "
            f"{build.words.refusal}.{too_new_note}{floor_note}"
        ),
        remedy=(
            f"Use a GPU the build covers, {build.words.older_build}, or "
            f"{build.words.from_source.format(cc=verdict.compute_capability)}."
        ),
        evidence={**_gpu_evidence(dev, verdict), "build_cuda": build.cuda_version, "build_source": build.source},
        subject=str(dev.ordinal),
    )


def _ptx_jit(dev: CudaDevice, verdict: knowledge.ArchJudgement, build: Build, env: dict[str, str | None]) -> Finding:
    cache = knowledge.data("cuda_compat.json")["jit_cache"]
    disabled = env.get("CUDA_CACHE_DISABLE") == "1"
    maxsize = env.get("CUDA_CACHE_MAXSIZE")
    path = env.get("CUDA_CACHE_PATH")
    return finding(
        # One id, one cause at one severity: a JIT that works is a note, a JIT with its cache off is a fault.
        "ptx-jit-cache-disabled" if disabled else "ptx-jit-compilation",
        Severity.DEGRADED if disabled else Severity.INFO,
        summary=(
            f"GPU {dev.ordinal} ({dev.name}, compute capability {verdict.compute_capability}) has no SASS in this "
            f"build: {build.words.title}'s kernels are JIT-compiled from {verdict.uses} at first start."
        ),
        cause=(
            f"The build ships SASS for {', '.join(verdict.sass) or 'no architecture'} and PTX {verdict.uses}; the "
            "driver compiles the PTX for this GPU when kernels are first loaded, which can take many minutes, "
            "and keeps the result in the JIT cache"
            + (" — but CUDA_CACHE_DISABLE=1 turns that cache off, so every start pays again." if disabled else ".")
        ),
        remedy=(
            "Expect a slow first start; keep the JIT cache large and persistent: "
            f"`export CUDA_CACHE_MAXSIZE={cache['suggested_maxsize']}` (the maximum) and, in containers or CI, "
            f"`export CUDA_CACHE_PATH=/a/persistent/dir` (default {cache['default_path']})"
            + ("; unset CUDA_CACHE_DISABLE" if disabled else "")
            + f"; raise --gpucheck-timeout if the first {build.words.title} start times out."
        ),
        evidence={
            **_gpu_evidence(dev, verdict),
            "CUDA_CACHE_DISABLE": env.get("CUDA_CACHE_DISABLE"),
            "CUDA_CACHE_MAXSIZE": maxsize,
            "CUDA_CACHE_PATH": path,
        },
        subject=str(dev.ordinal),
    )
