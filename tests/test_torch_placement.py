"""PyTorch's placement layer (issue 36, point 2: placement and numerics, a training step on each GPU and split over two, a
busy GPU). Its rules in-process on the steps' facts, with torch's own words where people paste them:

- a GPU in exclusive-process mode held by another process: "RuntimeError: CUDA error: CUDA-capable device(s) is/are
  busy or unavailable" from `torch.rand(3, 3).cuda()` on a Tesla T4 whose `torch.cuda.is_available()` is True
  (pytorch/pytorch#100691), and the older "cuda runtime error (46) : all CUDA-capable devices are busy or unavailable"
  (pytorch/pytorch#2704);
- the steps themselves, for real, in the torch CPU wheel's venv under --gpucheck-deep, where they check the checks on
  the CPU (this host has no GPU: on a real one they run on every ``cuda:N``; docs/measured.md has the last real run).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

from gpucheck.facts import ChildExit, CudaCall, Facts, NumericCheck, NvmlFacts, NvmlGpu, NvmlProcess, ProbeOutcome
from gpucheck.frameworks.torch.facts import (
    MemoryFraction,
    TorchFractionFacts,
    TorchNumericsFacts,
    TorchOpRun,
    TorchPlacementFacts,
    TorchTrainingFacts,
    TorchTrainingRun,
)
from gpucheck.frameworks.torch.fraction import ALLOWED
from gpucheck.frameworks.torch.rules.placement import placement_rules
from gpucheck.frameworks.torch.rules.resources import resources_rules
from gpucheck.model import Finding
from tests.factsbuild import replace_facts
from tests.pyenvs import checkout_environment
from tests.test_torch_rules import OK_EXIT, TORCH, cuda_build, machine

#: pytorch/pytorch#100691 (torch on two Tesla T4s, driver 525.105.17), the first line of torch's error.
BUSY_100691 = "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"
#: pytorch/pytorch#2704 (torch 0.2), the same refusal in the words of the time.
BUSY_2704 = ("RuntimeError: cuda runtime error (46) : all CUDA-capable devices are busy or unavailable at "
             "/opt/conda/conda-bld/pytorch_1502004572321/work/torch/lib/THC/generic/THCStorage.cu:66")
PLACED = TorchOpRun("cuda:0", "cuda:0", "cuda:0")
LOGS = Path(__file__).parent / "logs" / "torch"


def _check(op: str = "matmul", precision: str = "float32", error: float = 3e-7, tolerance: float = 1e-5,
           device: str = "cuda:0", exception: str | None = None) -> NumericCheck:
    ok = exception is None and error <= tolerance
    return NumericCheck(device, op, precision, ok, None if exception else device, None if exception else error,
                             tolerance, exception, "256x256 @ 256x256")


def _run(devices: tuple[str, ...] = ("cuda:0",), error: float = 8e-8, exception: str | None = None) -> TorchTrainingRun:
    ok = exception is None and error <= 1e-4
    return TorchTrainingRun(devices, ok, None if exception else error, 1e-4, 2.45, 2.45, exception)


def steps(runs: tuple[TorchOpRun, ...] = (PLACED,), checks: tuple[NumericCheck, ...] = (_check(),),
          training: tuple[TorchTrainingRun, ...] = (_run(),), exit_: ChildExit = OK_EXIT) -> Facts:
    """A machine whose torch sees its GPU, with the steps' facts."""
    facts = machine(cuda_build(), exit_=exit_)
    return replace_facts(
        facts, TORCH,
        torch_placement=ProbeOutcome("torch", exit_, TorchPlacementFacts(runs)),
        torch_numerics=ProbeOutcome("torch", exit_, TorchNumericsFacts(checks)),
        torch_training=ProbeOutcome("torch", exit_, TorchTrainingFacts(training)),
    )


def found(facts: Facts) -> list[tuple[str, str | None, str]]:
    out: list[Finding] = placement_rules(facts, TORCH)
    return [(f.id, f.subject, f.severity.value) for f in out]


def test_a_gpu_that_runs_everything_right_finds_nothing() -> None:
    assert found(steps()) == []


