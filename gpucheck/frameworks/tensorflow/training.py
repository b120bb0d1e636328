"""The training-step step of the one TensorFlow process (``gpucheck.frameworks.tensorflow.child``): a small
softmax-regression step in a tf.function under ``tf.device('/GPU:0')``; the placement log (on since the
set-up, before the devices existed) says where each of its ops ran, and TensorFlow's kernel registry why
an op that asked for a GPU ran on the CPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpucheck.frameworks.tensorflow.common import captured, error_text, section, tf_message
from gpucheck.frameworks.tensorflow.facts import FallbackOp, TrainingStepFacts, TrainingStepPlacement
from gpucheck.frameworks.tensorflow.setup import TfContext

#: Ops of a graph that are plumbing, not computation: they say nothing about acceleration.
STRUCTURAL_OPS = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "NoOp", "Const"})

_PLACED = re.compile(r"(?:\] |^)(?P<name>[^\s:]+): \((?P<type>[\w]+)\): (?P<device>/job:\S+)\s*$")
_COLOCATION = re.compile(r"Ignoring device specification (?P<spec>\S+) for node '(?P<name>[^']+)' because (?P<why>.*)$")


def kernel_reason(op_type: str, dtype: str | None, have_gpu: bool) -> str:
    if not have_gpu:
        return "no GPU device"
    try:
        from tensorflow.python.framework import kernels

        kl = kernels.get_registered_kernels_for_op(op_type)
    except Exception:  # noqa: BLE001
        return "unknown (the kernel registry could not be read)"
    gpu_kernels = [k for k in kl.kernel if k.device_type == "GPU"]
    if not gpu_kernels:
        return "no GPU kernel"
    if dtype is None:
        return "GPU kernel exists (placed by colocation)"
    import tensorflow as tf

    for k in gpu_kernels:
        t_constraints = [c for c in k.constraint if c.name == "T"]
        if not t_constraints:
            return "GPU kernel exists (placed by colocation)"
        allowed = {tf.dtypes.as_dtype(t).name for t in t_constraints[0].allowed_values.list.type}
        if dtype in allowed:
            return "GPU kernel exists (placed by colocation)"
    return f"no GPU kernel for {dtype}"


def run_training_step(tf: Any, np: Any, requested: str, have_gpu: bool) -> TrainingStepPlacement:
    """A small softmax-regression step in a tf.function under ``requested``; the placement log says where
    each of its ops ran."""
    rng = np.random.default_rng()
    with tf.device(requested):
        w = tf.Variable(rng.standard_normal((16, 4)).astype("float32"))
    x = tf.constant(rng.standard_normal((32, 16)), dtype=tf.float32)
    y = tf.one_hot(tf.constant(rng.integers(0, 4, 32)), 4)

    def step_body(xb: Any, yb: Any) -> Any:
        with tf.device(requested):
            with tf.GradientTape() as tape:
                logits = tf.matmul(xb, w)
                loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=yb, logits=logits))
            grad = tape.gradient(loss, w)
            w.assign_sub(0.1 * grad)
            return loss

    step = tf.function(step_body)

    error = None
    with captured() as cap:
        try:
            step(x, y)
        except Exception as exc:  # noqa: BLE001
            error = tf_message(exc)
    placed: dict[str, tuple[str, str]] = {}
    colocated: dict[str, str] = {}
    for line in cap.lines:
        m = _PLACED.search(line)
        if m:
            placed[m.group("name")] = (m.group("type"), m.group("device"))
        c = _COLOCATION.search(line)
        if c:
            colocated[c.group("name")] = "TensorFlow: " + c.group("why").strip()
    graph_ops: dict[str, tuple[str, str, str | None]] = {}
    try:
        for op in step.get_concrete_function(x, y).graph.get_operations():
            dtype = None
            try:
                dtype = tf.dtypes.as_dtype(op.get_attr("T")).name
            except Exception:  # noqa: BLE001 - ops without a T attribute
                dtype = op.outputs[0].dtype.name if op.outputs else None
            graph_ops[op.name] = (op.type, op.device, dtype)
    except Exception as exc:  # noqa: BLE001
        error = error or error_text(exc)
    fallbacks: list[FallbackOp] = []
    on_gpu = 0
    for name, (op_type, device) in placed.items():
        if "GPU" in device.upper().rsplit("/", 1)[-1]:
            on_gpu += 1
            continue
        _type, g_requested, dtype = graph_ops.get(name, (op_type, "", None))
        if op_type in STRUCTURAL_OPS or "GPU" not in g_requested.upper():
            continue
        reason = kernel_reason(op_type, dtype, have_gpu)
        if name in colocated and have_gpu:
            reason = colocated[name]
        fallbacks.append(FallbackOp(name, op_type, dtype, g_requested, device, reason))
    return TrainingStepPlacement(requested, error is None, error, len(placed), on_gpu, tuple(fallbacks))


def training_step(ctx: TfContext, timeout: float) -> Iterator[tuple[TrainingStepFacts, float | None]]:
    """The placement layer's training-step step (``Unit.steps``, ``gpucheck.frameworks.tensorflow``)."""
    errors: dict[str, str] = {}
    run = section(errors, "training step", lambda: run_training_step(ctx.tf, ctx.np, "/GPU:0", bool(ctx.gpus)), None)
    yield TrainingStepFacts(run, errors), ctx.step_budget
