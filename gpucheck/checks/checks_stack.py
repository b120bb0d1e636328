"""Checks of the lower stack: one question a person would ask per check.

Each check names its layer and the finding ids that answer its question; the
verdict logic (blocked / failed / passed) lives in ``gpucheck.blocking``, applied before each check runs.
"""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("hardware", ("diagnosis-incomplete", "host-read-hung"))
def test_diagnosis_completed(gpucheck_answer: Answer) -> None:
    """Did every probe report (no interrupt, no probe that could not start, no read of the host's files that
    never returned)?"""
    gpucheck_answer.check()


@asks("hardware", ("no-nvidia-gpu",))
def test_nvidia_gpu_on_pci_bus(gpucheck_answer: Answer) -> None:
    """Is there an NVIDIA GPU on this machine?"""
    gpucheck_answer.check()


@asks("kernel", ("driver-not-loaded",))
def test_kernel_module_loaded(gpucheck_answer: Answer) -> None:
    """Is the nvidia kernel module loaded?"""
    gpucheck_answer.check()


@asks("kernel", ("device-nodes-inaccessible",), blocked_by_ids=("driver-not-loaded",))
def test_device_nodes_usable(gpucheck_answer: Answer) -> None:
    """Can this process open /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia<N>?"""
    gpucheck_answer.check()


@asks("kernel", ("gpu-init-failed",), blocked_by_ids=("driver-not-loaded",))
def test_driver_holds_every_gpu(gpucheck_answer: Answer) -> None:
    """Does the loaded nvidia module hold every NVIDIA GPU on the PCI bus (none whose probe or initialisation failed:
    fallen off the bus as it was probed, RmInitAdapter failed, no BAR space)? The kernel log says why where it can."""
    gpucheck_answer.check()


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


@asks("visibility", ("devices-hidden-by-env", "gpu-lost"))
def test_visible_devices_env(gpucheck_answer: Answer) -> None:
    """Do CUDA_VISIBLE_DEVICES and friends let this process see the GPUs?"""
    gpucheck_answer.check()


@asks("visibility", ("device-order-differs",))
def test_gpu_numbering_matches_nvidia_smi(gpucheck_answer: Answer) -> None:
    """Is nvidia-smi's GPU N also CUDA's device N and TensorFlow's GPU:N? (informational: the map is in the report)"""
    gpucheck_answer.check()
