"""Checks of the lower stack: one question a person would ask per check.

Each check names its layer and the finding ids that answer its question; the
verdict logic (blocked / failed / passed) lives in ``gpucheck.session.Check``.
"""

from __future__ import annotations

from gpucheck.session import Check


def test_diagnosis_completed(gpucheck_check: Check) -> None:
    """Did every probe report (no interrupt, no probe that could not start)?"""
    gpucheck_check.verify("hardware", ("diagnosis-incomplete",))


def test_nvidia_gpu_on_pci_bus(gpucheck_check: Check) -> None:
    """Is there an NVIDIA GPU on this machine?"""
    gpucheck_check.verify("hardware", ("no-nvidia-gpu",))


def test_kernel_module_loaded(gpucheck_check: Check) -> None:
    """Is the nvidia kernel module loaded?"""
    gpucheck_check.verify("kernel", ("driver-not-loaded",))


def test_device_nodes_usable(gpucheck_check: Check) -> None:
    """Can this process open /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia<N>?"""
    gpucheck_check.verify("kernel", ("device-nodes-inaccessible",), requires=("driver-not-loaded",))


def test_libcuda_loads(gpucheck_check: Check) -> None:
    """Does libcuda.so.1 load?"""
    gpucheck_check.verify("driver", ("libcuda-missing",))


def test_nvml_loads(gpucheck_check: Check) -> None:
    """Does libnvidia-ml.so.1 load and initialise?"""
    gpucheck_check.verify("driver", ("nvml-missing",))


def test_driver_matches_kernel_module(gpucheck_check: Check) -> None:
    """Are the user-space driver and the kernel module of one version?"""
    gpucheck_check.verify("driver", ("driver-library-mismatch",))


def test_cuda_initialises(gpucheck_check: Check) -> None:
    """Does cuInit succeed, in time and without crashing?"""
    gpucheck_check.verify(
        "driver",
        ("cuda-init-failed", "driver-hung", "driver-call-crashed"),
        requires=("libcuda-missing", "driver-library-mismatch"),
    )


def test_visible_devices_env(gpucheck_check: Check) -> None:
    """Do CUDA_VISIBLE_DEVICES and friends let this process see the GPUs?"""
    gpucheck_check.verify("visibility", ("devices-hidden-by-env", "gpu-lost"))


def test_driver_new_enough(gpucheck_check: Check) -> None:
    """Is the driver new enough for the CUDA that the libraries were built with?"""
    gpucheck_check.verify("compatibility", ("driver-too-old", "driver-minor-version-compat"))


def test_tensorflow_importable(gpucheck_check: Check) -> None:
    """Can TensorFlow be imported?"""
    gpucheck_check.verify("framework", ("framework-missing",))


def test_tensorflow_is_cuda_build(gpucheck_check: Check) -> None:
    """Is the installed TensorFlow a CUDA build?"""
    gpucheck_check.verify("framework", ("framework-cpu-only",), requires=("framework-missing",))


def test_tensorflow_registers_gpus(gpucheck_check: Check) -> None:
    """Does TensorFlow register the GPUs (without crashing or hanging)?"""
    gpucheck_check.verify(
        "framework",
        ("framework-gpu-init-failed", "framework-crashed", "framework-hung"),
        requires=("framework-missing", "framework-cpu-only"),
    )
