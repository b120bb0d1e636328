"""PyTorch's checks of the compatibility and framework layers: one question a person would ask per check.

The verdict logic (blocked / failed / passed) lives in ``gpucheck.blocking``, applied before each check runs; the
questions are PyTorch's (its unit's findings answer them; another framework's neither answer nor block them).
"""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("compatibility", ("driver-too-old", "gpu-arch-unsupported"))
def test_torch_build_runs_on_this_driver_and_gpus(gpucheck_answer: Answer) -> None:
    """Does this driver run the CUDA torch was built for, and does the build have code for each GPU?"""
    gpucheck_answer.check()


@asks("framework", ("framework-missing", "cuda-library-shadowed", "cudnn-version-mismatch"))
def test_torch_importable(gpucheck_answer: Answer) -> None:
    """Can PyTorch be imported?"""
    gpucheck_answer.check()


@asks(
    "framework",
    ("framework-cpu-only",),
    blocked_by_ids=("framework-missing", "cuda-library-shadowed", "cudnn-version-mismatch"),
)
def test_torch_is_cuda_build(gpucheck_answer: Answer) -> None:
    """Is the installed torch a CUDA build?"""
    gpucheck_answer.check()


@asks(
    "framework",
    (
        "framework-gpu-init-failed", "framework-crashed", "framework-hung", "fabric-manager-not-running",
        "driver-library-mismatch", "forward-compat-unsupported", "mps-connection-failed", "cuda-init-failed",
    ),
    blocked_by_ids=("framework-missing", "cuda-library-shadowed", "cudnn-version-mismatch", "framework-cpu-only"),
)
def test_torch_sees_gpus(gpucheck_answer: Answer) -> None:
    """Does torch see the GPUs (``torch.cuda.device_count()``) without crashing or hanging?"""
    gpucheck_answer.check()
