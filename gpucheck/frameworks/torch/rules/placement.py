"""PyTorch's placement layer, from the steps of its child (``gpucheck.frameworks.torch.placement``):

- ``compute-mode-prohibited``: the first tensor on a GPU was refused with "CUDA-capable device(s) is/are busy or
  unavailable" (exclusive-process mode held by another process, or prohibited), where NVML's reading has not already
  said so (in a container NVML often lists no other process);
- ``placement-failed``: a tensor or an op could not run on a GPU, or ended elsewhere; a numerics check or the training
  step raised; the child died or overran its time in a step;
- ``numerical-mismatch``: a GPU computes results, or a training step, that disagree with the float64 CPU reference.
"""

from __future__ import annotations

import re

from gpucheck.facts import ChildExit, Facts, facts_of
from gpucheck.frameworks.torch.facts import (
    FRACTION_STAGE,
    TorchOpRun,
    TorchTrainingRun,
    numerics_facts,
    placement_facts,
    torch_facts,
    training_facts,
)
from gpucheck.model import Finding, Severity, finding
from gpucheck.protocol import DEADLINE_EXIT
from gpucheck.rules.common import child_evidence, numerics_findings
from gpucheck.rules.nvml import answered, compute_blocked
from gpucheck.settings import Settings

#: What a check that raised needs (``rules.common.numeric_raised``).
CONV_REMEDY = ("For a convolution, cuDNN must load (the nvidia-cudnn wheel torch's CUDA build brings); read the error in "
               "the evidence for the library or kernel it names.")
#: torch's words (cudaErrorDevicesUnavailable) where a GPU's compute mode keeps this process off it.
BUSY = re.compile(r"busy or unavailable", re.IGNORECASE)


def placement_rules(facts: Facts, settings: Settings) -> list[Finding]:
    probe = torch_facts(facts)
    if probe is None or probe.facts is None or not probe.facts.importable:
        return []  # the framework rules say why
    out = _step_died(probe.exit, settings)
    placement = facts_of(placement_facts(facts))
    nf = answered(facts)
    nvml_said = nf is not None and any(compute_blocked(g) for g in nf.gpus)
    refused: set[str] = set()
    for run in placement.runs if placement is not None else ():
        found = _placement(run, nvml_said)
        if found is not None:
            out.append(found)
        if found is not None or run.exception is not None:
            # Named once (or by NVML's compute mode): its numerics and training fail the same way.
            refused.add(run.device)
    numerics = facts_of(numerics_facts(facts))
    kept = [c for c in (numerics.checks if numerics else ()) if c.device not in refused]
    out.extend(numerics_findings("torch", kept, CONV_REMEDY))
    training = facts_of(training_facts(facts))
    for step in training.runs if training is not None else ():
        if not refused.intersection(step.devices):
            out.extend(_training(step))
    return out


def _step_died(exit_: ChildExit, settings: Settings) -> list[Finding]:
    """The child wrote its framework facts ("ok") and then died or overran in a step: programs that use the GPUs die
    the same way. (A child that died earlier is the framework rules' finding.)"""
    died = exit_.signal is not None or (exit_.returncode is not None and exit_.returncode != 0)
    overran = exit_.status == "timeout" or exit_.returncode == DEADLINE_EXIT
    if exit_.status not in ("ok", "timeout") or not (died or overran):
        return []
    if (exit_.last_stage or "").startswith(FRACTION_STAGE):
        return []  # the resources step's, after every placement step: the resources rules name it
    where = exit_.last_stage or "the placement step"
    if overran:
        return [
            finding(
                "placement-failed",
                Severity.DEGRADED,
                summary=f"PyTorch's placement step did not finish within its share of the {settings.timeout:g} s timeout "
                f"(it was in {where}).",
                cause=f"torch was still running `{where}` at the probe's deadline: work on the GPU is very slow to start "
                "(a first start that JIT-compiles PTX for this GPU takes minutes) or does not return.",
                remedy="Run again with a larger --gpucheck-timeout; if it never finishes, run the same op by hand "
                "(`python -c \"import torch; print(torch.ones(1, device='cuda') + 1)\"`) to see where it stops.",
                evidence=child_evidence(exit_),
                subject="placement step",
            )
        ]
    how = exit_.signal or f"exit code {exit_.returncode}"
    return [
        finding(
            "placement-failed",
            Severity.BLOCKER,
            summary=f"PyTorch died ({how}) running work on its GPUs, in {where}.",
            cause=f"torch imports and lists its GPUs, but the process died with {how} while running `{where}`: programs "
            "that use the GPUs die the same way.",
            remedy="Read torch's last lines in the evidence; run the same op by hand with `CUDA_LAUNCH_BLOCKING=1` and "
            "check the kernel log for Xid errors (`sudo dmesg | grep -i xid`).",
            evidence=child_evidence(exit_),
            subject="placement step",
        )
    ]


