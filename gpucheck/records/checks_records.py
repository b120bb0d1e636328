"""The machine's own records: does this boot's kernel log record GPU faults (Xid, SXid), and on an NVSwitch
machine, has Fabric Manager set up the fabric? The kernel log needs only the kernel module that wrote it."""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer

FABRIC = ("fabric-manager-not-running",)
KERNEL_LOG = ("gsp-firmware-error", "xid-recovery-required", "xid-application-fault", "xid-recorded")


@asks("driver", FABRIC)
def test_fabric_manager(gpucheck_answer: Answer) -> None:
    """On an NVSwitch machine (HGX/DGX), has Fabric Manager set up the NVLink fabric so that CUDA initialises?"""
    gpucheck_answer.check()


@asks("health", KERNEL_LOG, instead=("kernel",))
def test_kernel_log_xid(gpucheck_answer: Answer) -> None:
    """Does this boot's kernel log record a GPU fault the driver reported (an Xid: GSP firmware, a recovery action
    the driver asks for), or only a program's own faults and notes?"""
    gpucheck_answer.check()
