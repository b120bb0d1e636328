"""The one TensorFlow process on the critical path: the framework facts, the shared set-up
(``gpucheck.probes.tfsetup``), then the steps of every layer that needs TensorFlow, in the order the
registry gives (``GPUCHECK_TF_STEPS``): placement, training step, numerics, XLA, multi-device (the
placement layer's), GPU memory (the resources layer's).

TensorFlow is imported once per run here (importing it is most of the time to verdict). The framework
facts are handed back first, so that whatever happens later they stand; then the set-up and each step
hand back their facts so far with the time their next part may take (:class:`gpucheck.protocol.Checkpoint`):
the child writes them at once, each under its own key, and leaves when a part overruns, naming it; a step
that dies leaves the facts of the steps before it. What needs a process of its own (memory growth, which a
logical device configuration silently turns off) runs in ``gpucheck.probes.memory``, started by the parent
at the same time as this one.

A step is a function ``(context, timeout) -> Iterator[(facts, budget)]``, the context the set-up's
(:class:`gpucheck.probes.tfsetup.TfContext`); an exception it lets out is recorded under ``step_errors``
and the next step runs. Where the set-up leaves no context (TensorFlow could not create its devices), no
step runs.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any, TypeVar

from gpucheck.facts import to_json
from gpucheck.probes.framework import probe_framework
from gpucheck.probes.tfsetup import SETUP_KEY, TfContext, set_up
from gpucheck.protocol import Checkpoint, load_target, tf_steps_from_env, timeout_from_env

R = TypeVar("R")


class _Facts:
    """The child's JSON so far: the framework facts, each step's under its key, ``step_errors``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def land(self, key: str, steps: Generator[tuple[Any, float | None], None, R]) -> Generator[Checkpoint, None, R]:
        """Each of a step's facts under ``key``, written at once with the budget of its next part; the
        step's return value."""
        while True:
            try:
                facts, budget = next(steps)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            self.data = {**self.data, key: to_json(facts)}
            yield Checkpoint(self.data, budget)

    def fault(self, key: str, exc: Exception) -> Checkpoint:
        errors = {**self.data.get("step_errors", {}), key: f"{type(exc).__name__}: {exc}"}
        self.data = {**self.data, "step_errors": errors}
        return Checkpoint(self.data, None)


def framework_then_steps() -> Iterator[Checkpoint]:
    framework = probe_framework()
    facts = _Facts(to_json(framework))
    yield Checkpoint(facts.data, None)
    if not framework.importable:
        return
    timeout = timeout_from_env()
    ctx: TfContext | None = None
    try:
        ctx = yield from facts.land(SETUP_KEY, set_up(timeout))
    except Exception as exc:  # noqa: BLE001 - a fault of the set-up itself: a fact, and no step can run
        yield facts.fault(SETUP_KEY, exc)
    if ctx is None:
        return
    for key, target in tf_steps_from_env():
        if key == SETUP_KEY:
            continue  # run above, once, before every step
        try:
            step = load_target(target)
            if step is None:
                raise LookupError(f"not a probe step: {target!r}")
            yield from facts.land(key, step(ctx, timeout))
        except Exception as exc:  # noqa: BLE001 - a fault of the step itself: a fact, and the next step runs
            yield facts.fault(key, exc)
