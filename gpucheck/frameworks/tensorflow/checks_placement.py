"""Checks of the placement layer (and of XLA): one question a person would
ask per check. The verdict logic (blocked / failed / passed) lives in ``gpucheck.blocking``, applied before each check runs."""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer

# Every question here lies above the framework layer: without a TensorFlow that imports, is a CUDA build
# and registers GPUs, they are skipped as blocked by that root cause, with no `blocked_by_ids`.


@asks("placement", ("placement-failed",))
def test_gpu_accepts_pinned_ops(gpucheck_answer: Answer) -> None:
    """Does an op pinned to each GPU (tf.device('/GPU:N'), soft placement off) run, eagerly and in a tf.function?"""
    gpucheck_answer.check()


@asks("placement", ("soft-placement-fallback",), blocked_by_ids=("placement-failed",))
def test_ops_run_where_asked(gpucheck_answer: Answer) -> None:
    """With soft placement on, do ops asked for a GPU run there rather than silently on the CPU?"""
    gpucheck_answer.check()


@asks("placement", ("numerical-mismatch",), blocked_by_ids=("placement-failed",))
def test_gpu_results_match_cpu_reference(gpucheck_answer: Answer) -> None:
    """Do matmul (fp32/tf32/fp16/bf16), a cuDNN convolution and a reduction on each GPU agree with float64 on the CPU?"""
    gpucheck_answer.check()
