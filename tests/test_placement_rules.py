"""The placement rules as pure functions of hand-built facts, for what no machine here can produce:
TensorFlow registering a GPU. The facts are shaped as the probe writes them; the log lines and error
texts are TensorFlow's own, from the reports cited beside them. Also: the probe's pure helpers, and
the grandchild guard (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from gpucheck.facts import (
    ChildExit,
    CudaDriverFacts,
    Facts,
    HardwareFacts,
    KernelFacts,
    LibraryLoad,
    NvmlFacts,
    NvmlGpu,
    NvmlProcess,
    ProbeOutcome,
    VisibilityFacts,
)
from gpucheck.frameworks.tensorflow.facts import (
    FallbackOp,
    FrameworkFacts,
    GpuMemory,
    GpuMemoryFacts,
    MemoryConfigFacts,
    MultiDeviceFacts,
    MultiDeviceRun,
    NumericCheck,
    NumericsFacts,
    OpRun,
    PlacementFacts,
    TfDevice,
    TfSetupFacts,
    TrainingStepFacts,
    TrainingStepPlacement,
    XlaFacts,
    XlaRun,
)
from gpucheck.frameworks.tensorflow.rules.memory import memory_rules, not_judged
from gpucheck.frameworks.tensorflow.rules.placement import placement_rules
from gpucheck.frameworks.tensorflow.xla import xla_toolchain_lines
from gpucheck.model import Finding
from gpucheck.pci import pci_key
from gpucheck.protocol import DIE_WITH_PARENT_ENV, quiet
from gpucheck.settings import Settings
from tests.factsbuild import make_facts, replace_facts

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
OK_EXIT = ChildExit("ok", 0, None, 4.2, (), "write facts", None)

#: XLA without libdevice, as TensorFlow 2.15 logs it (https://github.com/iot-salzburg/gpu-jupyter/issues/129,
#: https://github.com/tensorflow/tensorflow/issues/60790).
XLA_LOG = """W0000 00:00:1704749447.213628   1234 gpu_backend_lib.cc:504] Can't find libdevice directory ${CUDA_DIR}/nvvm/libdevice. This may result in compilation or runtime failures, if the program we try to run uses routines from libdevice.
Searched for CUDA in the following directories:
  ./cuda_sdk_lib
  /usr/local/cuda-12.2
  /usr/local/cuda
  /opt/conda/lib/python3.11/site-packages/tensorflow/python/platform/../../../nvidia/cuda_nvcc
