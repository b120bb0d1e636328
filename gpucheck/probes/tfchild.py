"""The one TensorFlow process on the critical path: the framework facts, then the steps of every layer that
needs TensorFlow, in the order the registry gives (``GPUCHECK_TF_STEPS``: placement today).

TensorFlow is imported once per run here (importing it is most of the time to verdict). The framework
facts are handed back first, so that whatever happens later they stand; then each step hands back its
facts so far with the time its next part may take (:class:`gpucheck.protocol.Checkpoint`): the child
writes them at once under the step's key and leaves when a part overruns, naming it. What needs a
process of its own (memory growth, which a logical device configuration silently turns off) runs in
``gpucheck.probes.memory``, started by the parent at the same time as this one.

A step is a function ``(timeout) -> Iterator[(facts, budget)]``; an exception it lets out is recorded
under ``step_errors`` and the next step runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpucheck.facts import to_json
from gpucheck.probes.framework import probe_framework
from gpucheck.protocol import Checkpoint, load_target, stage, tf_steps_from_env, timeout_from_env


def framework_then_steps() -> Iterator[Checkpoint]:
    framework = probe_framework()
    data: dict[str, Any] = to_json(framework)
    yield Checkpoint(data, None)
    if not framework.importable:
        return
    timeout = timeout_from_env()
    for key, target in tf_steps_from_env():
        stage(f"{key}: start")
        try:
            step = load_target(target)
            if step is None:
                raise LookupError(f"not a probe step: {target!r}")
            for facts, budget in step(timeout):
                data = {**data, key: to_json(facts)}
                yield Checkpoint(data, budget)
        except Exception as exc:  # noqa: BLE001 - a fault of the step itself: a fact, and the next step runs
            data = {**data, "step_errors": {**data.get("step_errors", {}), key: f"{type(exc).__name__}: {exc}"}}
            yield Checkpoint(data, None)
