"""What TensorFlow does in the test process itself, for the suite's fixtures (``gpucheck.suite``): bound the memory
of each GPU it lists (--gpucheck-worker-memory), before it sets them up. Imports TensorFlow, so only when asked."""

from __future__ import annotations


def bound_memory(megabytes: int) -> list[str]:
    """Each GPU TensorFlow lists gets a logical device of ``megabytes`` (``memory_limit``), as TensorFlow's own tests
    bound theirs: set before TensorFlow sets up its GPUs; where it comes too late, a sentence that says so.
    (TF_PER_DEVICE_MEMORY_LIMIT_MB, which TensorFlow's CI script exports, bounds each allocation TensorFlow 2.21
    asks of the driver, not their total: docs/PITFALLS.md.)"""
    import tensorflow as tf

    late = []
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=megabytes)])
        except RuntimeError as exc:
            late.append(f"not applied to {gpu.name}: TensorFlow had already set up its GPUs in this process ({exc})")
    return late
