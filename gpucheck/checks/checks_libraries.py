"""Checks of the compatibility and libraries layers (issue 4): one question a person would ask per check.

The verdict logic (blocked / failed / passed) lives in ``gpucheck.session.Check``.
"""

from __future__ import annotations

from gpucheck.session import Check


def test_gpu_architecture_supported(gpucheck_check: Check) -> None:
    """Does this TensorFlow build have SASS or usable PTX for every GPU's compute capability?"""
    gpucheck_check.verify("compatibility", ("gpu-arch-unsupported",))


def test_no_ptx_jit_at_start(gpucheck_check: Check) -> None:
    """Does every GPU run native SASS, or will its kernels be JIT-compiled from PTX (slow first start)?"""
    gpucheck_check.verify(
        "compatibility", ("ptx-jit-compilation", "ptx-jit-cache-disabled"), requires=("gpu-arch-unsupported",)
    )


def test_cuda_runtime_libraries_load(gpucheck_check: Check) -> None:
    """Do the CUDA runtime, cuBLAS, cuFFT, cuSOLVER and cuSPARSE of the needed major load?"""
    gpucheck_check.verify("libraries", ("cuda-runtime-missing",))


def test_cudnn_loads(gpucheck_check: Check) -> None:
    """Does cuDNN of the needed major version load?"""
    gpucheck_check.verify("libraries", ("cudnn-missing",))


def test_cudnn_new_enough(gpucheck_check: Check) -> None:
    """Is the loaded cuDNN of the same major and an equal or newer minor than the build needs?"""
    gpucheck_check.verify("libraries", ("cudnn-version-mismatch",), requires=("cudnn-missing",))


def test_xla_toolchain_found(gpucheck_check: Check) -> None:
    """Can XLA find ptxas and libdevice, and does a jit_compile=True function compile on each GPU?
    (One question, two kinds of evidence: the files where XLA looks, and a real jit_compile call.)"""
    gpucheck_check.verify("libraries", ("xla-toolchain-missing",), requires=("cuda-runtime-missing",))


def test_forward_compat_usable(gpucheck_check: Check) -> None:
    """If a CUDA forward-compatibility package is loaded, does this GPU accept it (cuInit not 804)?"""
    gpucheck_check.verify("driver", ("forward-compat-unsupported",), requires=("libcuda-missing",))


def test_gpu_numbering_matches_nvidia_smi(gpucheck_check: Check) -> None:
    """Is nvidia-smi's GPU N also CUDA's device N and TensorFlow's GPU:N? (informational: the map is in the report)"""
    gpucheck_check.verify("visibility", ("device-order-differs",))
