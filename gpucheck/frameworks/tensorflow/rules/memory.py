"""Resources layer, memory settings: do memory growth, a memory limit and the environment's allocator
settings work, judged by what happened (how much a process holds, the limit TensorFlow created its
devices with, whether the process survived), never by an error string alone.

An allocation that fails because other processes hold the memory is not a setting that failed: the
memory-growth probe then reports "not checked", and NVML's reading (``gpu-memory-exhausted``, in
``gpucheck.rules.nvml``) names the processes.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from gpucheck.facts import ChildExit, Facts, ProbeOutcome, facts_of
from gpucheck.frameworks.tensorflow import facts as tff
from gpucheck.frameworks.tensorflow.facts import GpuMemory, MemoryConfigFacts, TfSetupFacts
from gpucheck.model import Finding, Severity, finding
from gpucheck.rules.common import child_evidence
from gpucheck.settings import Settings

#: TF_FORCE_GPU_ALLOW_GROWTH values TensorFlow understands: GPUBFCAllocator::GetAllowGrowthValue
#: (tensorflow/core/common_runtime/gpu/gpu_bfc_allocator.cc) compares with strcmp against "false" and
#: "true"; anything else is logged ("could not be parsed") and ignored.
ALLOW_GROWTH_VALUES = ("true", "false")
#: A memory limit is applied when TensorFlow created the device with it, to this many MB.
LIMIT_TOLERANCE_MB = 1


def memory_rules(facts: Facts, settings: Settings) -> list[Finding]:
    out = _env_rules(facts.environment)
    setup = facts_of(tff.tf_setup(facts))
    if setup is not None:
        gpu_memory = facts_of(tff.gpu_memory(facts))
        out += _limit(setup, gpu_memory.memory if gpu_memory is not None else ())
        out += _growth_dropped(setup)
    growth = tff.memory_growth(facts)
    if growth is not None:
        out += _setting(growth, setup is not None and setup.devices_created)
    outcome = tff.cuda_malloc_async(facts)
    if outcome is not None:
        user_set = facts.environment.get("TF_GPU_ALLOCATOR") == "cuda_malloc_async"
        if outcome.exit.status != "ok":
            out.append(malloc_async_failed(outcome.exit, Severity.BLOCKER if user_set else Severity.INFO, user_set))
        elif outcome.facts is not None and outcome.facts.applied is False and not user_set:
            out.append(_async_refused(outcome.facts))
    return out


def not_judged(facts: Facts) -> str | None:
    """Why memory growth could not be judged on this machine, where it could not (for the check to say
    "not checked" rather than pass)."""
    outcome = tff.memory_growth(facts)
    if outcome is None:
        why = facts.not_run.get("memory-growth")
        return f"memory growth was not tried: {why}" if why else None
    if outcome.exit.status == "timeout":
        return f"memory growth: its TensorFlow process did not finish within {outcome.exit.duration_s:g} s"
    if outcome.exit.status == "cancelled":
        return f"memory growth: {outcome.exit.error or 'its TensorFlow process was stopped'}"
    if outcome.facts is not None and outcome.facts.applied is None and outcome.facts.not_checked:
        return f"memory growth: {outcome.facts.not_checked}"
    return None


def not_checked(facts: Facts, settings: Settings) -> dict[str, str]:
    """Why the memory settings were not judged here: no TensorFlow diagnosed, or memory growth not tried."""
    why = "--gpucheck-framework=none" if "tensorflow" not in settings.frameworks else not_judged(facts)
    return {"memory-config-failed": why} if why is not None else {}


def _env_rules(env: dict[str, str | None]) -> list[Finding]:
    value = env.get("TF_FORCE_GPU_ALLOW_GROWTH")
    if value is None or value in ALLOW_GROWTH_VALUES:
        return []
    return [
        finding(
            "memory-config-failed",
            Severity.DEGRADED,
            summary=f"TF_FORCE_GPU_ALLOW_GROWTH={value!r} is ignored: TensorFlow accepts only \"true\" or \"false\".",
            cause=(
                f"TensorFlow compares TF_FORCE_GPU_ALLOW_GROWTH with the exact strings \"true\" and \"false\"; {value!r} "
                "is neither, so it logs \"could not be parsed\" and keeps its default: the first process takes nearly all "
                "GPU memory, and memory growth is not on."
            ),
            remedy="`export TF_FORCE_GPU_ALLOW_GROWTH=true` (lower case), or call "
            "`tf.config.experimental.set_memory_growth(gpu, True)` for every GPU before using them.",
            evidence={
                "TF_FORCE_GPU_ALLOW_GROWTH": value,
                "valid_values": list(ALLOW_GROWTH_VALUES),
                "source": "tensorflow/core/common_runtime/gpu/gpu_bfc_allocator.cc, GPUBFCAllocator::GetAllowGrowthValue",
            },
            subject="TF_FORCE_GPU_ALLOW_GROWTH",
        )
    ]


def _limit(tf: TfSetupFacts, memory: tuple[GpuMemory, ...]) -> list[Finding]:
    """The main TensorFlow process gives every GPU a memory_limit: the limit TensorFlow created each
    device with ("Created device ... with N MB memory") must be that."""
    asked = tf.memory_limit_mb
    if asked is None:
        return []
    wrong = [
        m for m in memory if m.tf_limit_mb is not None and abs(m.tf_limit_mb - asked) > LIMIT_TOLERANCE_MB
    ]
    if not wrong:
        return []
    seen = ", ".join(f"{m.device}: {m.tf_limit_mb} MB" for m in wrong)
    return [
        finding(
            "memory-config-failed",
            Severity.DEGRADED,
            summary=f"A memory_limit of {asked} MiB is not what TensorFlow gave its GPU devices ({seen}).",
            cause=(
                f"tf.config.set_logical_device_configuration(gpu, [LogicalDeviceConfiguration(memory_limit={asked})]) "
                f"was set before the devices existed, but TensorFlow created them with {seen}: a limit set in a program "
                "does not bound what it takes of the GPU."
            ),
            remedy="Set the limit before anything touches a GPU (the first lines of the program); as a fallback, "
            "`export TF_FORCE_GPU_ALLOW_GROWTH=true` keeps each process to what it uses.",
            evidence={
                "memory_limit_mb": asked,
                "created_with_mb": {m.device: m.tf_limit_mb for m in memory},
            },
            subject="memory-limit",
        )
    ]


def _growth_dropped(tf: TfSetupFacts) -> list[Finding]:
    if tf.growth_kept_with_logical_devices is not False:
        return []
    return [
        finding(
            "memory-growth-dropped",
            Severity.INFO,
            summary=(
                f"In TensorFlow {tf.version}, memory growth is silently dropped once any logical device is "
                "configured (even a CPU split): the process then reserves nearly all free GPU memory."
            ),
            cause=(
                "With set_memory_growth(gpu, True) on every GPU and a logical device configuration on the CPU, "
                "TensorFlow's own GPU options (context._compute_device_options) came out with allow_growth off and a "
                "virtual device entry for every GPU, while tf.config.experimental.get_memory_growth still answers "
                "True. A program that does both takes the whole GPU, and the next TensorFlow process gets nothing."
            ),
            remedy=(
                "Where a program configures logical devices, give every GPU a memory_limit too "
                "(`tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration("
                "memory_limit=...)])`), or `export TF_FORCE_GPU_ALLOW_GROWTH=true`, which TensorFlow's allocator "
                "honours whatever the configuration."
            ),
            evidence={
                "tensorflow": tf.version,
                "growth_kept_with_logical_devices": False,
                "source": "tensorflow/python/eager/context.py, Context._compute_device_options",
            },
            subject="memory growth with logical devices",
        )
    ]


def _severe_lines(lines: tuple[str, ...] | list[str]) -> list[str]:
    return [ln for ln in lines if re.match(r"^[EF]\d{4} ", ln) or "Check failed" in ln][-10:]


def _memory_evidence(cfg: MemoryConfigFacts) -> dict[str, Any]:
    return {
        "setting": cfg.setting,
        "error": cfg.error,
        "allocated_mb": cfg.allocated_mb,
        "logical_gpus": list(cfg.logical_gpus),
        "memory": [
            {
                "device": m.device,
                "tf_limit_mb": m.tf_limit_mb,
                "nvml_free_mb": m.nvml_free_mb,
                "process_used_mb": m.process_used_mb,
                "error": m.error,
            }
            for m in cfg.memory
        ],
    }


def _setting(outcome: ProbeOutcome[MemoryConfigFacts], created_without_it: bool = False) -> list[Finding]:
    exit_, cfg = outcome.exit, outcome.facts
    if exit_.status in ("timeout", "cancelled"):
        return []  # not judged: not_judged() says so for the check
    if exit_.status != "ok":
        code = exit_.signal or (f"exit code {exit_.returncode}" if exit_.returncode is not None else None)
        how = f"died ({code})" if code else "died"
        return [
            finding(
                "memory-config-failed",
                Severity.DEGRADED,
                summary=f"TensorFlow with {outcome.name} {how}.",
                cause=f"A TensorFlow process configured for {outcome.name} {how} in {exit_.last_stage or 'start-up'}.",
                remedy="Read TensorFlow's lines in the evidence; avoid this setting until it works.",
                evidence={**child_evidence(exit_), "tensorflow_errors": _severe_lines(exit_.stderr_tail)},
                subject=outcome.name,
            )
        ]
    if cfg is None:
        return []
    if cfg.applied is None and cfg.error is not None and created_without_it:
        # TensorFlow creates its devices without this setting, not with it: the setting is at fault.
        cfg = dataclasses.replace(cfg, applied=False)
    if cfg.applied is not False:
        return []
    return [
        finding(
            "memory-config-failed",
            Severity.DEGRADED,
            summary=f"{cfg.setting} does not take effect.",
            cause=f"TensorFlow, configured with {cfg.setting}: {cfg.error}",
            remedy=(
                "Set memory options before anything touches a GPU (first lines of the program), and only one of memory "
                "growth or a logical-device memory_limit per GPU; `export TF_FORCE_GPU_ALLOW_GROWTH=true` works "
                "whatever the program configures."
            ),
            evidence=_memory_evidence(cfg),
            subject=outcome.name,
        )
    ]


def _async_refused(cfg: MemoryConfigFacts) -> Finding:
    return finding(
        "cuda-malloc-async-unsupported",
        Severity.INFO,
        summary="TF_GPU_ALLOCATOR=cuda_malloc_async does not work here (nothing here uses it).",
        cause=f"A TensorFlow process with TF_GPU_ALLOCATOR=cuda_malloc_async: {cfg.error}",
        remedy="Do not set TF_GPU_ALLOCATOR=cuda_malloc_async on this machine; the default allocator works.",
        evidence=_memory_evidence(cfg),
        subject="cuda-malloc-async",
    )


def malloc_async_failed(exit_: ChildExit, severity: Severity, user_set: bool) -> Finding:
    """Where the environment sets it, every TensorFlow program dies: ``memory-config-failed``. Where nothing
    uses it (--gpucheck-deep), a note of its own id: one id, one cause at one severity."""
    how = exit_.signal or (f"exit code {exit_.returncode}" if exit_.returncode is not None else exit_.status)
    return finding(
        "memory-config-failed" if user_set else "cuda-malloc-async-unsupported",
        severity,
        summary=f"TF_GPU_ALLOCATOR=cuda_malloc_async kills TensorFlow here ({how}).",
        cause=(
            f"A TensorFlow process with TF_GPU_ALLOCATOR=cuda_malloc_async ended with {how} in "
            f"{exit_.last_stage or 'start-up'}: TensorFlow aborts where CUDA's stream-ordered allocator is unsupported "
            "(GPU older than SM 6.0, driver or CUDA older than 11.2, or an OS without it)."
            + (" Your environment sets it, so your TensorFlow programs die the same way." if user_set else "")
        ),
        remedy=(
            "Unset TF_GPU_ALLOCATOR (the default BFC allocator works everywhere), or update the driver."
            if user_set
            else "Do not set TF_GPU_ALLOCATOR=cuda_malloc_async on this machine; the default allocator works."
        ),
        evidence={**child_evidence(exit_), "tensorflow_fatal": _severe_lines(exit_.stderr_tail)},
        subject="cuda-malloc-async",
    )