def _placement(run: TorchOpRun, nvml_said: bool) -> Finding | None:
    """None where the tensor and the op's result are on the device asked for."""
    if run.exception is not None and BUSY.search(run.exception):
        if nvml_said:
            return None  # NVML's compute mode already names it, with the process that holds the GPU
        return finding(
            "compute-mode-prohibited",
            Severity.BLOCKER,
            summary=f"{run.device} refuses this process: torch says its CUDA device is busy or unavailable.",
            cause=f"Making a tensor on {run.device} raised: {run.exception}. The GPU's compute mode is Exclusive_Process "
            "with another process holding it, or Prohibited (NVML did not say which: in a container it often lists no "
            "other process).",
            remedy="Ask `nvidia-smi -q -d COMPUTE` for the compute mode and `nvidia-smi` for the process holding the "
            "GPU; set the default mode (`sudo nvidia-smi -i N -c DEFAULT`) if nothing requires the restriction, or use "
            "another GPU.",
            evidence={"device": run.device, "error": run.exception},
            subject=run.device,
        )
    if run.exception is not None:
        return finding(
            "placement-failed",
            Severity.BLOCKER,
            summary=f"torch cannot make a tensor and run an op on {run.device}.",
            cause=f"`torch.arange(16, device='{run.device}')` and a matmul of it raised: {run.exception}",
            remedy="Read the error: a kernel image missing for this GPU names the wheel to install, an out-of-memory "
            "error the processes that hold the GPU (`nvidia-smi`).",
            evidence={"device": run.device, "error": run.exception},
            subject=run.device,
        )
    if run.tensor_on != run.device or run.result_on != run.device:
        return finding(
            "placement-failed",
            Severity.BLOCKER,
            summary=f"Work asked for {run.device} ran on {run.result_on or run.tensor_on}.",
            cause=f"A tensor made with device='{run.device}' is on {run.tensor_on}, and a matmul of it on "
            f"{run.result_on}.",
            remedy="Check CUDA_VISIBLE_DEVICES and torch.cuda.set_device in the environment and in conftest or "
            "sitecustomize files that run before the program.",
            evidence={"device": run.device, "tensor_on": run.tensor_on, "result_on": run.result_on},
            subject=run.device,
        )
    return None


def _training(run: TorchTrainingRun) -> list[Finding]:
    where = " and ".join(run.devices)
    split = len(run.devices) > 1
    what = f"A training step split over {where}" if split else f"A training step on {where}"
    evidence = {"devices": list(run.devices), "error": run.error, "tolerance": run.tolerance, "loss": run.loss,
                "reference_loss": run.reference_loss, "exception": run.exception}
    if run.exception is not None:
        return [finding(
            "placement-failed",
            Severity.BLOCKER,
            summary=f"{what} fails.",
            cause=f"One SGD step of a two-layer network ({'a layer on each device' if split else 'on the device'}) "
            f"raised: {run.exception}",
            remedy="Read the error: copies between GPUs need both usable (and peer access or staging through the host)."
            if split else "Read the error for the library or kernel it names.",
            evidence=evidence,
            subject=f"training step on {where}",
        )]
    if run.ok:
        return []
    return [finding(
        "numerical-mismatch",
        Severity.BLOCKER,
        summary=f"{what} disagrees with the same step in float64 on the CPU.",
        cause=f"After one SGD step from the same weights and data the weights differ by {run.error:.3g} (relative; "
        f"tolerance {run.tolerance:g}): " + ("data is corrupted on its way between the GPUs or computed wrong."
                                              if split else "the GPU computes the forward or backward pass wrong."),
        remedy="Test the GPUs one by one (`CUDA_VISIBLE_DEVICES=N`), check `nvidia-smi topo -m`, ECC and PCIe/NVLink "
        "errors (`nvidia-smi -q -d ECC`); do not train on them meanwhile.",
        evidence=evidence,
        subject=f"training step on {where}",
    )]