You can choose the search directory by setting xla_gpu_cuda_data_dir in HloModule's DebugOptions.  For most apps, setting the environment variable XLA_FLAGS=--xla_gpu_cuda_data_dir=/path/to/cuda will work.
W0000 00:00:1704749447.673259   1234 gpu_backend_lib.cc:274] libdevice is required by this HLO module but was not found at ./libdevice.10.bc
I0000 00:00:1704749447.700000   1234 placer.cc:162] MatMul: (MatMul): /job:localhost/replica:0/task:0/device:GPU:0"""

#: TensorFlow's LOG(FATAL) where CUDA's stream-ordered allocator is unsupported
#: (tensorflow/core/common_runtime/gpu/gpu_cudamallocasync_allocator.cc).
MALLOC_ASYNC_FATAL = (
    "F0000 00:00:1704749447.1 1234 gpu_cudamallocasync_allocator.cc:167] TF_GPU_ALLOCATOR=cuda_malloc_async isn't "
    "currently supported on GPU id 0: Possible causes: device not supported (request SM60+), driver too old,  OS not "
    "supported, CUDA version too old(request CUDA11.2+)."
)


def base_facts(**overrides: Any) -> Facts:
    """A machine whose lower layers are fine; the placement facts are what each test gives."""
    lib = LibraryLoad("libcuda.so.1", True, "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", None)
    facts = make_facts(
        hardware=HardwareFacts("/sys/bus/pci/devices", True, None, 6, False, (), ()),
        kernel=KernelFacts("/proc/driver/nvidia/version", None, "550.54.15", None, (), True, ()),
        visibility=VisibilityFacts(None, None, None, (), False, None, None, ()),
        cuda=ProbeOutcome("cuda", OK_EXIT, CudaDriverFacts(lib, None, 12040, 1)),
        nvml=ProbeOutcome("nvml", OK_EXIT, NvmlFacts(lib, None, "550.54.15", 1)),
        framework=ProbeOutcome(
            "framework", OK_EXIT, FrameworkFacts(True, None, "2.21.0", None, {}, True, (), (), None)
        ),
    )
    return replace_facts(facts, **overrides)


@dataclasses.dataclass(frozen=True)
class TfRun:
    """What the TensorFlow child's set-up and steps found, in one place for the tests to write; ``outcomes``
    splits it into each step's facts, as the child writes them."""

    importable: bool
    import_error: str | None
    version: str | None
    gpus: tuple[TfDevice, ...]
    logical_devices: tuple[str, ...]
    cpu_split: int
    soft_placement_default: bool | None
    runs: tuple[OpRun, ...]
    training_step: TrainingStepPlacement | None
    numerics: tuple[NumericCheck, ...]
    xla: tuple[XlaRun, ...]
    multi_device: MultiDeviceRun | None
    memory: tuple[GpuMemory, ...]
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    memory_limit_mb: int | None = None
    growth_kept_with_logical_devices: bool | None = None
    created_devices: tuple[tuple[str, str], ...] = ()

    def outcomes(self, exit_: ChildExit = OK_EXIT, env: dict[str, str | None] | None = None) -> dict[str, Any]:
        setup = TfSetupFacts(
            self.importable, self.import_error, self.version, self.gpus, self.logical_devices, self.cpu_split,
            self.memory_limit_mb, self.growth_kept_with_logical_devices, self.created_devices, env or {}, self.errors,
        )
        steps = {
            "tf_setup": setup,
            "placement": PlacementFacts(self.soft_placement_default, self.runs),
            "training_step": TrainingStepFacts(self.training_step),
            "numerics": NumericsFacts(self.numerics),
            "xla": XlaFacts(self.xla),
            "multi_device": MultiDeviceFacts(self.multi_device),
            "gpu_memory": GpuMemoryFacts(self.memory),
        }
        return {key: ProbeOutcome(key, exit_, facts) for key, facts in steps.items()}


def tf_facts(gpus: int = 1, cc: tuple[int, int] = (8, 0), **overrides: Any) -> TfRun:
    devices = tuple(
        TfDevice(f"/physical_device:GPU:{i}", "GPU", {"compute_capability": list(cc), "device_name": "NVIDIA A100"})
        for i in range(gpus)
    )
    runs = []
    for i in range(gpus + 1):
        exists = i < gpus
        for mode in ("eager", "function"):
            runs.append(
                OpRun(f"/GPU:{i}", mode, False, exists, GPU0.replace("GPU:0", f"GPU:{i}") if exists else None,
                      None if exists else "InvalidArgumentError",
                      None if exists else f"Could not satisfy device specification '/job:localhost/replica:0/task:0/device:GPU:{i}'.")
            )
            runs.append(OpRun(f"/GPU:{i}", mode, True, True, GPU0.replace("GPU:0", f"GPU:{i}") if exists else GPU0, None, None))
    base: dict[str, Any] = {
        "importable": True,
        "import_error": None,
        "version": "2.21.0",
        "gpus": devices,
        "logical_devices": (*(f"/device:GPU:{i}" for i in range(gpus)), "/device:CPU:0", "/device:CPU:1"),
        "cpu_split": 2,
        "soft_placement_default": True,
        "runs": tuple(runs),
        "training_step": TrainingStepPlacement("/GPU:0", True, None, 60, 60, ()),
        "numerics": (),
        "xla": (),
        "multi_device": None,
        "memory": (),
    }
    base.update(overrides)
    return TfRun(**base)


def evaluate(tf: TfRun | None = None, env: dict[str, str | None] | None = None, **facts: Any) -> list[Finding]:
    """The placement and memory rules; ``env`` is the environment as the run saw it (a fact)."""
    steps = tf.outcomes(OK_EXIT, env or {}) if tf is not None else {}
    built = base_facts(**steps, environment=env or {}, **facts)
    return placement_rules(built, Settings()) + memory_rules(built, Settings())


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


def test_healthy_gpu_gives_only_advice() -> None:
    assert ids(evaluate(tf_facts())) == ["mixed-precision-available"]


