"""PyTorch's resources layer: an allocator configuration the installed build refuses (``memory-config-failed``, read
without starting CUDA), ``torch.cuda.set_per_process_memory_fraction`` that does not bound the process on a GPU
(``memory-config-failed``, degraded: its child's step, ``gpucheck.frameworks.torch.fraction``), and ``/dev/shm`` too
small for NCCL between this machine's GPUs (``nccl-shm-failed``); and the cause of an ``import torch`` that aborts on a
malformed configuration, for the framework layer's finding."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gpucheck.facts import ChildExit, Facts, facts_of
from gpucheck.frameworks.torch import memory
from gpucheck.frameworks.torch.facts import (
    FRACTION_STAGE,
    AllocatorConfig,
    MemoryFraction,
    TorchFacts,
    fraction_facts,
    shared_memory,
)
from gpucheck.frameworks.torch.rules.common import torch_of
from gpucheck.model import Finding, Severity, finding
from gpucheck.protocol import DEADLINE_EXIT
from gpucheck.rules.common import child_evidence
from gpucheck.settings import Settings

#: Set to 1, NCCL does not use its shared-memory transport (NCCL's environment variables).
SHM_DISABLE = "NCCL_SHM_DISABLE"
#: The variables these rules weigh (``Unit.environment_keys``).
ENVIRONMENT_KEYS = (*memory.VARIABLES, SHM_DISABLE)


def resources_rules(facts: Facts, settings: Settings) -> list[Finding]:
    """``memory-config-failed`` for each allocator configuration the build refuses, ``nccl-shm-failed`` (degraded)
    where ``/dev/shm`` is too small or not writable for NCCL between two or more GPUs."""
    tf = torch_of(facts)
    if tf is None:
        return []
    out = [_config_refused(tf, config) for config in tf.allocator if _refused(config)]
    shm = _shm_too_small(tf, facts)
    outcome = fraction_facts(facts)
    measured = facts_of(outcome)
    loose = [_fraction_loose(tf, f, measured.backend) for f in measured.fractions if _loose(f)] if measured else []
    died = _fraction_died(outcome.exit) if outcome is not None else None
    return out + loose + ([died] if died is not None else []) + ([shm] if shm is not None else [])


def _loose(f: MemoryFraction) -> bool:
    """The cap did not hold (the tensor past it was made), or torch would not set it; never where memory held
    elsewhere refused a tensor, nor where an allocation failed otherwise."""
    return f.over_refused is False or f.failed_at == "set"


def _fraction_died(exit_: ChildExit) -> Finding | None:
    """The child died or overran its time in the fraction step (the last of its steps): the placement layer's steps
    were done, and this is the resources layer's (degraded: the fraction could not be seen to hold)."""
    died = exit_.signal is not None or (exit_.returncode is not None and exit_.returncode != 0)
    overran = exit_.status == "timeout" or exit_.returncode == DEADLINE_EXIT
    where = exit_.last_stage or ""
    if exit_.status not in ("ok", "timeout") or not (died or overran) or not where.startswith(FRACTION_STAGE):
        return None
    how = "did not finish within its time" if overran else f"died ({exit_.signal or f'exit code {exit_.returncode}'})"
    return finding(
        "memory-config-failed",
        Severity.DEGRADED,
        summary=f"PyTorch {how} trying set_per_process_memory_fraction, in {where}.",
        cause=f"torch's child ran its placement steps, then {how} while running `{where}`: a process bounded by a "
        "memory fraction (gpucheck's --gpucheck-worker-memory, torch_device) may do the same.",
        remedy="Run the same by hand (`python -c \"import torch; torch.cuda.set_per_process_memory_fraction(0.01, 0); "
        "torch.empty(2**27, device='cuda')\"`) and read what torch says; check PYTORCH_CUDA_ALLOC_CONF.",
        evidence=child_evidence(exit_),
        subject=where.split(": ")[0],
    )


