"""Checks of visibility: do CUDA_VISIBLE_DEVICES and friends let this process see the GPUs, and are they numbered as nvidia-smi numbers them? One question a person would ask per check.

Each check names its layer and the finding ids that answer its question; the verdict logic (blocked / failed /
passed) lives in ``gpucheck.blocking``, applied before each check runs.
"""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("visibility", ("devices-hidden-by-env", "gpu-lost"))
def test_visible_devices_env(gpucheck_answer: Answer) -> None:
    """Do CUDA_VISIBLE_DEVICES and friends let this process see the GPUs?"""
    gpucheck_answer.check()


@asks("visibility", ("device-order-differs",))
def test_gpu_numbering_matches_nvidia_smi(gpucheck_answer: Answer) -> None:
    """Is nvidia-smi's GPU N also CUDA's device N and TensorFlow's GPU:N? (informational: the map is in the report)"""
    gpucheck_answer.check()
