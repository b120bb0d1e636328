"""TensorFlow's checks of the compatibility and libraries layers: is the driver new enough for its CUDA, is each GPU's
architecture in its build, do the CUDA libraries it needs load? One question a person would ask per check.

The verdict logic (blocked / failed / passed) lives in ``gpucheck.blocking``, applied before each check runs.
"""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("compatibility", ("driver-too-old", "driver-minor-version-compat"))
def test_driver_new_enough(gpucheck_answer: Answer) -> None:
    """Is the driver new enough for the CUDA that the libraries were built with?"""
    gpucheck_answer.check()


@asks("compatibility", ("gpu-arch-unsupported",))
def test_gpu_architecture_supported(gpucheck_answer: Answer) -> None:
    """Does this TensorFlow build have SASS or usable PTX for every GPU's compute capability?"""
    gpucheck_answer.check()


@asks("compatibility", ("ptx-jit-compilation", "ptx-jit-cache-disabled"), blocked_by_ids=("gpu-arch-unsupported",))
def test_no_ptx_jit_at_start(gpucheck_answer: Answer) -> None:
    """Does every GPU run native SASS, or will its kernels be JIT-compiled from PTX (slow first start)?"""
    gpucheck_answer.check()


@asks("libraries", ("cuda-runtime-missing",))
def test_cuda_runtime_libraries_load(gpucheck_answer: Answer) -> None:
    """Do the CUDA runtime, cuBLAS, cuFFT, cuSOLVER and cuSPARSE of the needed major load?"""
    gpucheck_answer.check()


@asks("libraries", ("cudnn-missing",))
def test_cudnn_loads(gpucheck_answer: Answer) -> None:
    """Does cuDNN of the needed major version load?"""
    gpucheck_answer.check()


@asks("libraries", ("cudnn-version-mismatch",), blocked_by_ids=("cudnn-missing",))
def test_cudnn_new_enough(gpucheck_answer: Answer) -> None:
    """Is the loaded cuDNN of the same major and an equal or newer minor than the build needs?"""
    gpucheck_answer.check()


@asks("libraries", ("xla-toolchain-missing",), blocked_by_ids=("cuda-runtime-missing",))
def test_xla_toolchain_found(gpucheck_answer: Answer) -> None:
    """Can XLA find ptxas and libdevice, and does a jit_compile=True function compile on each GPU?
    (One question, two kinds of evidence: the files where XLA looks, and a real jit_compile call.)"""
    gpucheck_answer.check()
