"""PyTorch's checks of the resources layer: does the installed build accept the allocator configuration the
environment sets (read without starting CUDA), does set_per_process_memory_fraction bound it on each GPU (its child's
step), and is /dev/shm large enough for NCCL between this machine's GPUs?
(NVML's memory headroom, which needs no framework, is asked in checks_nvml.)"""

from __future__ import annotations

from gpucheck.blocking import asks
from gpucheck.session import Answer


@asks("resources", ("memory-config-failed",), needs=("framework",))
def test_torch_accepts_its_allocator_configuration(gpucheck_answer: Answer) -> None:
    """Does this torch know every option of PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_ALLOC_CONF), in a form it reads, and
    does torch.cuda.set_per_process_memory_fraction bound it on each GPU?"""
    gpucheck_answer.check()


@asks("resources", ("nccl-shm-failed",))
def test_dev_shm_holds_nccls_segments(gpucheck_answer: Answer) -> None:
    """Has /dev/shm room for NCCL's shared-memory segments between this machine's GPUs?"""
    gpucheck_answer.check()
