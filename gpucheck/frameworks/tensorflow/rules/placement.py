"""Placement layer (and XLA's toolchain of the libraries layer): do ops asked for a GPU run there, are
GPU results right, does ``jit_compile`` work; plus advice users ask for (mixed precision, memory growth) as info findings.
The placement step is the first to create TensorFlow's devices: where TensorFlow lists GPUs but that
fails, it reports ``framework-gpu-init-failed`` (the framework probe only lists them) and nothing else.

The facts come from real TensorFlow runs: the steps of the one TensorFlow process (``gpucheck.frameworks.tensorflow.setup``,
``placement``, ``training``, ``numerics``, ``xla``, ``multidevice``), each with facts of its own. Findings here are emitted
whatever lies below; when a lower layer is the root cause, the checks report them as blocked by it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from gpucheck.facts import ChildExit, Facts, facts_of, gpu_index
from gpucheck.frameworks.tensorflow import facts as tff
from gpucheck.frameworks.tensorflow.facts import (
    GpuMemory,
    MultiDeviceRun,
    OpRun,
    TfSetupFacts,
    TrainingStepPlacement,
    XlaRun,
)
from gpucheck.frameworks.tensorflow.rules.memory import malloc_async_failed
from gpucheck.model import Finding, Severity, finding
from gpucheck.protocol import DEADLINE_EXIT, INIT_SECTION
from gpucheck.rules.common import child_evidence, numerics_findings
from gpucheck.settings import Settings

#: XLA's messages when ptxas or libdevice is missing (xla/service/gpu/nvptx_compiler.cc,
#: llvm_gpu_backend/gpu_backend_lib.cc; e.g. https://github.com/tensorflow/tensorflow/issues/56927).
XLA_TOOLCHAIN = re.compile(
    r"libdevice not found|Can't find libdevice|Couldn't (?:find|invoke) ptxas|Can't find ptxas|ptxas.*(?:not found|No such file)"
    r"|ptxas too old",
    re.IGNORECASE,
)
#: XLA's words when the ptxas it found cannot compile for this GPU (TensorFlow 2.21 on a Pascal GPU with
#: CUDA 13.0's ptxas first on PATH, seen here: "UNIMPLEMENTED: /usr/local/bin/ptxas ptxas too old. Falling
#: back to the driver to compile."; CUDA 13 dropped offline compilation for compute capability < 7.5).
_PTXAS_UNUSABLE = re.compile(r"(?P<path>\S*ptxas)\s+ptxas too old", re.IGNORECASE)
#: The child's word when a step overran its budget (gpucheck.probes.child._Watchdog).
_STEP_BUDGET = re.compile(r"the step did not finish within its ([0-9.]+) s")
#: Compute capability from which the GPU has Tensor Cores (float16), and bfloat16 / TF32 ones.
TENSOR_CORES_CC = (7, 0)
BF16_CC = (8, 0)
_FLOAT = ("float", "half", "bfloat")
_XLA_REMEDY = (
    'Install XLA\'s CUDA compiler tools: `pip install "nvidia-cuda-nvcc-cu12"` (it brings ptxas and '
    "nvvm/libdevice/libdevice.10.bc), or point XLA at a CUDA toolkit that has both: "
    "`export XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda`."
)


def _is_cpu(device: str | None) -> bool:
    return device is not None and "CPU:" in device.upper().rsplit("/", 1)[-1]


def _expected(tf: TfSetupFacts, requested: str) -> bool:
    """A spec users expect to work: a GPU TensorFlow registers, or /GPU:0 where it registers none.
    The index one past the last registered GPU is probed on purpose: its refusal is not a fault."""
    idx = gpu_index(requested)
    if idx is None:
        return False
    return idx < len(tf.gpus) or (not tf.gpus and idx == 0)


def _devices_note(tf: TfSetupFacts) -> str | None:
    if tf.cpu_split > 1:
        return (
            f"gpucheck split the CPU into {tf.cpu_split} logical devices for its multi-device step: "
            "CPU:1 and up in TensorFlow's lists are gpucheck's, not yours"
        )
    return None


def placement_rules(facts: Facts, settings: Settings) -> list[Finding]:
    outcome = tff.placement(facts)
    out: list[Finding] = []
    setup_outcome = tff.tf_setup(facts)
    setup = facts_of(setup_outcome)
    if outcome is not None:
        # Also with facts: the steps before the one that died or overran left theirs.
        out.extend(_step_died(outcome.exit, facts, settings))
    if setup is not None:
        fw = facts_of(tff.framework(facts))
        cuda_build = fw is not None and bool(fw.is_cuda_build)
        init_error = setup.errors.get(INIT_SECTION) if setup.gpus and cuda_build else None
        if init_error is not None and setup_outcome is not None:
            out.append(_devices_not_created(setup, init_error, setup_outcome.exit))
        elif setup.importable:
            placement = facts_of(tff.placement(facts))
            runs = placement.runs if placement is not None else ()
            training = facts_of(tff.training_step(facts))
            numerics = facts_of(tff.numerics(facts))
            multi = facts_of(tff.multi_device(facts))
            xla = facts_of(tff.xla(facts))
            out.extend(_hard_placement(setup, runs, placement.soft_placement_default if placement else None))
            out.extend(_soft_placement(setup, runs, training.run if training is not None else None))
            out.extend(numerics_findings("TensorFlow", numerics.checks if numerics is not None else (), CONV_REMEDY))
            out.extend(_multi_device(multi.run if multi is not None else None, "the placement step"))
            out.extend(_xla(xla.runs if xla is not None else (), setup.env))
    out.extend(_advice(facts, setup))
    return out


# --- the step itself ------------------------------------------------------------------------------


def _step_died(exit_: ChildExit, facts: Facts, settings: Settings) -> list[Finding]:
    """The placement step runs in the framework probe's child after that probe wrote its facts: the child
    ending "ok" (its framework facts are there) with a signal or an error code means the step died. A
    child that hung or died earlier is the framework rules' finding (framework-hung, framework-crashed)."""
    fw = facts_of(tff.framework(facts))
    died = exit_.signal is not None or (exit_.returncode is not None and exit_.returncode != 0)
    # A child killed at the parent's timeout after its framework facts: a step that did not finish, as when
    # its own watchdog ends it (DEADLINE_EXIT).
    overran = exit_.status == "timeout" and fw is not None
    if (exit_.status != "ok" and not overran) or not (died or overran) or fw is None or not fw.importable:
        return []
    how = exit_.signal or f"exit code {exit_.returncode}"
    where = exit_.last_stage or "the placement step"
    if exit_.returncode == DEADLINE_EXIT or overran:
        budget = next((m.group(1) for m in map(_STEP_BUDGET.search, exit_.stderr_tail) if m), None)
        within = f"its {budget} s (a share of the {settings.timeout:g} s timeout)" if budget else f"{settings.timeout:g} s"
        return [
            finding(
                "placement-failed",
                Severity.DEGRADED,
                summary=f"The placement step did not finish within {within} (it was in {where}).",
                cause=(
                    f"TensorFlow was still running `{where}` when the probe reached its deadline: ops on the devices "
                    "are very slow to start (a first start that JIT-compiles PTX takes minutes) or do not return."
                ),
                remedy="Run again with a larger --gpucheck-timeout; if it never finishes, run the op by hand with "
                "`TF_CPP_MIN_LOG_LEVEL=0` to see where it stops.",
                evidence=child_evidence(exit_),
                subject="placement step",
            )
        ]
    if "cuda_malloc_async" in "\n".join(exit_.stderr_tail):
        return [malloc_async_failed(exit_, Severity.BLOCKER, user_set=True)]
    return [
        finding(
            "placement-failed",
            Severity.BLOCKER,
            summary=f"TensorFlow died ({how}) placing ops on its devices, in {where}.",
            cause=(
                f"TensorFlow imports and lists its devices, but the process died with {how} while running `{where}`: "
                "programs that use the devices die the same way."
            ),
            remedy="Read TensorFlow's last lines in the evidence (an `F…` line names what it refused); run the same "
            "op by hand with `TF_CPP_MIN_LOG_LEVEL=0`.",
            evidence=child_evidence(exit_),
            subject="placement step",
        )
    ]


