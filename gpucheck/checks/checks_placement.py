"""Checks of the placement layer (and of XLA): one question a person would
ask per check. The verdict logic (blocked / failed / passed) lives in ``gpucheck.session.Check``."""

from __future__ import annotations

from gpucheck.session import Check

# Every question here lies above the framework layer: without a TensorFlow that imports, is a CUDA build
# and registers GPUs, they are skipped as blocked by that root cause (Check.verify), with no `requires`.


def test_gpu_accepts_pinned_ops(gpucheck_check: Check) -> None:
    """Does an op pinned to each GPU (tf.device('/GPU:N'), soft placement off) run, eagerly and in a tf.function?"""
    gpucheck_check.verify("placement", ("placement-failed",))


def test_ops_run_where_asked(gpucheck_check: Check) -> None:
    """With soft placement on, do ops asked for a GPU run there rather than silently on the CPU?"""
    gpucheck_check.verify("placement", ("soft-placement-fallback",), requires=("placement-failed",))


def test_gpu_results_match_cpu_reference(gpucheck_check: Check) -> None:
    """Do matmul (fp32/tf32/fp16/bf16), a cuDNN convolution and a reduction on each GPU agree with float64 on the CPU?"""
    gpucheck_check.verify("placement", ("numerical-mismatch",), requires=("placement-failed",))
