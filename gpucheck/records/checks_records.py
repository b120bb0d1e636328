"""The machine's own records: does this boot's kernel log record GPU faults (Xid, SXid)? The kernel log needs only
the kernel module that wrote it. (Fabric Manager's finding answers ``test_cuda_initialises``: cuInit is what fails.)"""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer

KERNEL_LOG = ("gsp-firmware-error", "xid-recovery-required", "xid-application-fault", "xid-recorded", "records-unread")


@asks("health", KERNEL_LOG, instead=("kernel",))
def test_kernel_log_xid(gpucheck_answer: Answer) -> None:
    """Does this boot's kernel log record a GPU fault the driver reported (an Xid: GSP firmware, a recovery action
    the driver asks for), or only a program's own faults and notes? A log that was not read to its end (the probe
    crashed, was killed, timed out) fails it: not known is never healthy."""
    gpucheck_answer.check()