def _fraction_loose(tf: TorchFacts, f: MemoryFraction, backend: str | None) -> Finding:
    """``memory-config-failed`` (degraded: programs run, but processes that share a GPU are not kept to their share)."""
    what = (f"a {f.over_mib} MiB tensor was made past its {f.cap_mib} MiB cap" if f.over_refused is False
            else f"torch would not set it: {f.error}")
    return finding(
        "memory-config-failed",
        Severity.DEGRADED,
        summary=f"torch.cuda.set_per_process_memory_fraction does not bound this process on {f.device}: {what}.",
        cause=(
            f"With the fraction set to {f.fraction:.6f} of {f.device} ({f.cap_mib} MiB), " + what
            + f" (PyTorch {tf.version}, allocator backend {backend or 'unknown'}). Processes that share a GPU by fractions "
            "(gpucheck's --gpucheck-worker-memory and torch_device under pytest-xdist, or a scheduler's) are not kept to "
            "their share: one can take the memory the others count on."
        ),
        remedy=(
            "Check PYTORCH_CUDA_ALLOC_CONF (its `backend`) and anything that replaces torch's allocator "
            "(torch.cuda.memory.change_current_allocator); until the fraction holds, give each process a GPU of its own "
            "(CUDA_VISIBLE_DEVICES) rather than a share of one."
        ),
        evidence={"device": f.device, "fraction": f.fraction, "cap_mib": f.cap_mib, "over_mib": f.over_mib,
                  "under_granted": f.under_granted, "over_refused": f.over_refused, "backend": backend,
                  "error": f.error, "torch_said": f.said},
        subject=f"memory fraction on {f.device}",
    )


def _refused(config: AllocatorConfig) -> bool:
    return bool(config.unknown or config.malformed or config.torch_said)


def _config_refused(tf: TorchFacts, config: AllocatorConfig) -> Finding:
    """``memory-config-failed``: options the build does not know, a form it does not read, or its own parser's no."""
    if config.unknown:
        what = f"does not know the option{'s' if len(config.unknown) > 1 else ''} {', '.join(config.unknown)}"
    elif config.malformed:
        what = f"cannot read it: {config.malformed}"
    else:
        what = f"refuses it: {config.torch_said}"
    known = [k for k in config.keys if k not in config.unknown]
    return finding(
        "memory-config-failed",
        Severity.BLOCKER,
        summary=f"PyTorch {tf.version} {what} ({config.variable}={config.value}).",
        cause=(
            f"{config.variable} configures torch's CUDA caching allocator; torch parses it when it first allocates GPU "
            "memory (2.14: an option without ':value' already when it loads) and every program then fails"
            + (f"; torch's own parser, asked without starting CUDA, says: {config.torch_said}" if config.torch_said else "")
            + (
                f". None of the build's parsing libraries ({', '.join(config.libraries)}) holds "
                f"{', '.join(config.unknown)}: an option of another torch version (expandable_segments came with 2.1) "
                "or a typo."
                if config.unknown
                else "."
            )
        ),
        remedy=(
            f"`echo ${config.variable}` (and the program's own os.environ settings): "
            + (f"remove {', '.join(config.unknown)}, or install a torch that knows it" if config.unknown else "")
            + ("write it as comma-separated key:value options" if not config.unknown and config.malformed else "")
            + ("correct the value torch names" if not config.unknown and not config.malformed else "")
            + (f" (the options it knows here: {', '.join(known)})" if known else "")
            + "."
        ),
        evidence={
            "variable": config.variable,
            "value": config.value,
            "unknown_keys": list(config.unknown),
            "malformed": config.malformed,
            "torch_said": config.torch_said,
            "libraries": list(config.libraries),
            "torch": tf.version,
        },
    )


def _shm_not_checked(tf: TorchFacts | None, facts: Facts) -> str | None:
    """Why ``/dev/shm`` is not judged for NCCL here; None where it is."""
    shm = shared_memory(facts)
    if tf is None:
        return "PyTorch did not report (it is not importable, or its probe died)"
    if not tf.cuda_build:
        return "PyTorch is a CPU-only build: it runs no NCCL"
    if (facts.environment.get(SHM_DISABLE) or "").strip() == "1":
        return f"{SHM_DISABLE}=1: NCCL does not use its shared-memory transport"
    if (tf.device_count or 0) < 2:
        return f"PyTorch counts {tf.device_count or 0} GPU(s): NCCL connects two or more GPUs of one machine through /dev/shm"
    if shm is None:
        return "/dev/shm was not read"
    if shm.error is not None:
        return f"{shm.path} could not be read: {shm.error}"
    return None


