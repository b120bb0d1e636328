"""Framework layer: is TensorFlow importable, a CUDA build, and does it register the GPUs."""

from __future__ import annotations

import re

from gpucheck.facts import ChildExit, Facts
from gpucheck.frameworks.tensorflow import facts as tff
from gpucheck.frameworks.tensorflow.facts import FrameworkFacts
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.common import FrameworkProbe, framework_crashed, framework_probe_failure
from gpucheck.settings import Settings

#: How the findings about TensorFlow's probe child name it.
PROBE = FrameworkProbe(
    "TensorFlow",
    "import tensorflow",
    'python -c "import tensorflow as tf; print(tf.config.list_physical_devices())"',
    "a `F…` (LOG(FATAL)) line names what TensorFlow refused; ",
)
#: absl/TensorFlow log lines: severity letter, date, time, thread, file:line] message.
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} ")


def tf_log_lines(lines: tuple[str, ...] | list[str]) -> list[str]:
    return [ln for ln in lines if TF_LOG_LINE.match(ln) or "Could not" in ln or "cuda" in ln.lower()]


def explain_log(lines: tuple[str, ...] | list[str]) -> list[dict[str, str]]:
    """Each recognised line of TensorFlow's output with the cause it points to ("harmless" for the
    notices that never are one), from data/log_patterns.json."""
    from gpucheck.logs import classify

    return [{"line": m.line, "means": m.finding or "harmless"} for m in classify(list(lines)).matches]


def framework_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """The framework layer's one finding at most, the first that holds of: ``framework-hung`` (the probe
    timed out before it reported), ``framework-crashed`` (it died, could not run or reported nothing),
    ``framework-missing`` (``import tensorflow`` fails), ``framework-cpu-only`` (not a CUDA build),
    ``framework-gpu-init-failed`` (a CUDA build that registers no GPU)."""
    probe = tff.framework(facts)
    if probe is None:
        return []
    exit_, tf = probe.exit, probe.facts
    if tf is None:
        return [framework_probe_failure(PROBE, exit_, settings.timeout)]
    if exit_.status in ("crashed", "error"):
        return [framework_crashed(PROBE, exit_)]
    if not tf.importable:
        return [_framework_missing(tf, exit_)]
    if not tf.is_cuda_build:
        return [_framework_cpu_only(tf)]
    if not tf.gpus:
        return [_framework_gpu_init_failed(tf, exit_)]
    return []


def _framework_missing(tf: FrameworkFacts, exit_: ChildExit) -> Finding:
    """``framework-missing``: ``import tensorflow`` failed (or a file of that name shadows the package)."""
    return finding(
        "framework-missing",
        Severity.BLOCKER,
        summary="TensorFlow cannot be imported.",
        cause=f"`import tensorflow` failed: {tf.import_error}",
        remedy=(
            f"Rename or remove {tf.location} (it hides the real package), then run again."
            if tf.location and tf.import_error and "shadows" in tf.import_error
            else 'Install it into this environment: `pip install "tensorflow[and-cuda]"`.'
        ),
        evidence={"import_error": tf.import_error, "output_tail": list(exit_.stderr_tail[-10:])},
    )


def _framework_cpu_only(tf: FrameworkFacts) -> Finding:
    """``framework-cpu-only``: get_build_info() has no is_cuda_build=True."""
    return finding(
        "framework-cpu-only",
        Severity.BLOCKER,
        summary=f"TensorFlow {tf.version} is not a CUDA build: it cannot use a GPU.",
        cause="tf.sysconfig.get_build_info() has no is_cuda_build=True: this is a CPU-only wheel "
        "(tensorflow-cpu, or TensorFlow on a platform without CUDA builds).",
        remedy=(
            "`pip uninstall -y tensorflow-cpu tensorflow && pip install \"tensorflow[and-cuda]=="
            f"{tf.version}\"` (Linux x86_64 / aarch64; on Windows use WSL2)."
        ),
        evidence={"version": tf.version, "location": tf.location, "build_info": tf.build_info},
    )


def _framework_gpu_init_failed(tf: FrameworkFacts, exit_: ChildExit) -> Finding:
    """``framework-gpu-init-failed``: tf.config.list_physical_devices('GPU') is empty."""
    return finding(
        "framework-gpu-init-failed",
        Severity.BLOCKER,
        summary=f"TensorFlow {tf.version} (CUDA build) registers no GPU.",
        cause=(
            "tf.config.list_physical_devices('GPU') is empty"
            + (f" ({tf.list_devices_error})" if tf.list_devices_error else "")
            + "; TensorFlow's own log lines are in the evidence."
        ),
        remedy=(
            "Read TensorFlow's lines in the evidence: 'Cannot dlopen some GPU libraries' means CUDA/cuDNN "
            f"libraries are missing (`pip install \"tensorflow[and-cuda]=={tf.version}\"`)."
        ),
        evidence={
            "version": tf.version,
            "build_info": tf.build_info,
            "devices": [d.name for d in tf.devices],
            "tensorflow_log": tf_log_lines(exit_.stderr_tail),
            # TensorFlow's own words, read by the classifier `gpucheck explain` uses.
            "tensorflow_log_means": explain_log(exit_.stderr_tail),
        },
    )