def _devices_not_created(tf: TfSetupFacts | None, error: str, exit_: ChildExit) -> Finding:
    """TensorFlow lists the GPUs but fails creating its devices: every op fails, on the CPU too."""
    names = [str(g.details.get("device_name") or g.name) for g in tf.gpus] if tf is not None else []
    message = error.split(": ", 1)[1] if error.startswith("tensorflow.") and ": " in error else error
    logs = list(dict.fromkeys(ln for ln in exit_.stderr_tail if re.match(r"^[EWF]\d{4} ", ln)))[-10:]
    out_of_memory = bool(re.search(r"out of memory|CUDA_ERROR_OUT_OF_MEMORY", " ".join([error, *logs]), re.IGNORECASE))
    return finding(
        "framework-gpu-init-failed",
        Severity.BLOCKER,
        summary=f"TensorFlow lists {len(names)} GPU(s) but cannot create its devices: {message}",
        cause=(
            f"tf.config.list_physical_devices('GPU') shows {', '.join(names)}, but initialising the devices (the first "
            f"thing any op does) fails: {error}. No op runs, on the GPU or the CPU."
        ),
        remedy=(
            "The GPU's memory is taken: a CUDA context does not fit. Stop the processes that hold it (nvidia-smi "
            "lists them; gpu-memory-exhausted names them where NVML answers), or run on another GPU "
            "(CUDA_VISIBLE_DEVICES)."
            if out_of_memory
            else "The CUDA runtime and the driver disagree: check that the CUDA libraries TensorFlow loads are those "
            "of its build (`pip install \"tensorflow[and-cuda]\"`), and that no other libcudart comes first on "
            "LD_LIBRARY_PATH."
        ),
        evidence={"gpus": names, "error": error, "tensorflow_log": logs, "out_of_memory": out_of_memory},
        subject="device initialisation",
    )