def _shm_too_small(tf: TorchFacts, facts: Facts) -> Finding | None:
    """``nccl-shm-failed`` (degraded: one GPU's work runs; NCCL between the GPUs does not): ``/dev/shm`` has less free
    than the 1 GiB NCCL's troubleshooting guide asks a container for, or cannot be written."""
    shm = shared_memory(facts)
    if shm is None or _shm_not_checked(tf, facts) is not None:
        return None
    small = shm.free is not None and shm.free < memory.NCCL_SHM_BYTES
    if not small and shm.writable is not False:
        return None
    gpus = tf.device_count or 0
    state = (
        f"has {memory.short_bytes(shm.free)} free of {memory.short_bytes(shm.size)}"
        + ("" if shm.writable is not False else " and cannot be written")
        if small
        else "cannot be written"
    )
    return finding(
        "nccl-shm-failed",
        Severity.DEGRADED,
        summary=f"{shm.path} {state}: NCCL between this machine's {gpus} GPUs will fail to start.",
        cause=(
            "NCCL makes its shared-memory segments between the GPUs of one machine in /dev/shm (about 9 MiB each: "
            "'Error while creating shared memory segment ... (size 9637888)', NVIDIA/nccl#342, in Docker's 64 MB "
            "default), and fails to initialise where they do not fit ('NCCL WARN Error: failed to extend /dev/shm/nccl-"
            "... bytes'); PyTorch then says only 'NCCL error ... unhandled system error'. NCCL's troubleshooting guide "
            "asks a container for --shm-size=1g. One GPU's work is not affected."
        ),
        remedy=(
            "Give the container more shared memory: `docker run --shm-size=1g --ulimit memlock=-1 ...` or "
            "`--ipc=host`; Kubernetes: mount an emptyDir of medium Memory on /dev/shm; "
            + ("make /dev/shm writable; " if shm.writable is False else "")
            + f"`{SHM_DISABLE}=1` avoids it at a cost in speed."
        ),
        evidence={
            "path": shm.path,
            "size_bytes": shm.size,
            "free_bytes": shm.free,
            "writable": shm.writable,
            "needed_bytes": memory.NCCL_SHM_BYTES,
            "gpus": gpus,
            "torch": tf.version,
        },
    )


def not_checked(facts: Facts, settings: Settings) -> dict[str, str]:
    """Why ``/dev/shm`` was not judged for NCCL (``nccl-shm-failed``), where it was not."""
    why = _shm_not_checked(torch_of(facts), facts)
    return {"nccl-shm-failed": why} if why is not None else {}


def malformed_config(environment: Mapping[str, str | None]) -> tuple[str, str, str] | None:
    """The first allocator configuration of the environment whose form torch cannot read: (variable, value, what)."""
    for variable in memory.VARIABLES:
        value = environment.get(variable)
        if value is not None and (wrong := memory.parse(value).malformed) is not None:
            return variable, value, wrong
    return None


#: What torch says where its allocator configuration stops ``import torch``: 2.14 aborts (SIGABRT) with "Index out of
#: bounds in ConfigTokenizer" (pytorch/pytorch#186453); the fix proposed there (pytorch/pytorch#186607) raises
#: "ValueError: Error parsing the allocator config: ...", which the child reports as a failed import.
_CONFIG_WORDS = ("ConfigTokenizer", "allocator config")


def config_broke_import(found: Finding, said: tuple[str, ...], environment: Mapping[str, str | None]) -> Finding:
    """``framework-crashed`` (torch 2.14 aborts) or ``framework-missing`` (a torch that raises instead) with its cause
    where ``import torch`` stopped on a malformed allocator configuration: torch's CUDA library parses it as it loads.
    ``said`` is what the child left: its last output, or its import error."""
    wrong = malformed_config(environment)
    if wrong is None or found.id not in ("framework-crashed", "framework-missing"):
        return found
    words = next((line.strip() for line in said if any(w in line for w in _CONFIG_WORDS)), None)
    if found.id == "framework-missing" and words is None:
        return found  # an import that failed for another reason
    variable, value, what = wrong
    return replace(
        found,
        cause=(
            f"{variable}={value} is not a list of key:value options ({what}); torch's CUDA library parses it as it "
            "loads, and `import torch` stops"
            + (f": {words}" if words else "")
            + f". {found.cause}"
        ),
        remedy=(
            f"Correct {variable} to comma-separated key:value options (`expandable_segments:True`), or unset it "
            "(`echo $" + variable + "`, and the program's own os.environ settings)."
        ),
        evidence={**found.evidence, "variable": variable, "value": value, "malformed": what, "torch_said": words},
    )