def test_the_deliberately_missing_index_is_not_a_fault() -> None:
    """/GPU:1 on a one-GPU machine is refused (that is the fact kept); /GPU:0 works: no placement-failed."""
    findings = evaluate(tf_facts(gpus=1))
    assert "placement-failed" not in ids(findings)


def test_registered_gpu_refusing_an_op_is_placement_failed() -> None:
    tf = tf_facts(gpus=1)
    runs = tuple(
        OpRun(r.requested, r.mode, False, False, None, "InvalidArgumentError", "Cannot assign a device for operation MatMul")
        if r.requested == "/GPU:0" and not r.soft_placement else r
        for r in tf.runs
    )
    [f] = [f for f in evaluate(tf_facts(gpus=1, runs=runs)) if f.id == "placement-failed"]
    assert f.subject == "/GPU:0" and f.layer == "placement"
    assert f.evidence["eager_error"] == "InvalidArgumentError: Cannot assign a device for operation MatMul"
    assert "registers /physical_device:GPU:0" in f.cause


def test_soft_placement_landing_on_cpu_with_a_gpu_registered() -> None:
    tf = tf_facts(gpus=1)
    runs = tuple(
        OpRun(r.requested, r.mode, True, True, CPU0, None, None) if r.requested == "/GPU:0" and r.soft_placement else r
        for r in tf.runs
    )
    [f] = [f for f in evaluate(tf_facts(gpus=1, runs=runs)) if f.id == "soft-placement-fallback"]
    assert f.severity.value == "blocker" and f.evidence["eager_ran_on"] == CPU0


def test_training_step_float_ops_on_cpu_are_degraded_with_reasons() -> None:
    step = TrainingStepPlacement(
        "/GPU:0", True, None, 60, 58,
        (
            FallbackOp("Erfinv", "Erfinv", "float64", "/device:GPU:0", CPU0, "no GPU kernel for float64"),
            FallbackOp("Shape", "Shape", "int32", "/device:GPU:0", CPU0, "GPU kernel exists (placed by colocation)"),
        ),
    )
    [f] = [f for f in evaluate(tf_facts(training_step=step)) if f.id == "soft-placement-fallback"]
    assert f.severity.value == "degraded" and f.subject == "training step"
    assert f.evidence["ops_on_cpu"] == ["Erfinv (Erfinv, float64) ran on device:CPU:0: no GPU kernel for float64"]


def test_numerical_mismatch_and_ops_that_raise() -> None:
    numerics = (
        NumericCheck("/GPU:0", "matmul", "float32", False, GPU0, 0.37, 1e-5, None, "256x256 @ 256x256"),
        NumericCheck("/GPU:0", "matmul", "bfloat16", True, GPU0, 4e-3, 3e-2, None, "256x256 @ 256x256"),
        NumericCheck("/GPU:0", "conv2d", "float32", False, None, None, 1e-4,
                     "UnimplementedError: DNN library is not found.", "NHWC 4x16x16x8 * 3x3x8x16"),
    )
    findings = evaluate(tf_facts(numerics=numerics))
    [mismatch] = [f for f in findings if f.id == "numerical-mismatch"]
    assert mismatch.severity.value == "blocker" and mismatch.subject == "/GPU:0"
    assert "matmul in float32" in mismatch.summary and "bfloat16" not in mismatch.summary
    [raised] = [f for f in findings if f.id == "placement-failed"]
    assert raised.subject == "conv2d on /GPU:0" and "DNN library is not found" in raised.cause


def test_multi_device_mismatch() -> None:
    multi = MultiDeviceRun(("/GPU:0", "/GPU:1"), "gpus", False, (GPU0, GPU0.replace("0", "1")), 0.5, 1e-5, None)
    [f] = [f for f in evaluate(tf_facts(gpus=2, multi_device=multi)) if f.id == "numerical-mismatch"]
    assert f.subject == "multi-device" and f.evidence["devices"] == ["/GPU:0", "/GPU:1"]