def test_a_busy_gpu_is_its_compute_mode_where_nvml_did_not_say() -> None:
    for said in (BUSY_100691, BUSY_2704):
        facts = steps(runs=(TorchOpRun("cuda:0", None, None, said),), checks=(), training=())
        assert found(facts) == [("compute-mode-prohibited", "cuda:0", "blocker")]
        (f,) = placement_rules(facts, TORCH)
        assert f.evidence["error"] == said and f.layer == "visibility"
    # Where NVML names the compute mode and the process holding the GPU, its finding stands alone.
    # (its numerics and training step, asked of the same refused GPU, raise the same words and add nothing).
    busy = steps(runs=(TorchOpRun("cuda:0", None, None, BUSY_100691),),
                 checks=(_check(exception=BUSY_100691), _check("conv2d", exception=BUSY_100691)),
                 training=(_run(exception=BUSY_100691),))
    nvml = busy.nvml.facts
    assert isinstance(nvml, NvmlFacts)
    # Exclusive_Process (3) with process 4242 on it, as nvidia-smi shows the T4s of pytorch/pytorch#100691.
    gpu = NvmlGpu(0, None, "Tesla T4", compute_mode=3, processes=(NvmlProcess(4242, 1 << 30, "python"),))
    init = CudaCall("nvmlInit_v2", 0, "NVML_SUCCESS", None)
    held = replace_facts(busy, TORCH, nvml=ProbeOutcome("nvml", OK_EXIT, dataclasses.replace(nvml, gpus=(gpu,), init=init)))
    assert found(held) == []


def test_work_that_fails_or_lands_elsewhere_is_placement_failed() -> None:
    oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB."
    assert found(steps(runs=(TorchOpRun("cuda:0", None, None, oom),), checks=(), training=())) == [
        ("placement-failed", "cuda:0", "blocker")]
    moved = steps(runs=(TorchOpRun("cuda:1", "cuda:0", "cuda:0"),), checks=(), training=())
    assert found(moved) == [("placement-failed", "cuda:1", "blocker")]
    # A GPU that refused its tensor is named once: its numerics and training are not a second finding.
    refused = steps(runs=(TorchOpRun("cuda:0", None, None, oom),),
                    checks=(_check(exception=oom),), training=(_run(exception=oom),))
    assert found(refused) == [("placement-failed", "cuda:0", "blocker")]


def test_wrong_numbers_are_numerical_mismatch_and_a_kernel_that_raises_is_placement_failed() -> None:
    wrong = (_check(), _check("matmul", "bfloat16", 0.9, 3e-2), _check("conv2d", "float32", 1.0, 1e-4))
    assert found(steps(checks=wrong)) == [("numerical-mismatch", "cuda:0", "blocker")]
    (f,) = placement_rules(steps(checks=wrong), TORCH)
    assert "matmul in bfloat16, conv2d in float32" in f.summary and len(f.evidence["checks"]) == 3
    no_cudnn = "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"
    assert found(steps(checks=(_check("conv2d", exception=no_cudnn),))) == [
        ("placement-failed", "conv2d on cuda:0", "blocker")]


def test_a_training_step_off_on_one_gpu_or_split_over_two() -> None:
    split = ("cuda:0", "cuda:1")
    runs = (TorchOpRun("cuda:0", "cuda:0", "cuda:0"), TorchOpRun("cuda:1", "cuda:1", "cuda:1"))
    assert found(steps(runs=runs, training=(_run(), _run(("cuda:1",)), _run(split, error=0.5)))) == [
        ("numerical-mismatch", "training step on cuda:0 and cuda:1", "blocker")]
    peer = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert found(steps(runs=runs, training=(_run(split, exception=peer),))) == [
        ("placement-failed", "training step on cuda:0 and cuda:1", "blocker")]


def test_a_child_that_dies_in_the_memory_fraction_step_is_the_resources_layers() -> None:
    """The fraction step runs after every placement step: a child that dies there is no placement finding."""
    died = ChildExit("ok", None, "SIGSEGV", 9.0, (), "memory fraction on cuda:0: 512 MiB past a 256 MiB cap", None)
    facts = replace_facts(steps(checks=(), training=(), exit_=died), TORCH,
                          torch_fraction=ProbeOutcome("torch", died, TorchFractionFacts((), "native")))
    assert placement_rules(facts, TORCH) == []
    (f,) = resources_rules(facts, TORCH)
    assert (f.id, f.severity.value, f.subject) == ("memory-config-failed", "degraded", "memory fraction on cuda:0")
    assert "died (SIGSEGV)" in f.summary