# --- placement ------------------------------------------------------------------------------------


def _by_request(runs: tuple[OpRun, ...], soft: bool) -> dict[str, list[OpRun]]:
    out: dict[str, list[OpRun]] = {}
    for run in runs:
        if run.soft_placement == soft:
            out.setdefault(run.requested, []).append(run)
    return out


def _hard_placement(tf: TfSetupFacts, all_runs: tuple[OpRun, ...], soft_default: bool | None) -> list[Finding]:
    out: list[Finding] = []
    registered = [g.name for g in tf.gpus]
    for requested, runs in _by_request(all_runs, soft=False).items():
        failed = [r for r in runs if not r.ok]
        if not failed or not _expected(tf, requested):
            continue
        errors = {f"{r.mode}_error": f"{r.error_type}: {r.error}" for r in failed}
        if not tf.gpus:
            cause = (
                f"With soft placement off, TensorFlow refuses an op pinned to {requested}: it registers no GPU "
                f"(its devices: {', '.join(tf.logical_devices) or 'none'}). TensorFlow says: {failed[0].error}"
            )
            remedy = (
                "Fix what keeps TensorFlow from registering a GPU (the root cause, in a lower layer). Until then, "
                f"code pinned to '{requested}' runs only with soft placement on "
                "(`tf.config.set_soft_device_placement(True)`, TensorFlow 2's eager default), and then on the CPU."
            )
        else:
            cause = (
                f"TensorFlow registers {', '.join(registered)} but refuses to place a float32 MatMul on {requested} "
                f"with soft placement off: {failed[0].error}"
            )
            remedy = (
                "Run the op by hand with `TF_CPP_MIN_LOG_LEVEL=0` and read why the GPU kernel is rejected; check that "
                "CUDA_VISIBLE_DEVICES did not change between device listing and use."
            )
        out.append(
            finding(
                "placement-failed",
                Severity.BLOCKER,
                summary=f"An op pinned to {requested} fails with soft placement off ({', '.join(r.mode for r in failed)}).",
                cause=cause,
                remedy=remedy,
                evidence={
                    "requested": requested,
                    **errors,
                    "registered_gpus": registered,
                    "available_devices": list(tf.logical_devices),
                    "soft_placement_default": soft_default,
                    "note": _devices_note(tf),
                },
                subject=requested,
            )
        )
    return out


