"""TensorFlow's checks of the framework layer: one question a person would ask per check.

The verdict logic (blocked / failed / passed) lives in ``gpucheck.blocking``, applied before each check runs; the
questions are TensorFlow's (its unit's findings answer them, another framework's neither answer nor block them).
"""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("framework", ("framework-missing",))
def test_tensorflow_importable(gpucheck_answer: Answer) -> None:
    """Can TensorFlow be imported?"""
    gpucheck_answer.check()


@asks("framework", ("framework-cpu-only",), blocked_by_ids=("framework-missing",))
def test_tensorflow_is_cuda_build(gpucheck_answer: Answer) -> None:
    """Is the installed TensorFlow a CUDA build?"""
    gpucheck_answer.check()


@asks("framework", ("framework-gpu-init-failed", "framework-crashed", "framework-hung"), blocked_by_ids=("framework-missing", "framework-cpu-only"))
def test_tensorflow_registers_gpus(gpucheck_answer: Answer) -> None:
    """Does TensorFlow register the GPUs (without crashing or hanging)?"""
    gpucheck_answer.check()
