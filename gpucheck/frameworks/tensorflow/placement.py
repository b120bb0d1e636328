"""The placement step of the one TensorFlow process (``gpucheck.frameworks.tensorflow.child``), after its set-up
(``gpucheck.frameworks.tensorflow.setup``): a float32 matmul pinned to each GPU TensorFlow registers and to the index
one past the last, eagerly and in a tf.function, with soft placement off and on; and TensorFlow's soft
placement default. Where the op really ran is the device of its result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gpucheck.frameworks.tensorflow.common import section, tf_message
from gpucheck.frameworks.tensorflow.facts import OpRun, PlacementFacts
from gpucheck.frameworks.tensorflow.setup import TfContext
from gpucheck.protocol import stage


def place_matmul(tf: Any, np: Any, requested: str, mode: str, soft: bool) -> OpRun:
    rng = np.random.default_rng()
    a = tf.constant(rng.standard_normal((64, 64)), dtype=tf.float32)
    try:
        tf.config.set_soft_device_placement(soft)
        if mode == "eager":
            with tf.device(requested):
                out = tf.matmul(a, a)
        else:

            def body(x: Any) -> Any:
                with tf.device(requested):
                    return tf.matmul(x, x)

            out = tf.function(body)(a)
        return OpRun(requested, mode, soft, True, str(out.device), None, None)
    except Exception as exc:  # noqa: BLE001 - TensorFlow's refusal is the fact
        return OpRun(requested, mode, soft, False, None, type(exc).__name__, tf_message(exc))


def _place_all(ctx: TfContext, runs: list[OpRun]) -> None:
    """Every run lands in ``runs`` as it is made: those before a fault stand."""
    for requested in [f"/GPU:{i}" for i in range(len(ctx.gpus) + 1)]:
        for soft in (False, True):
            for mode in ("eager", "function"):
                stage(f"placement: {mode} op on {requested}, soft placement {'on' if soft else 'off'}")
                runs.append(place_matmul(ctx.tf, ctx.np, requested, mode, soft))


def placement_step(ctx: TfContext, timeout: float) -> Iterator[tuple[PlacementFacts, float | None]]:
    """The placement layer's placement step (``Unit.steps``, ``gpucheck.frameworks.tensorflow``)."""
    tf = ctx.tf
    errors: dict[str, str] = {}
    soft_default = section(errors, "soft placement default", lambda: bool(tf.config.get_soft_device_placement()), None)
    runs: list[OpRun] = []
    try:
        section(errors, "placement", lambda: _place_all(ctx, runs), None)
    finally:
        if soft_default is not None:
            with contextlib.suppress(Exception):
                tf.config.set_soft_device_placement(soft_default)
    yield PlacementFacts(soft_default, tuple(runs), errors), ctx.step_budget
