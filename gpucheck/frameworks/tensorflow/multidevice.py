"""The multi-device step of the one TensorFlow process (``gpucheck.frameworks.tensorflow.child``): a data-parallel
gradient step split across the GPUs, or across the logical CPUs the set-up made where there are fewer
than two GPUs, reduced on the first device and compared with a float64 reference.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpucheck.frameworks.tensorflow.common import error_text, fresh, rel_error, section, tf32_off
from gpucheck.frameworks.tensorflow.facts import MultiDeviceFacts, MultiDeviceRun
from gpucheck.frameworks.tensorflow.setup import TfContext

MULTI_DEVICE_TOLERANCE = 1e-5


def multi_device_run(tf: Any, np: Any, devices: list[str], kind: str) -> MultiDeviceRun:
    """Data-parallel: each device computes the gradient of its shard, the first sums them."""
    rng = np.random.default_rng()
    per = 16
    n = per * len(devices)
    xs = fresh(np, rng, (n, 8))
    ys = fresh(np, rng, (n, 1))
    w = fresh(np, rng, (8, 1))
    ref = 2.0 / n * xs.T @ (xs @ w - ys)
    try:
        with tf32_off(tf):
            wt = tf.constant(w, tf.float32)
            grads = []
            ran_on: list[str] = []
            for i, dev in enumerate(devices):
                with tf.device(dev):
                    xb = tf.constant(xs[i * per : (i + 1) * per], tf.float32)
                    yb = tf.constant(ys[i * per : (i + 1) * per], tf.float32)
                    with tf.GradientTape() as tape:
                        tape.watch(wt)
                        loss = tf.reduce_sum(tf.square(tf.matmul(xb, wt) - yb))
                    g = tape.gradient(loss, wt)
                grads.append(g)
                ran_on.append(str(g.device))
            with tf.device(devices[0]):
                total = tf.add_n(grads) / n
            err = rel_error(np, total.numpy(), ref)
        ok = err <= MULTI_DEVICE_TOLERANCE
        return MultiDeviceRun(tuple(devices), kind, ok, tuple(ran_on), err, MULTI_DEVICE_TOLERANCE, None)
    except Exception as exc:  # noqa: BLE001
        return MultiDeviceRun(tuple(devices), kind, False, (), None, MULTI_DEVICE_TOLERANCE, error_text(exc))


def multi_device_step(ctx: TfContext, timeout: float) -> Iterator[tuple[MultiDeviceFacts, float | None]]:
    """The placement layer's multi-device step (``Unit.steps``, ``gpucheck.frameworks.tensorflow``): every GPU where there are
    two or more, else the logical CPUs (none where the CPU could not be split)."""
    errors: dict[str, str] = {}
    if len(ctx.gpus) >= 2:
        devices, kind = [f"/GPU:{i}" for i in range(len(ctx.gpus))], "gpus"
    else:
        devices, kind = [f"/CPU:{i}" for i in range(max(ctx.cpu_split, 1))], "logical-cpus"
    run = None
    if len(devices) >= 2:
        run = section(errors, "multi-device step", lambda: multi_device_run(ctx.tf, ctx.np, devices, kind), None)
    yield MultiDeviceFacts(run, errors), ctx.step_budget