def _fallback_lines(step: TrainingStepPlacement | None, floats_only: bool) -> tuple[list[str], dict[str, int]]:
    if step is None:
        return [], {}
    ops = [
        f for f in step.fallbacks if not floats_only or (f.dtype is not None and f.dtype.startswith(_FLOAT))
    ]
    lines = [f"{f.name} ({f.op_type}, {f.dtype or '-'}) ran on {f.device.rsplit('/', 1)[-1]}: {f.reason}" for f in ops]
    return lines, dict(Counter(f.reason for f in ops))


def _soft_placement(
    tf: TfSetupFacts, all_runs: tuple[OpRun, ...], training: TrainingStepPlacement | None
) -> list[Finding]:
    out: list[Finding] = []
    for requested, runs in _by_request(all_runs, soft=True).items():
        if not _expected(tf, requested):
            continue
        errored = [r for r in runs if not r.ok]
        if errored:
            out.append(
                finding(
                    "placement-failed",
                    Severity.BLOCKER,
                    summary=f"An op asked for {requested} fails even with soft placement on.",
                    cause=f"TensorFlow could not run a float32 MatMul asked for {requested}: {errored[0].error}",
                    remedy="Run the op by hand with `TF_CPP_MIN_LOG_LEVEL=0` and read TensorFlow's lines.",
                    evidence={"requested": requested, **{f"{r.mode}_error": f"{r.error_type}: {r.error}" for r in errored}},
                    subject=requested,
                )
            )
        landed = [r for r in runs if r.ok and _is_cpu(r.device)]
        if not landed:
            continue
        lines, reasons = _fallback_lines(training, floats_only=False)
        why = (
            "TensorFlow registers no GPU, so soft placement quietly runs it on the CPU"
            if not tf.gpus
            else f"TensorFlow registers {requested} but soft placement chose the CPU"
        )
        out.append(
            finding(
                "soft-placement-fallback",
                Severity.BLOCKER,
                summary=f"An op asked for {requested} silently ran on the CPU ({', '.join(r.mode for r in landed)}).",
                cause=(
                    f"With soft placement on, a float32 MatMul under tf.device('{requested}') ran on "
                    f"{landed[0].device}: {why}. No error is raised: the program is just slow."
                ),
                remedy=(
                    "Fix what keeps TensorFlow from registering a GPU (the root cause, in a lower layer); to make such "
                    "fallbacks loud, run with `tf.config.set_soft_device_placement(False)` and "
                    "`tf.debugging.set_log_device_placement(True)`."
                    if not tf.gpus
                    else "Run with `tf.debugging.set_log_device_placement(True)` and "
                    "`tf.config.set_soft_device_placement(False)` to see the op TensorFlow refuses to put on the GPU."
                ),
                evidence={
                    "requested": requested,
                    **{f"{r.mode}_ran_on": r.device for r in landed},
                    "training_step_ops_on_cpu": lines[:15],
                    "training_step_reasons": reasons,
                    "training_step_ops_placed": training.placed_ops if training else None,
                    "note": _devices_note(tf),
                },
                subject=requested,
            )
        )
    if tf.gpus and not any(f.id == "soft-placement-fallback" for f in out):
        lines, reasons = _fallback_lines(training, floats_only=True)
        if lines and training is not None:
            out.append(
                finding(
                    "soft-placement-fallback",
                    Severity.DEGRADED,
                    summary=f"{len(lines)} op(s) of a training step asked for a GPU and ran on the CPU.",
                    cause=(
                        f"Device-placement logging over a small training step under tf.device('{training.requested}') "
                        f"shows float ops placed on the CPU ({', '.join(f'{k}: {v}' for k, v in reasons.items())})."
                    ),
                    remedy=(
                        "Ops without a GPU kernel for their dtype run on the CPU and copy data back and forth: cast to a "
                        "dtype with a GPU kernel, or move them out of the hot loop."
                    ),
                    evidence={"ops_on_cpu": lines[:20], "reasons": reasons, "ops_placed": training.placed_ops},
                    subject="training step",
                )
            )
    return out


