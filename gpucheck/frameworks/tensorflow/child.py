"""The one TensorFlow process on the critical path: the framework facts, the shared set-up
(``gpucheck.frameworks.tensorflow.setup``), then the steps of every layer that needs TensorFlow, in the order
the registry gives (``GPUCHECK_STEPS``): placement, training step, numerics, XLA, multi-device (the placement
layer's), GPU memory (the resources layer's). The staging is ``gpucheck.probes.steps``'.

TensorFlow is imported once per run here (importing it is most of the time to verdict). What needs a process of
its own (memory growth, which a logical device configuration silently turns off) runs in
``gpucheck.frameworks.tensorflow.memory``, started by the parent at the same time as this one.

A step is a function ``(context, timeout) -> Iterator[(facts, budget)]``, the context the set-up's
(:class:`gpucheck.frameworks.tensorflow.setup.TfContext`). Where the set-up leaves no context (TensorFlow could
not create its devices), no step runs.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpucheck.frameworks.tensorflow.framework import probe_framework
from gpucheck.frameworks.tensorflow.setup import SETUP_KEY, set_up
from gpucheck.probes.steps import first_then_steps
from gpucheck.protocol import Checkpoint


def framework_then_steps() -> Iterator[Checkpoint]:
    framework = probe_framework()
    yield from first_then_steps(framework, framework.importable, SETUP_KEY, set_up)