def test_xla_log_parsing_keeps_the_searched_directories() -> None:
    lines, searched = xla_toolchain_lines(quiet(XLA_LOG.splitlines()))
    assert searched == [
        "./cuda_sdk_lib",
        "/usr/local/cuda-12.2",
        "/usr/local/cuda",
        "/opt/conda/lib/python3.11/site-packages/tensorflow/python/platform/../../../nvidia/cuda_nvcc",
    ]
    assert any("libdevice is required by this HLO module" in ln for ln in lines)
    assert not any("placer.cc" in ln for ln in lines)


def test_jit_compile_failure_is_xla_toolchain_missing_with_its_own_evidence() -> None:
    lines, searched = xla_toolchain_lines(XLA_LOG.splitlines())
    run = XlaRun("/GPU:0", False, None, "InternalError: libdevice not found at ./libdevice.10.bc [Op:__inference_body_7]",
                 tuple(lines), tuple(searched))
    [f] = [f for f in evaluate(tf_facts(xla=(run,)), env={"XLA_FLAGS": None}) if f.id == "xla-toolchain-missing"]
    assert f.layer == "libraries" and f.severity.value == "degraded"
    # Distinct from the libraries probe's file search: the evidence is a real jit_compile failure.
    assert f.evidence["source"] == "a real jit_compile=True call"
    assert f.evidence["searched"][1] == "/usr/local/cuda-12.2"
    assert "libdevice" in f.summary and "nvidia-cuda-nvcc-cu12" in f.remedy


def test_ptxas_that_refuses_the_gpu_is_named_with_its_path() -> None:
    """TensorFlow 2.21's words (tests/logs/tf-2.21-fake-pascal-jit-with-cuda13-ptxas.log) when the ptxas XLA
    found first, CUDA 13.0's, refuses a compute capability 6.1 GPU."""
    error = "UnimplementedError: /usr/local/bin/ptxas ptxas too old. Falling back to the driver to compile. [Op:__inference_f_10]"
    run = XlaRun("/GPU:0", False, None, error, (), ())
    [f] = [f for f in evaluate(tf_facts(xla=(run,), cc=(6, 1)), env={"XLA_FLAGS": None}) if f.id == "xla-toolchain-missing"]
    assert f.severity.value == "degraded" and f.evidence["ptxas"] == "/usr/local/bin/ptxas"
    assert "(/usr/local/bin/ptxas) cannot compile for this GPU" in f.summary
    assert "nvidia-cuda-nvcc-cu12" in f.remedy and "placement-failed" not in [
        g.id for g in evaluate(tf_facts(xla=(run,), cc=(6, 1)), env={"XLA_FLAGS": None})
    ]


def test_force_allow_growth_values() -> None:
    assert ids(evaluate(tf_facts(), env={"TF_FORCE_GPU_ALLOW_GROWTH": "1"})).count("memory-config-failed") == 1
    assert "memory-config-failed" not in ids(evaluate(tf_facts(), env={"TF_FORCE_GPU_ALLOW_GROWTH": "false"}))


def malloc_async_crash() -> ProbeOutcome[MemoryConfigFacts]:
    exit_ = ChildExit("crashed", -6, "SIGABRT", 3.1, (MALLOC_ASYNC_FATAL,), "cuda-malloc-async: initialise devices", None)
    return ProbeOutcome("cuda-malloc-async", exit_, None)


def test_cuda_malloc_async_abort_has_its_own_id_unless_the_environment_uses_it() -> None:
    """Tried with --gpucheck-deep where nothing uses it: a note of its own id (one id, one cause at one
    severity); where the environment sets it, every TensorFlow program dies: memory-config-failed."""
    found = evaluate(tf_facts(), cuda_malloc_async=malloc_async_crash())
    assert "memory-config-failed" not in ids(found)
    [info] = [f for f in found if f.id == "cuda-malloc-async-unsupported"]
    assert info.severity.value == "info" and info.evidence["signal"] == "SIGABRT"
    assert info.evidence["tensorflow_fatal"] == [MALLOC_ASYNC_FATAL]
    [blocker] = [
        f for f in evaluate(tf_facts(), env={"TF_GPU_ALLOCATOR": "cuda_malloc_async"}, cuda_malloc_async=malloc_async_crash())
        if f.id == "memory-config-failed"
    ]
    assert blocker.severity.value == "blocker" and "Unset TF_GPU_ALLOCATOR" in blocker.remedy