# --- numerics ---------------------------------------------------------------------------------------


#: What a numerics check that raised needs (``rules.common.numeric_raised``).
CONV_REMEDY = ("For a convolution, cuDNN must load (`pip install \"tensorflow[and-cuda]\"` brings it); read the error in "
               "the evidence for the library or kernel it names.")


def _multi_device(run: MultiDeviceRun | None, where: str) -> list[Finding]:
    if run is None or run.ok:
        return []
    evidence = {
        "devices": list(run.devices),
        "kind": run.kind,
        "ran_on": list(run.ran_on),
        "error": run.error,
        "tolerance": run.tolerance,
        "exception": run.exception,
        "where": where,
    }
    if run.exception is not None:
        return [
            finding(
                "placement-failed",
                Severity.BLOCKER,
                summary=f"A gradient step split across {', '.join(run.devices)} fails.",
                cause=f"Computing shard gradients on each device and summing them on {run.devices[0]} raised: {run.exception}",
                remedy="Read the error: cross-device copies need every device usable (and peer access or host staging between GPUs).",
                evidence=evidence,
                subject="multi-device",
            )
        ]
    return [
        finding(
            "numerical-mismatch",
            Severity.BLOCKER,
            summary=f"A gradient step split across {', '.join(run.devices)} disagrees with the reference.",
            cause=(
                f"The summed shard gradients differ from the float64 reference by {run.error:.3g} "
                f"(tolerance {run.tolerance:g}): data is corrupted on its way between devices or computed wrong."
            ),
            remedy="Test the devices one by one (`CUDA_VISIBLE_DEVICES=N`), check `nvidia-smi topo -m` and PCIe/NVLink errors.",
            evidence=evidence,
            subject="multi-device",
        )
    ]


# --- XLA ----------------------------------------------------------------------------------------------


