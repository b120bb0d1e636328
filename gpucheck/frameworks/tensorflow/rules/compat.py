"""TensorFlow's compatibility rule: its CUDA build, read from its libraries probe (build_info.py as data) or its
child (tf.sysconfig.get_build_info()), judged by the lower stack's compatibility rules (``gpucheck.rules.compat``)."""

from __future__ import annotations

from typing import Any

from gpucheck.facts import Facts, facts_of
from gpucheck.frameworks.tensorflow import facts as tff
from gpucheck.model import Finding
from gpucheck.rules.compat import Build, Words, judge
from gpucheck.settings import Settings

#: How the compatibility findings name TensorFlow's build.
WORDS = Words(
    title="TensorFlow",
    refusal="TensorFlow ignores the device ('The minimum required Cuda capability is …')",
    other_builds="a TensorFlow built for the CUDA this driver serves (see tensorflow.org/install/source#gpu)",
    older_build="an older TensorFlow whose tested build still compiles for this architecture (tensorflow.org/install/source#gpu)",
    from_source="build TensorFlow from source with `TF_CUDA_COMPUTE_CAPABILITIES={cc}`",
)


def framework_build(facts: Facts) -> Build | None:
    """The CUDA build of TensorFlow: from the libraries probe (build_info.py read as data), else from
    the TensorFlow probe (tf.sysconfig.get_build_info()). None for a CPU build or an unknown one."""
    candidates: list[tuple[str | None, dict[str, Any], str]] = []
    lib = facts_of(tff.libraries(facts))
    if lib is not None and lib.build_info:
        candidates.append((lib.framework_version, lib.build_info, lib.build_info_source or "build_info.py"))
    tf = facts_of(tff.framework(facts))
    if tf is not None and tf.build_info:
        candidates.append((tf.version, tf.build_info, "tf.sysconfig.get_build_info()"))
    for version, info, source in candidates:
        if not info.get("is_cuda_build") or not info.get("cuda_version"):
            continue
        archs = info.get("cuda_compute_capabilities") or []
        if isinstance(archs, str):
            archs = [archs]
        return Build(
            version, str(info["cuda_version"]), tuple(str(a) for a in archs), source, runtime_version(facts), WORDS
        )
    return None


def runtime_version(facts: Facts) -> str | None:
    """The CUDA runtime TensorFlow's libraries probe found loading (libcudart's version)."""
    lib = facts_of(tff.libraries(facts))
    cudart = lib.library("cudart") if lib is not None else None
    return cudart.version if cudart is not None and cudart.loaded else None


def compat_rules(facts: Facts, settings: Settings) -> list[Finding]:
    return judge(framework_build(facts), facts)