def gpu_memory(limit: int | None = 1024, used: int | None = 600, error: str | None = None, free: int = 78752) -> GpuMemory:
    return GpuMemory("/GPU:0", "0000:00:06.0", limit, {"current": 1 << 26, "peak": 1 << 26}, free, 81559, (), error, used)


def test_memory_limit_judged_by_what_tensorflow_created() -> None:
    """The main TensorFlow process gives every GPU a memory_limit; TensorFlow's "Created device ... with N MB"
    says whether it took it. No over-limit allocation (TensorFlow's allocator retries it for 10 s)."""
    assert "memory-config-failed" not in ids(evaluate(tf_facts(memory=(gpu_memory(),), memory_limit_mb=1024)))
    [f] = [
        f for f in evaluate(tf_facts(memory=(gpu_memory(limit=78752),), memory_limit_mb=1024))
        if f.id == "memory-config-failed"
    ]
    assert f.severity.value == "degraded" and f.subject == "memory-limit"
    assert f.evidence["created_with_mb"] == {"/GPU:0": 78752}


def growth(applied: bool | None, memory: tuple[GpuMemory, ...], error: str | None = None, why: str | None = None) -> Any:
    cfg = MemoryConfigFacts("memory-growth", "set_memory_growth", applied, error, memory, ("/device:GPU:0",), None, why, 64)
    return ProbeOutcome("memory-growth", OK_EXIT, cfg)


def test_memory_growth_judged_by_what_the_process_holds() -> None:
    from gpucheck.frameworks.tensorflow.memory import judge_growth

    # Growth on: the process holds the context and about what it allocated.
    assert judge_growth([gpu_memory(used=650)]) == (True, None, None)
    # Growth off whatever get_memory_growth answers: the process took the GPU.
    applied, error, _ = judge_growth([gpu_memory(used=78752)])
    assert applied is False and error is not None and "hold 78752 MiB more" in error
    # Other processes hold the memory: not a setting that failed, not checked (NVML names them).
    held = dataclasses.replace(gpu_memory(used=None, error="ResourceExhaustedError: OOM when allocating", free=40),
                               nvml_processes=((4242, 78700),))
    applied, error, why = judge_growth([held])
    assert applied is None and error is None and why is not None and "pid 4242 (78700 MiB)" in why
    # NVML does not list the process (a container): not checked.
    assert judge_growth([gpu_memory(used=None)])[0] is None
    # No device to allocate on: not checked, never "applied" without a reading.
    assert judge_growth([]) == (None, None, "TensorFlow created no GPU device to allocate on")
    # Judged by what the allocation added to the context the process already held (a 2.5 GiB context with
    # CUDA_MODULE_LOADING=EAGER is no sign of growth being off).
    eager = dataclasses.replace(gpu_memory(used=2600), process_base_mb=2500)
    assert judge_growth([eager]) == (True, None, None)

    failed = evaluate(tf_facts(), memory_growth=growth(False, (gpu_memory(used=78752),), "holds 78752 MiB"))
    assert [f.severity.value for f in failed if f.id == "memory-config-failed"] == ["degraded"]
    unchecked = growth(None, (held,), why="a 64 MiB allocation on /GPU:0 failed with 40 MiB free")
    assert "memory-config-failed" not in ids(evaluate(tf_facts(), memory_growth=unchecked))
    assert not_judged(base_facts(memory_growth=unchecked)) == "memory growth: a 64 MiB allocation on /GPU:0 failed with 40 MiB free"


def test_tensorflow_dropping_growth_with_logical_devices_is_a_note_of_its_own() -> None:
    [f] = [f for f in evaluate(tf_facts(growth_kept_with_logical_devices=False)) if f.id == "memory-growth-dropped"]
    assert f.severity.value == "info" and "TF_FORCE_GPU_ALLOW_GROWTH=true" in f.remedy
    assert "memory-growth-dropped" not in ids(evaluate(tf_facts(growth_kept_with_logical_devices=True)))