def test_a_child_that_dies_or_overruns_in_a_step() -> None:
    died = ChildExit("ok", None, "SIGSEGV", 9.0, ("Segmentation fault",), "numerics on cuda:0: conv2d in float32", None)
    (f,) = placement_rules(steps(checks=(), training=(), exit_=died), TORCH)
    assert (f.id, f.severity.value) == ("placement-failed", "blocker")
    assert "SIGSEGV" in f.summary and "conv2d in float32" in f.summary
    overran = ChildExit("timeout", None, "SIGKILL", 60.0, (), "training step on cuda:0", None)
    (g,) = placement_rules(steps(checks=(), training=(), exit_=overran), TORCH)
    assert (g.id, g.severity.value) == ("placement-failed", "degraded") and "training step on cuda:0" in g.summary


#: torch 2.11.0+cu130's refusal of the 512 MiB tensor past the 256 MiB cap on a real H200 (2026-11-28,
#: docs/gpu-runs/h200-2026-11-28/fraction-none.json), and with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
#: (fraction-backend.json): the cap held under both allocators, and under expandable_segments:True.
SAID_NATIVE = 'OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 138.93 GiB is free. Including non-PyTorch memory, this process has 878.00 MiB memory in use. 256.00 MiB allowed; Of the allocated memory 128.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memor'
SAID_ASYNC = 'OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)'


def _fraction(over_refused: bool | None, under_granted: bool | None = True, error: str | None = None,
              said: str | None = None, failed_at: str | None = None) -> MemoryFraction:
    # A 256 MiB cap on that H200 (the fraction its child set: 0.0017882597429813207).
    return MemoryFraction("cuda:0", 0.0017882597429813207, 256, 64, 512, under_granted, over_refused, said, error,
                          failed_at)


def with_fraction(*fractions: MemoryFraction, backend: str = "native") -> Facts:
    facts = machine(cuda_build())
    return replace_facts(facts, TORCH, torch_fraction=ProbeOutcome("torch", OK_EXIT, TorchFractionFacts(fractions, backend)))


def test_a_memory_fraction_that_does_not_bound_the_process_is_memory_config_failed() -> None:
    """set_per_process_memory_fraction, which --gpucheck-worker-memory and torch_device rely on: a cap that holds is
    no finding; a tensor made past it is memory-config-failed (degraded: programs run, GPU shares are not kept), as is
    a fraction torch would not set; where memory held elsewhere refused the tensor under the cap, nothing is judged."""
    assert resources_rules(with_fraction(_fraction(True, said=SAID_NATIVE)), TORCH) == []
    assert resources_rules(with_fraction(_fraction(True, said=SAID_ASYNC), backend="cudaMallocAsync"), TORCH) == []
    (f,) = resources_rules(with_fraction(_fraction(False), backend="cudaMallocAsync"), TORCH)
    assert (f.id, f.severity.value, f.subject, f.layer) == (
        "memory-config-failed", "degraded", "memory fraction on cuda:0", "resources")
    assert "a 512 MiB tensor was made past its 256 MiB cap" in f.summary and f.evidence["backend"] == "cudaMallocAsync"
    assert resources_rules(with_fraction(_fraction(None, under_granted=False)), TORCH) == []
    refused = "RuntimeError: invalid fraction"
    (g,) = resources_rules(with_fraction(_fraction(None, None, refused, failed_at="set")), TORCH)
    assert g.id == "memory-config-failed" and f"torch would not set it: {refused}" in g.summary
    # The child takes a refusal for the cap's only where torch's words say what is allowed: both of the H200's do, and
    # a GPU out of free memory does not (torch 2.x's words in a public report, tests/logs/torch/
    # generateu-10-oom-process-in-use.log).
    assert ALLOWED.search(SAID_NATIVE) and ALLOWED.search(SAID_ASYNC)
    full = next(line for line in (LOGS / "generateu-10-oom-process-in-use.log").read_text().splitlines()
                if "CUDA out of memory" in line)
    assert "Process 20398 has 14.52 GiB memory in use" in full and not ALLOWED.search(full)
    # An allocation that failed otherwise, or a refusal for want of free memory (no "allowed" in torch's words: the
    # child leaves over_refused None), judges nothing.
    illegal = "AcceleratorError: CUDA error: an illegal memory access was encountered"
    assert resources_rules(with_fraction(_fraction(None, True, illegal, failed_at="allocate")), TORCH) == []
    assert resources_rules(with_fraction(_fraction(None, said="OutOfMemoryError: CUDA out of memory.")), TORCH) == []


