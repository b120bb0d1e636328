"""Checks of the host: is there an NVIDIA GPU on the PCI bus, is the kernel module loaded and does it hold every GPU, can this process open the device nodes, did the diagnosis finish? One question a person would ask per check.

Each check names its layer and the finding ids that answer its question; the verdict logic (blocked / failed /
passed) lives in ``gpucheck.blocking``, applied before each check runs.
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