def test_placement_step_dying_after_the_framework_facts() -> None:
    """The step shares the framework child: the child ends "ok" (framework facts written) with a signal."""
    died = ChildExit("ok", -6, "SIGABRT", 5.0, ("F0000 something fatal",), "placement: numerics on /GPU:0", None)
    facts = base_facts(placement=ProbeOutcome("placement", died, None))
    [f] = placement_rules(facts, Settings())
    assert f.id == "placement-failed" and "numerics on /GPU:0" in f.summary
    async_died = ChildExit("ok", -6, "SIGABRT", 5.0, (MALLOC_ASYNC_FATAL,), "placement: initialise devices", None)
    [g] = placement_rules(base_facts(placement=ProbeOutcome("placement", async_died, None)), Settings())
    assert g.id == "memory-config-failed" and g.severity.value == "blocker"
    # A child that died before the framework facts: the framework rules' finding, not ours.
    crashed = ChildExit("crashed", -11, "SIGSEGV", 1.0, (), "tf.config.list_physical_devices", None)
    assert placement_rules(base_facts(placement=ProbeOutcome("placement", crashed, None)), Settings()) == []


@pytest.mark.parametrize(
    ("cc", "summary"),
    [((6, 1), "*little speed*"), ((7, 5), "*float16 (not bfloat16)*"), ((8, 0), "*bfloat16 and float16*")],
)
def test_mixed_precision_advice_by_compute_capability(cc: tuple[int, int], summary: str) -> None:
    import fnmatch

    [f] = [f for f in evaluate(tf_facts(cc=cc)) if f.id == "mixed-precision-available"]
    assert f.severity.value == "info" and fnmatch.fnmatch(f.summary, summary), f.summary


def test_memory_growth_advice_from_nvml_processes() -> None:
    gpu = NvmlGpu(0, None, name="A100", cc_major=8, cc_minor=0, processes=(NvmlProcess(77, 1 << 30, "python"),))
    lib = LibraryLoad("libnvidia-ml.so.1", True, None, None)
    nvml = ProbeOutcome("nvml", OK_EXIT, NvmlFacts(lib, None, "550.54.15", 1, gpus=(gpu,)))
    [f] = [f for f in evaluate(None, nvml=nvml) if f.id == "memory-growth-advised"]
    assert f.evidence["gpus"][0]["processes"][0]["pid"] == 77
    assert not [f for f in evaluate(None, env={"TF_FORCE_GPU_ALLOW_GROWTH": "true"}, nvml=nvml) if f.id == "memory-growth-advised"]
    # From the placement step's own NVML snapshot, when TensorFlow registers the GPU.
    mem = GpuMemory("/GPU:0", "0000:10:1c.0", 38000, {"current": 1 << 26, "peak": 1 << 26}, 38500, 40960, ((77, 1024),), None)
    [g] = [f for f in evaluate(tf_facts(memory=(mem,))) if f.id == "memory-growth-advised"]
    assert g.evidence["gpus"][0]["tf_limit_mb"] == 38000


def test_bus_ids_of_nvml_and_tensorflow_agree() -> None:
    nvml, tensorflow = pci_key("00000000:3B:00.0"), pci_key("0000:3b:00.0")
    assert nvml is not None and tensorflow is not None
    assert nvml.text == tensorflow.text == "0000:3b:00.0"
    assert pci_key("garbage") is None
    # One grammar for every spelling either former reader took: no domain, any hex width, upper or lower case.
    assert pci_key("3B:00.0") == pci_key(" 00000000:3b:0.0 ") == pci_key("0000:3b:00.0")
    assert pci_key(None) is None and pci_key("0000:3b:00") is None


def test_grandchildren_die_with_their_parent(tmp_path: Any) -> None:
    """A grandchild started with DIE_WITH_PARENT_ENV is killed by the kernel when its parent dies."""
    grandchild = (
        "import time; from gpucheck.probes import child; child._die_with_parent(); time.sleep(60)"
    )
    parent = (
        "import os, subprocess, sys; "
        f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}], env={{**os.environ, {DIE_WITH_PARENT_ENV!r}: str(os.getpid())}}); "
        "print(p.pid, flush=True); import time; time.sleep(1.0)"
    )
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=30, check=True)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # A zombie of an exited parent is reaped by init; /proc shows its state until then.
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split()[2] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    pytest.fail("the grandchild outlived its parent")