def test_the_steps_check_their_checks_on_the_cpu_with_real_torch(torch_python: Path, tmp_path: Path) -> None:
    """The real steps in the torch CPU wheel under --gpucheck-deep: a tensor and its matmul on the CPU, every numerics
    check within its tolerance (TF32 only where a GPU of compute capability 8.0 runs it), one training step agreeing
    with float64, and no finding of the placement layer. Without --gpucheck-deep no step runs on this host."""
    project = tmp_path / "project"
    project.mkdir()
    env = checkout_environment(tmp_path / "site")
    for deep in (True, False):
        report = tmp_path / f"report-{deep}.json"
        done = subprocess.run(
            [str(torch_python), "-m", "pytest", "--gpucheck", f"--gpucheck-json={report}", "-p", "no:cacheprovider",
             *(["--gpucheck-deep"] if deep else [])],
            cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False,
        )
        assert report.exists(), (done.stdout + done.stderr)[-4000:]
        data = json.loads(report.read_text())
        facts = data["facts"]
        if not deep:
            for key in ("torch_placement", "torch_numerics", "torch_training", "torch_fraction"):
                assert facts[key]["facts"] is None, facts[key]
            continue
        assert facts["torch"]["exit"]["status"] == "ok" and facts["torch"]["exit"]["returncode"] == 0
        assert facts["torch_placement"]["facts"]["runs"] == [
            {"device": "cpu", "tensor_on": "cpu", "result_on": "cpu", "exception": None}]
        checks = facts["torch_numerics"]["facts"]["checks"]
        assert [(c["op"], c["precision"]) for c in checks] == [
            ("matmul", "float32"), ("matmul", "float16"), ("matmul", "bfloat16"), ("conv2d", "float32"),
            ("sum", "float32")]
        for c in checks:
            assert c["ok"] and 0 < c["error"] <= c["tolerance"] and c["ran_on"] == "cpu", c
        (run,) = facts["torch_training"]["facts"]["runs"]
        assert run["devices"] == ["cpu"] and run["ok"] and 0 < run["error"] <= run["tolerance"], run
        assert abs(run["loss"] - run["reference_loss"]) < 1e-5, run
        assert not [f for f in data["findings"] if f["layer"] == "placement"], data["findings"]
        # The CPU has no memory fraction: the resources step has nothing to bound there.
        assert facts["torch_fraction"]["facts"] == {"fractions": [], "backend": None, "errors": {}}


#: The training step with its two layers on two devices, run by the real wheel: on this host both are the CPU, so the
#: split's own code (the hidden layer moved to the second device, the classes with it) runs as it does on two GPUs.
SPLIT = """
import json, torch
from gpucheck.frameworks.torch import placement
run = placement.training(torch, ("cpu", "cpu"))
print(json.dumps({"ok": run.ok, "error": run.error, "devices": run.devices, "loss": run.loss,
                  "reference_loss": run.reference_loss, "exception": run.exception}))
"""


def test_the_split_training_step_agrees_with_float64_in_the_real_wheel(torch_python: Path, tmp_path: Path) -> None:
    """The step a machine with two GPUs runs split over them (``placement.training`` with two devices), in the real
    torch CPU wheel: its weights after one SGD step agree with the float64 reference, and its loss with the
    reference's (the lent H200 had one GPU, so the split has not run on GPUs yet: docs/pytorch.md)."""
    env = checkout_environment(tmp_path / "site")
    done = subprocess.run([str(torch_python), "-c", SPLIT], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert run["devices"] == ["cpu", "cpu"] and run["exception"] is None, run
    assert run["ok"] and 0 < run["error"] <= 1e-4, run
    assert abs(run["loss"] - run["reference_loss"]) < 1e-5, run