def _xla(runs: tuple[XlaRun, ...], env: dict[str, str | None]) -> list[Finding]:
    out: list[Finding] = []
    for run in runs:
        if run.ok:
            continue
        text = "\n".join([run.error or "", *run.log_lines])
        evidence = {
            "source": "a real jit_compile=True call",
            "device": run.device,
            "jit_compile_error": run.error,
            "xla_log": list(run.log_lines),
            "searched": list(run.searched),
            "XLA_FLAGS": env.get("XLA_FLAGS"),
        }
        unusable = _PTXAS_UNUSABLE.search(text)
        if run.error is not None and unusable:
            out.append(
                finding(
                    "xla-toolchain-missing",
                    Severity.DEGRADED,
                    summary=f"jit_compile=True fails on {run.device}: the ptxas XLA found ({unusable.group('path')}) "
                    "cannot compile for this GPU.",
                    cause=(
                        f"A tf.function(jit_compile=True) on {run.device} failed: {run.error} XLA takes the first "
                        "ptxas it finds and calls it too old when it refuses this GPU's architecture (CUDA 13's "
                        "ptxas no longer compiles for compute capability below 7.5); every XLA-compiled function "
                        "fails the same way."
                    ),
                    remedy=(
                        "Give XLA the ptxas of TensorFlow's own CUDA major: `pip install \"nvidia-cuda-nvcc-cu12\"` "
                        "and take other toolkits' bin directories off PATH, or "
                        "`export XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda-12.<minor>`."
                    ),
                    evidence={**evidence, "ptxas": unusable.group("path")},
                    subject=f"jit_compile on {run.device}",
                )
            )
        elif run.error is not None and XLA_TOOLCHAIN.search(text):
            missing = "libdevice" if "libdevice" in text.lower() else "ptxas"
            out.append(
                finding(
                    "xla-toolchain-missing",
                    Severity.DEGRADED,
                    summary=f"jit_compile=True fails on {run.device}: XLA cannot find {missing}.",
                    cause=(
                        f"A tf.function(jit_compile=True) on {run.device} failed: {run.error}"
                        + (f" XLA searched {', '.join(run.searched)}." if run.searched else "")
                        + " Every XLA-compiled function (and Keras' jit_compile) fails the same way."
                    ),
                    remedy=_XLA_REMEDY,
                    evidence=evidence,
                    subject=f"jit_compile on {run.device}",
                )
            )
        elif run.error is not None and run.max_error is not None:
            out.append(
                finding(
                    "numerical-mismatch",
                    Severity.BLOCKER,
                    summary=f"An XLA-compiled function computes wrong results on {run.device}.",
                    cause=f"A jit_compile=True matmul-relu-exp-sum on {run.device}: {run.error}.",
                    remedy="Compare with `jit_compile=False`; report the XLA bug with the versions in the header.",
                    evidence=evidence,
                    subject=f"jit_compile on {run.device}",
                )
            )
        elif run.error is not None:
            out.append(
                finding(
                    "placement-failed",
                    Severity.DEGRADED,
                    summary=f"jit_compile=True fails on {run.device}.",
                    cause=f"A tf.function(jit_compile=True) on {run.device} failed: {run.error}",
                    remedy="Read XLA's error in the evidence; functions without jit_compile still run.",
                    evidence=evidence,
                    subject=f"jit_compile on {run.device}",
                )
            )
    return out


# --- advice ------------------------------------------------------------------------------------------------


def _gpu_capabilities(facts: Facts, tf: TfSetupFacts | None) -> list[tuple[str, str | None, tuple[int, int]]]:
    """(device, name, compute capability): from TensorFlow's device details where it registers GPUs,
    else from NVML, else from the CUDA driver (advice about the GPU holds before TensorFlow works)."""
    out: list[tuple[str, str | None, tuple[int, int]]] = []
    if tf is not None and tf.gpus:
        for i, g in enumerate(tf.gpus):
            if (cc := g.capability) is not None:
                out.append((f"/GPU:{i}", g.details.get("device_name"), cc))
        return out
    nf = facts.nvml.facts
    for gpu in nf.gpus if nf is not None else ():
        if gpu.cc_major is not None and gpu.cc_minor is not None:
            out.append((gpu.id, gpu.name, (gpu.cc_major, gpu.cc_minor)))
    if out:
        return out
    cf = facts.cuda.facts
    for dev in cf.devices if cf is not None else ():
        if dev.cc_major is not None and dev.cc_minor is not None:
            out.append((f"CUDA device {dev.ordinal}", dev.name, (dev.cc_major, dev.cc_minor)))
    return out


