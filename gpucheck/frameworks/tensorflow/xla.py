"""The XLA step of the one TensorFlow process (``gpucheck.frameworks.tensorflow.child``): a ``jit_compile=True``
function on each GPU, with XLA's own lines about its toolchain (ptxas, libdevice, the CUDA directories it
searched).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from typing import Any

from gpucheck.frameworks.tensorflow.common import captured, fresh, rel_error, section, tf32_off, tf_message
from gpucheck.frameworks.tensorflow.facts import XlaFacts, XlaRun
from gpucheck.frameworks.tensorflow.setup import TfContext
from gpucheck.protocol import quiet

XLA_TOLERANCE = 1e-4

_XLA_LINE = re.compile(r"libdevice|ptxas|nvvm|Searched for CUDA|xla_gpu_cuda_data_dir|nvlink", re.IGNORECASE)
_SEARCHED_HEADER = "Searched for CUDA in the following directories"
_SEARCHED_ENTRY = re.compile(r"^(?:\S.*\]\s{2,}|\s{2,})(?P<dir>[./$~\w].*?)\s*$")


def xla_toolchain_lines(lines: list[str]) -> tuple[list[str], list[str]]:
    """XLA's lines about ptxas / libdevice, and the CUDA directories it says it searched."""
    relevant: list[str] = []
    searched: list[str] = []
    in_list = False
    for line in lines:
        if _SEARCHED_HEADER in line:
            relevant.append(line)
            in_list = True
            continue
        if in_list:
            m = _SEARCHED_ENTRY.match(line)
            if m and not line.lstrip().startswith("You can choose"):
                entry = m.group("dir")
                if entry not in searched:
                    searched.append(entry)
                relevant.append(line)
                continue
            in_list = False
        if _XLA_LINE.search(line):
            relevant.append(line)
    return relevant[-40:], searched


def xla_run(tf: Any, np: Any, device: str) -> XlaRun:
    rng = np.random.default_rng()
    a = fresh(np, rng, (128, 64))
    b = fresh(np, rng, (64, 32))
    # exp is lowered to libdevice's __nv_expf on a GPU: without it XLA would never need libdevice and a
    # missing one ('libdevice not found') would go unnoticed; the fused elementwise part needs ptxas.
    ref = np.exp(-np.maximum(a @ b, 0)).sum(axis=1)

    def body(x: Any, y: Any) -> Any:
        return tf.reduce_sum(tf.exp(-tf.nn.relu(tf.matmul(x, y))), axis=1)

    fused = tf.function(body, jit_compile=True)

    error = ran_on = None
    max_error = None
    with captured() as cap, tf32_off(tf):
        try:
            with tf.device(device):
                out = fused(tf.constant(a, tf.float32), tf.constant(b, tf.float32))
            ran_on = str(out.device)
            max_error = rel_error(np, out.numpy(), ref)
        except Exception as exc:  # noqa: BLE001 - the compiler's refusal is the fact
            error = f"{type(exc).__name__}: {tf_message(exc)}"
    lines, searched = xla_toolchain_lines(quiet(cap.lines))
    ok = error is None and max_error is not None and max_error <= XLA_TOLERANCE
    if error is None and not ok:
        error = f"result differs from the float64 reference by {max_error:.3g} (tolerance {XLA_TOLERANCE:g})"
    return XlaRun(device, ok, ran_on, error, tuple(lines), tuple(searched), max_error)


def xla_step(ctx: TfContext, timeout: float) -> Iterator[tuple[XlaFacts, float | None]]:
    """The placement layer's XLA step (``Unit.steps``, ``gpucheck.frameworks.tensorflow``): the facts after each device."""
    errors: dict[str, str] = {}
    runs: list[XlaRun] = []
    yield XlaFacts((), errors), ctx.step_budget
    for dev in ctx.compute_devices():
        run = section(errors, f"XLA on {dev}", partial(xla_run, ctx.tf, ctx.np, dev), None)
        if run is not None:
            runs.append(run)
        yield XlaFacts(tuple(runs), dict(errors)), ctx.step_budget
