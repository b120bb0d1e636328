"""The numerics step of the one TensorFlow process (``gpucheck.frameworks.tensorflow.child``): matmuls in each
precision the GPU has, a convolution (cuDNN) and a large sum on each GPU, on fresh random inputs, against
a float64 CPU reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from gpucheck.facts import NUMERIC_TOLERANCE, NumericCheck
from gpucheck.frameworks.tensorflow.common import error_text, fresh, rel_error, section, tf32_off
from gpucheck.frameworks.tensorflow.facts import NumericsFacts
from gpucheck.frameworks.tensorflow.setup import TfContext

#: Tolerances (``gpucheck.facts.NUMERIC_TOLERANCE``), and the 2^20-element sum's: about 5e-10 on this host's CPU.
TOLERANCE = {**NUMERIC_TOLERANCE, ("reduce_sum", "float32"): 1e-4}


class _Checks:
    """The checks of one device, each appended as it is made."""

    def __init__(self, tf: Any, device: str) -> None:
        self.tf = tf
        self.device = device
        self.out: list[NumericCheck] = []

    def run(self, op: str, precision: str, shape: str, fn: Callable[[], tuple[Any, float]]) -> None:
        tol = TOLERANCE[(op, "float32" if precision == "tensorfloat32" and op != "matmul" else precision)]
        try:
            with self.tf.device(self.device):
                result, err = fn()
            self.out.append(NumericCheck(self.device, op, precision, err <= tol, str(result.device), err, tol, None, shape))
        except Exception as exc:  # noqa: BLE001 - an op that cannot run is a fact too
            self.out.append(NumericCheck(self.device, op, precision, False, None, None, tol, error_text(exc), shape))


def numerics(tf: Any, np: Any, device: str, cc: tuple[int, int] | None) -> list[NumericCheck]:
    rng = np.random.default_rng()
    is_gpu = "GPU" in device.upper()
    checks = _Checks(tf, device)

    a = fresh(np, rng, (256, 256))
    b = fresh(np, rng, (256, 256))
    ref = a @ b

    def matmul(dtype: Any) -> Callable[[], tuple[Any, float]]:
        def go() -> tuple[Any, float]:
            r = tf.matmul(tf.constant(a, dtype=dtype), tf.constant(b, dtype=dtype))
            return r, rel_error(np, tf.cast(r, tf.float64).numpy(), ref)

        return go

    with tf32_off(tf):
        checks.run("matmul", "float32", "256x256 @ 256x256", matmul(tf.float32))
        if is_gpu and cc is not None and cc >= (8, 0):
            tf.config.experimental.enable_tensor_float_32_execution(True)
            checks.run("matmul", "tensorfloat32", "256x256 @ 256x256", matmul(tf.float32))
            tf.config.experimental.enable_tensor_float_32_execution(False)
        if not is_gpu or (cc is not None and cc >= (5, 3)):
            checks.run("matmul", "float16", "256x256 @ 256x256", matmul(tf.float16))
        if not is_gpu or (cc is not None and cc >= (8, 0)):
            checks.run("matmul", "bfloat16", "256x256 @ 256x256", matmul(tf.bfloat16))

        x = fresh(np, rng, (4, 16, 16, 8))
        f = fresh(np, rng, (3, 3, 8, 16))
        windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))
        conv_ref = np.einsum("nhwcij,ijco->nhwo", windows, f)

        def conv() -> tuple[Any, float]:
            r = tf.nn.conv2d(tf.constant(x, tf.float32), tf.constant(f, tf.float32), strides=1, padding="VALID")
            return r, rel_error(np, r.numpy(), conv_ref)

        checks.run("conv2d", "float32", "NHWC 4x16x16x8 * 3x3x8x16", conv)

        v = fresh(np, rng, (1 << 20,))

        def reduce() -> tuple[Any, float]:
            r = tf.reduce_sum(tf.constant(v, tf.float32))
            return r, rel_error(np, r.numpy(), v.sum(), float(np.abs(v).sum()))

        checks.run("reduce_sum", "float32", "2^20", reduce)
    return checks.out


def numerics_step(ctx: TfContext, timeout: float) -> Iterator[tuple[NumericsFacts, float | None]]:
    """The placement layer's numerics step (``Unit.steps``, ``gpucheck.frameworks.tensorflow``): the facts after each device."""
    errors: dict[str, str] = {}
    found: list[NumericCheck] = []
    yield NumericsFacts((), errors), ctx.step_budget
    for i, dev in enumerate(ctx.compute_devices()):
        cc = ctx.gpus[i].capability if ctx.gpus else None
        found.extend(section(errors, f"numerics on {dev}", partial(numerics, ctx.tf, ctx.np, dev, cc), []))
        yield NumericsFacts(tuple(found), dict(errors)), ctx.step_budget
