"""Checks of the driver: do libcuda and NVML load, are they of the kernel module's version, does cuInit succeed (a forward-compatibility package included)? One question a person would ask per check.

Each check names its layer and the finding ids that answer its question; the verdict logic (blocked / failed /
passed) lives in ``gpucheck.blocking``, applied before each check runs.
"""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("driver", ("libcuda-missing",))
def test_libcuda_loads(gpucheck_answer: Answer) -> None:
    """Does libcuda.so.1 load?"""
    gpucheck_answer.check()


@asks("driver", ("nvml-missing",))
def test_nvml_loads(gpucheck_answer: Answer) -> None:
    """Does libnvidia-ml.so.1 load and initialise?"""
    gpucheck_answer.check()


@asks("driver", ("driver-library-mismatch",))
def test_driver_matches_kernel_module(gpucheck_answer: Answer) -> None:
    """Are the user-space driver and the kernel module of one version?"""
    gpucheck_answer.check()


@asks(
    "driver",
    ("cuda-init-failed", "driver-hung", "driver-call-crashed", "fabric-manager-not-running"),
    blocked_by_ids=("libcuda-missing", "driver-library-mismatch"),
)
def test_cuda_initialises(gpucheck_answer: Answer) -> None:
    """Does cuInit succeed, in time and without crashing? (On an NVSwitch machine it cannot until Fabric Manager has
    set up the fabric: the records unit reads the service's state for that case.)"""
    gpucheck_answer.check()


@asks("driver", ("forward-compat-unsupported",), blocked_by_ids=("libcuda-missing",))
def test_forward_compat_usable(gpucheck_answer: Answer) -> None:
    """If a CUDA forward-compatibility package is loaded, does this GPU accept it (cuInit not 804)?"""
    gpucheck_answer.check()
