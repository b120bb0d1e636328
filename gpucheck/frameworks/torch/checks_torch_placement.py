"""PyTorch's checks of the placement layer: one question a person would ask per check. The verdict logic (blocked /
failed / passed) lives in ``gpucheck.blocking``, applied before each check runs; they lie above PyTorch's framework
layer, so a torch that cannot import, is a CPU-only build or sees no GPU blocks them."""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("placement", ("placement-failed", "compute-mode-prohibited"))
def test_torch_runs_work_on_each_gpu(gpucheck_answer: Answer) -> None:
    """Does a tensor made on each GPU (``cuda:N``), and an op on it, run there?"""
    gpucheck_answer.check()


@asks("placement", ("numerical-mismatch",), blocked_by_ids=("placement-failed", "compute-mode-prohibited"))
def test_torch_results_match_cpu_reference(gpucheck_answer: Answer) -> None:
    """Do matmul (fp32/tf32/fp16/bf16), a cuDNN convolution, a sum and a training step on each GPU (and split over
    two) agree with float64 on the CPU?"""
    gpucheck_answer.check()