def test_grandchild_whose_parent_is_already_gone_leaves() -> None:
    env = {**os.environ, DIE_WITH_PARENT_ENV: "1"}
    code = "from gpucheck.probes import child; child._die_with_parent(); print('still here')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30, check=False)
    assert out.returncode == 3 and "still here" not in out.stdout


def test_staged_probe_leaves_at_its_deadline_with_what_it_wrote() -> None:
    """After its first result, a staged probe (framework facts, then placement) stops itself before the
    parent's timeout would kill it and lose everything: exit code DEADLINE_EXIT."""
    from gpucheck.protocol import DEADLINE_EXIT

    code = "import time; from gpucheck.probes import child; child._deadline_watchdog(time.monotonic()); time.sleep(20)"
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False,
                         env={**os.environ, "GPUCHECK_TIMEOUT": "2"})
    assert out.returncode == DEADLINE_EXIT and time.monotonic() - start < 10
    assert "stopped at its deadline" in out.stderr
    late = ChildExit("ok", DEADLINE_EXIT, None, 58.0, (), "placement: numerics on /GPU:0", None)
    [f] = placement_rules(base_facts(placement=ProbeOutcome("placement", late, None)), Settings())
    assert f.id == "placement-failed" and f.severity.value == "degraded"
    assert "did not finish within 60 s" in f.summary and "numerics on /GPU:0" in f.summary


def test_a_step_that_overruns_its_budget_leaves_the_facts_before_it(tmp_path: Any) -> None:
    """Each step of the TensorFlow child is bounded: a step that overruns ends the child with DEADLINE_EXIT
    and the facts of the steps before it stand; the rules name the step and its budget."""
    from gpucheck.protocol import DEADLINE_EXIT

    out = tmp_path / "facts.json"
    code = (
        "import time\n"
        "from gpucheck.probes import child\n"
        "from gpucheck.protocol import Checkpoint, stage\n"
        "def steps():\n"
        "    yield Checkpoint({'step': 1}, 1.0)\n"
        "    stage('placement: a step that hangs')\n"
        "    time.sleep(20)\n"
        "    yield Checkpoint({'step': 2}, None)\n"
        f"child.load_target = lambda target: steps\nchild.main(['gpucheck.probes.x:y', {str(out)!r}])\n"
    )
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False,
                          env={**os.environ, "GPUCHECK_TIMEOUT": "60"})
    assert proc.returncode == DEADLINE_EXIT and time.monotonic() - start < 10, proc.stderr
    assert json.loads(out.read_text()) == {"step": 1}
    lines = tuple(proc.stderr.splitlines())
    assert "gpucheck: the step did not finish within its 1 s" in lines
    late = ChildExit("ok", DEADLINE_EXIT, None, 1.2, lines, "placement: a step that hangs", None)
    [f] = placement_rules(base_facts(placement=ProbeOutcome("placement", late, None)), Settings())
    assert f.id == "placement-failed" and "within its 1 s (a share of the 60 s timeout)" in f.summary
    assert "a step that hangs" in f.summary


def test_a_child_killed_at_the_parents_timeout_keeps_its_framework_facts() -> None:
    """A TensorFlow child that hangs in a C call its own watchdog cannot interrupt is killed at the parent's
    timeout; the facts it wrote stand: no framework-hung, the step that did not finish is named."""
    from gpucheck.frameworks.tensorflow.rules.framework import framework_rules

    hung = ChildExit("timeout", -9, "SIGKILL", 60.0, (), "placement: XLA on /GPU:0", "no answer within 60 s")
    fw = FrameworkFacts(True, None, "2.21.0", None, {"is_cuda_build": True}, True, (), (), None)
    facts = base_facts(
        **{**tf_facts().outcomes(hung), "framework": ProbeOutcome("framework", hung, fw)},
    )
    assert "framework-hung" not in ids(framework_rules(facts, Settings()))
    [f] = [f for f in placement_rules(facts, Settings()) if f.subject == "placement step"]
    assert f.id == "placement-failed" and "XLA on /GPU:0" in f.summary and "within 60 s" in f.summary
    # Without facts, a hang before the framework facts is framework-hung, as before.
    silent = base_facts(framework=ProbeOutcome("framework", hung, None))
    assert ids(framework_rules(silent, Settings())) == ["framework-hung"]