def _shared_gpus(facts: Facts, memory: tuple[GpuMemory, ...]) -> list[dict[str, Any]]:
    """GPUs other compute processes use: from the GPU memory step's facts (NVML's reading, taken by the
    set-up before TensorFlow initialised its devices), else from the NVML probe."""
    if memory:
        return [
            {
                "gpu": m.device,
                "processes": [{"pid": pid, "used_mib": used} for pid, used in m.nvml_processes],
                "nvml_free_mb": m.nvml_free_mb,
                "tf_limit_mb": m.tf_limit_mb,
            }
            for m in memory
            if m.nvml_processes
        ]
    nf = facts.nvml.facts
    return [
        {
            "gpu": g.id,
            "processes": [
                {"pid": p.pid, "name": p.name, "used_mib": p.used_memory // (1 << 20) if p.used_memory is not None else None}
                for p in g.processes
            ],
            "nvml_free_mb": g.memory.free // (1 << 20) if g.memory is not None else None,
        }
        for g in (nf.gpus if nf is not None else ())
        if g.processes
    ]


def _advice(facts: Facts, setup: TfSetupFacts | None) -> list[Finding]:
    out: list[Finding] = []
    gpus = _gpu_capabilities(facts, setup)
    if gpus:
        rows = [
            {
                "device": device,
                "name": name,
                "compute_capability": f"{cc[0]}.{cc[1]}",
                "tensor_cores_float16": cc >= TENSOR_CORES_CC,
                "bfloat16_and_tf32": cc >= BF16_CC,
            }
            for device, name, cc in gpus
        ]
        best = max(cc for _d, _n, cc in gpus)
        if best >= BF16_CC:
            summary = "Mixed precision pays off here: Tensor Cores run bfloat16 and float16; float32 matmuls use TF32."
            remedy = (
                "`keras.mixed_precision.set_global_policy('mixed_bfloat16')` (no loss scaling needed) or "
                "'mixed_float16'; keep the last layer in float32. TF32 is on by default for float32 "
                "(`tf.config.experimental.enable_tensor_float_32_execution(False)` for full float32)."
            )
        elif best >= TENSOR_CORES_CC:
            summary = "Mixed precision pays off here: Tensor Cores run float16 (not bfloat16)."
            remedy = (
                "`keras.mixed_precision.set_global_policy('mixed_float16')` (Keras scales the loss); keep the last "
                "layer in float32 and layer sizes multiples of 8."
            )
        else:
            summary = "Mixed precision brings little speed here: the GPU has no Tensor Cores (compute capability < 7.0)."
            remedy = "Stay with float32; 'mixed_float16' only saves memory on this GPU."
        out.append(
            finding(
                "mixed-precision-available",
                Severity.INFO,
                summary=summary,
                cause=(
                    "Tensor Cores (float16) come with compute capability 7.0, bfloat16 and TF32 with 8.0; here: "
                    + ", ".join(f"{r['device']} ({r['name'] or 'unnamed'}) {r['compute_capability']}" for r in rows)
                    + "."
                ),
                remedy=remedy,
                evidence={"gpus": rows},
            )
        )
    growth_on = facts.environment.get("TF_FORCE_GPU_ALLOW_GROWTH") == "true"
    gpu_memory = facts_of(tff.gpu_memory(facts))
    shared = _shared_gpus(facts, gpu_memory.memory if gpu_memory is not None else ())
    if shared and not growth_on:
        out.append(
            finding(
                "memory-growth-advised",
                Severity.INFO,
                summary="Other processes use the GPU: turn memory growth on so TensorFlow does not take all the rest.",
                cause=(
                    "By default TensorFlow reserves nearly all free memory of every GPU it uses, leaving none to the "
                    "next process; "
                    + ", ".join(f"{g['gpu']} has {len(g['processes'])} compute process(es)" for g in shared)
                    + "."
                ),
                remedy="`export TF_FORCE_GPU_ALLOW_GROWTH=true`, or `tf.config.experimental.set_memory_growth(gpu, True)` "
                "for every GPU, or a memory_limit through `tf.config.set_logical_device_configuration`.",
                evidence={"gpus": shared, "TF_FORCE_GPU_ALLOW_GROWTH": facts.environment.get("TF_FORCE_GPU_ALLOW_GROWTH")},
            )
        )
    return out
