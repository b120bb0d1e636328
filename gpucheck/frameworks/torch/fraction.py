"""PyTorch's resources step, in its child after the placement layer's (``gpucheck.frameworks.torch.child``): does
``torch.cuda.set_per_process_memory_fraction`` bound this process on each GPU? ``--gpucheck-worker-memory`` and the
``torch_device`` fixture rely on it to keep xdist workers that share a GPU within their share
(``gpucheck.frameworks.torch.process.bound_memory``).

On each GPU the cached blocks of the steps before are released, the fraction is set so that its cap is ``CAP_MIB``,
a tensor of ``UNDER_MIB`` is made (under the cap: it must be), then one of ``OVER_MIB`` (past it: torch must refuse
it with its out-of-memory error, "... this process has ... memory in use ... allowed"), and the fraction is put back
to 1 and the cache emptied. Where torch refuses the tensor under the cap, memory is held elsewhere: not judged. Only on
GPUs: the CPU has no such fraction.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpucheck.frameworks.torch.facts import FRACTION_STAGE, MemoryFraction, TorchFractionFacts
from gpucheck.frameworks.torch.placement import TorchContext, error_text
from gpucheck.protocol import stage

#: The cap set, and the tensors made under and past it (MiB): a few hundred MiB fit beside any other job.
CAP_MIB, UNDER_MIB, OVER_MIB = 256, 64, 512
#: torch's words where the cap refuses a tensor: "... 256.00 MiB allowed; ..." (the native allocator), "Allocation on
#: device 0 would exceed allowed memory" (cudaMallocAsync); torch 2.11 on an H200, docs/gpu-runs/h200-2026-11-28.
ALLOWED = re.compile(r"\ballowed\b")


def _tensor(torch: Any, mib: int, device: str) -> Any:
    return torch.empty((mib << 20) // 4, dtype=torch.float32, device=device)


def bounded(torch: Any, device: str) -> MemoryFraction:
    """The fraction's cap on ``device`` (``cuda:N``) tried with a tensor under it and one past it."""
    stage(f"{FRACTION_STAGE} {device}: the cap")
    index = int(torch.device(device).index or 0)
    total = int(torch.cuda.get_device_properties(index).total_memory)
    fraction = (CAP_MIB << 20) / total
    under = over = None
    said = error = failed_at = None
    torch.cuda.synchronize(index)
    torch.cuda.empty_cache()
    try:
        try:
            torch.cuda.set_per_process_memory_fraction(fraction, index)
        except Exception as exc:  # noqa: BLE001 - a fraction torch will not set cannot bound the process
            error, failed_at = error_text(exc), "set"
        if failed_at is None:
            stage(f"{FRACTION_STAGE} {device}: {UNDER_MIB} MiB under a {CAP_MIB} MiB cap")
            try:
                kept = _tensor(torch, UNDER_MIB, device)
                under = True
            except torch.cuda.OutOfMemoryError as exc:
                under, said = False, error_text(exc)
            if under:
                stage(f"{FRACTION_STAGE} {device}: {OVER_MIB} MiB past a {CAP_MIB} MiB cap")
                try:
                    past = _tensor(torch, OVER_MIB, device)
                    over = False
                    del past
                except torch.cuda.OutOfMemoryError as exc:
                    said = error_text(exc)
                    # The cap's refusal names what is allowed ("256.00 MiB allowed", "would exceed allowed memory");
                    # one for want of free memory does not, and says nothing of the cap.
                    over = True if ALLOWED.search(str(exc)) else None
                del kept
    except Exception as exc:  # noqa: BLE001 - an allocation that fails otherwise: recorded, nothing judged
        error, failed_at = error_text(exc), "allocate"
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, index)
        torch.cuda.empty_cache()
    return MemoryFraction(device, fraction, CAP_MIB, UNDER_MIB, OVER_MIB, under, over, said, error, failed_at)


def fraction_step(ctx: TorchContext, timeout: float) -> Iterator[tuple[TorchFractionFacts, float | None]]:
    """The fraction on each GPU (``Unit.steps``): the facts after each."""
    torch = ctx.torch
    gpus = [dev for dev in ctx.devices if dev.startswith("cuda")]
    backend = None
    errors: dict[str, str] = {}
    if gpus:
        try:
            backend = str(torch.cuda.get_allocator_backend())
        except Exception as exc:  # noqa: BLE001 - older torch: the backend is the native one
            errors["torch.cuda.get_allocator_backend"] = error_text(exc)
    found: list[MemoryFraction] = []
    yield TorchFractionFacts((), backend, dict(errors)), ctx.budget
    for dev in gpus:
        try:
            found.append(bounded(torch, dev))
        except Exception as exc:  # noqa: BLE001 - the device's size could not be read: recorded, the next goes on
            errors[f"{FRACTION_STAGE} {dev}"] = error_text(exc)
        yield TorchFractionFacts(tuple(found), backend, dict(errors)), ctx.budget
