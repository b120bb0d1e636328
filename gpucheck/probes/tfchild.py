"""The one TensorFlow process on the critical path: the framework facts, then the placement steps.

TensorFlow is imported once per run here (importing it is most of the time to verdict). The framework
facts are handed back first, so that whatever happens later they stand; then each placement step hands
back the facts so far with the time the next step may take (:class:`gpucheck.protocol.Checkpoint`):
the child writes them at once and leaves when a step overruns, naming it. What needs a process of its
own (memory growth, which a logical device configuration silently turns off; TF_GPU_ALLOCATOR
experiments) runs in ``gpucheck.probes.memory``, started by the parent at the same time as this one.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

from gpucheck.facts import PlacementFacts, TfPlacementFacts, to_json
from gpucheck.probes.framework import probe_framework
from gpucheck.probes.placement import ENV_KEYS, placement_steps
from gpucheck.protocol import Checkpoint, timeout_from_env


def framework_then_steps() -> Iterator[Checkpoint]:
    framework = probe_framework()
    data: dict[str, Any] = to_json(framework)
    yield Checkpoint(data, None)
    env = {k: os.environ.get(k) for k in ENV_KEYS}
    if not framework.importable:
        return
    last: TfPlacementFacts | None = None
    try:
        for last, budget in placement_steps(timeout_from_env()):
            yield Checkpoint({**data, "placement": to_json(PlacementFacts(last, env))}, budget)
    except Exception as exc:  # noqa: BLE001 - a fault of the probe itself: a fact, not a dead TensorFlow
        base = last or TfPlacementFacts(True, None, framework.version, (), (), 0, None, (), None, (), (), None, ())
        broken = dataclasses.replace(base, errors={**base.errors, "placement step": f"{type(exc).__name__}: {exc}"})
        yield Checkpoint({**data, "placement": to_json(PlacementFacts(broken, env))}, None)
