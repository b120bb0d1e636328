"""The placement layer through the full ``pytest --gpucheck`` path, with the real TensorFlow CUDA wheel.

On this host TensorFlow registers no GPU: an op pinned to /GPU:0 is really refused with soft placement
off and really lands on the CPU with it on; the multi-device step really runs across logical CPU
devices. Fake machines (fake libcuda + libnvidia-ml and a host view with a GPU) make the lower layers
pass, so that TensorFlow's own GPU initialisation is what fails (this environment has no CUDA runtime):
the placement checks are then blocked by that, not by ``no-nvidia-gpu``.

Through the full path: ``placement-failed`` and ``soft-placement-fallback`` (real TensorFlow, this host
and fake machines), ``memory-config-failed`` (TF_FORCE_GPU_ALLOW_GROWTH="True", which TensorFlow
ignores), ``framework-gpu-init-failed`` from the placement step (real TensorFlow lists a fake GPU and
fails creating its devices), and the advice ``mixed-precision-available`` / ``memory-growth-advised``.

On a fake GPU that TensorFlow really registers and really places ops on (fake libcuda, cudart, cuBLAS and
NVML complete enough for TensorFlow 2.21 to create its device; kernels are accepted and not run, see
tests/fakes/libcuda.c): ``numerical-mismatch`` from the GPU's results (tests/scenarios/cuda/gpu-outputs-stay-zero.json)
and ``memory-config-failed`` from TensorFlow's real cuda_malloc_async abort
(tests/scenarios/cuda/cuda-malloc-async-without-memory-pools.json), with the placement facts checked below.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import GpucheckRun, SharedRuns, tensorflow_facts

PLACEMENT_CHECKS = (
    "test_gpu_accepts_pinned_ops",
    "test_ops_run_where_asked",
    "test_gpu_results_match_cpu_reference",
    "test_memory_settings_apply",
)

#: A cloud VM with one A100 (cc 8.0), driver 550 (the lower layers pass); modelled on the nvml
#: scenarios t4-cloud-vm / another-process-holds-75gb (AWS p4d, https://aws.amazon.com/ec2/instance-types/p4/).
#: No CUDA runtime is installed here, so TensorFlow registers no GPU: "Cannot dlopen some GPU libraries".
A100_VM: dict[str, Any] = {
    "driver_version": "550.54.15",
    "host": {
        "pci": [{"bus_id": "0000:10:1c.0", "vendor": "0x10de", "device": "0x20b0", "class": "0x030200", "driver": "nvidia"}],
        "module_version": "550.54.15",
        "dev": ["nvidiactl", "nvidia-uvm", "nvidia0"],
    },
    "libraries": ["libcuda", "libnvml"],
    "cuda": {"init": 0, "driver_version": 12040},
    "gpus": [
        {
            "name": "NVIDIA A100-SXM4-40GB",
            "pci_bus_id": "00000000:10:1C.0",
            "cc_major": 8,
            "cc_minor": 0,
            "memory_total": 42949672960,
            "memory_used": 2147483648,
            "processes": [{"pid": 4242, "used_memory": 2147483648, "name": "python serve.py"}],
        }
    ],
}


#: The same machine with every CUDA 12 library TensorFlow dlopens (fakes at the C ABI, installed under
#: their own versions as the nvidia-* wheels would be): TensorFlow gets past its library check and still
#: registers no GPU (modelled on tests/scenarios/cuda/h100-fresh-ci-container.json).
A100_VM_WITH_LIBRARIES: dict[str, Any] = {
    **A100_VM,
    "libraries": [
        "libcuda", "libnvml", "libcudart@12.5.82", "libcublas@12.5.3.2", "libcublasLt@12.5.3.2", "libcufft@11.2.3.61",
        "libcusolver@11.6.3.83", "libcusparse@12.5.1.3", "libnvJitLink@12.5.82", "libcudnn@9.3.0",
    ],
    # The runtime refuses cudaGetDevice (cudaErrorInsufficientDriver), as where runtime and driver disagree.
    "cudart": {"get_device": 35},
}


def checks_by_name(run: GpucheckRun) -> dict[str, dict[str, Any]]:
    return {c["nodeid"].split("::")[-1]: c for c in run.report["checks"]}


def runs_for(report: dict[str, Any], requested: str) -> dict[tuple[str, bool], dict[str, Any]]:
    tf = tensorflow_facts(report)
    return {(r["mode"], r["soft_placement"]): r for r in tf["runs"] if r["requested"] == requested}


@pytest.fixture
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip reasons in -v lines are cut to the terminal's width."""
    monkeypatch.setenv("COLUMNS", "250")


@pytest.mark.usefixtures("wide_terminal")
def test_this_host_gpu0_refused_and_soft_placed_on_cpu(run_gpucheck: Callable[..., GpucheckRun]) -> None:
    """The acceptance point: on this host the facts show, for /GPU:0, TensorFlow's hard-placement error
    text and the device the soft-placed op ran on; the placement checks are skipped as blocked by
    no-nvidia-gpu, and the placement findings are not root causes of their own. With --gpucheck-deep, the
    numerics and XLA steps run on the CPU too (by default they run only on GPUs): the tolerances hold for
    results really computed."""
    run = run_gpucheck("-v", "--gpucheck-deep")
    assert run.result.ret == 1, run.result.stdout.str()
    assert run.root_cause == "no-nvidia-gpu"

    runs = runs_for(run.report, "/GPU:0")
    eager_hard, function_hard = runs[("eager", False)], runs[("function", False)]
    assert not eager_hard["ok"] and eager_hard["error_type"] == "InvalidArgumentError"
    # TensorFlow's exact text, kept whole.
    assert eager_hard["error"].startswith(
        "Could not satisfy device specification '/job:localhost/replica:0/task:0/device:GPU:0'. enable_soft_placement=0."
    )
    assert "Supported device types [CPU]" in eager_hard["error"]
    assert not function_hard["ok"] and "Unable to find any devices for spec /device:GPU:0" in function_hard["error"]
    for mode in ("eager", "function"):
        soft = runs[(mode, True)]
        assert soft["ok"] and soft["device"] == "/job:localhost/replica:0/task:0/device:CPU:0"

    # A soft-placement fallback is detected: the GPU spec silently landed on the CPU.
    fallback = run.finding("soft-placement-fallback")
    assert fallback["blocked_by"] == "no-nvidia-gpu" and fallback["subject"] == "/GPU:0"
    assert fallback["evidence"]["eager_ran_on"].endswith("device:CPU:0")
    assert fallback["evidence"]["function_ran_on"].endswith("device:CPU:0")
    # ... and the placement log of the training step lists the ops that asked for the GPU, and why.
    assert any(line.startswith("MatMul (MatMul, float32) ran on device:CPU:0: no GPU device")
               for line in fallback["evidence"]["training_step_ops_on_cpu"])
    hard = run.finding("placement-failed")
    assert hard["blocked_by"] == "no-nvidia-gpu" and hard["subject"] == "/GPU:0"
    assert hard["evidence"]["eager_error"] == f"InvalidArgumentError: {eager_hard['error']}"

    checks = checks_by_name(run)
    for name in PLACEMENT_CHECKS:
        assert checks[name]["outcome"] == "skipped", checks[name]
    assert_placement_checks_blocked(run, "no-nvidia-gpu")
    assert "placement" in [entry["layer"] for entry in run.report["layers"] if entry["state"] == "blocked"]

    tf = tensorflow_facts(run.report)
    # Numerics, XLA and the multi-device path ran for real (on the CPU: there is no GPU; --gpucheck-deep).
    assert {(n["op"], n["precision"]) for n in tf["numerics"]} >= {
        ("matmul", "float32"), ("matmul", "float16"), ("matmul", "bfloat16"), ("conv2d", "float32"), ("reduce_sum", "float32")
    }
    assert all(n["ok"] and 0 < n["error"] <= n["tolerance"] for n in tf["numerics"]), tf["numerics"]
    assert [x["ok"] for x in tf["xla"]] == [True]
    multi = tf["multi_device"]
    assert multi["kind"] == "logical-cpus" and multi["ok"]
    assert [d.rsplit("/", 1)[-1] for d in multi["ran_on"]] == ["device:CPU:0", "device:CPU:1"]
    assert tf["errors"] == {}
    # The placement log stays out of the output kept as evidence.
    tail = run.report["facts"]["framework"]["exit"]["stderr_tail"]
    assert not [ln for ln in tail if "Executing op" in ln or "placer.cc" in ln]


def test_invalid_force_allow_growth_is_memory_config_failed(
    run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TensorFlow compares TF_FORCE_GPU_ALLOW_GROWTH with "true"/"false" exactly: "True" is ignored."""
    monkeypatch.setenv("TF_FORCE_GPU_ALLOW_GROWTH", "True")
    run = run_gpucheck()
    failed = run.finding("memory-config-failed")
    assert failed["layer"] == "resources" and failed["severity"] == "degraded"
    assert failed["evidence"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "True"
    assert failed["blocked_by"] == "no-nvidia-gpu"
    assert checks_by_name(run)["test_memory_settings_apply"]["finding_ids"] == ["memory-config-failed"]
    assert run.report["facts"]["tf_setup"]["facts"]["env"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "True"


def assert_placement_checks_blocked(run: GpucheckRun, by: str) -> None:
    checks = checks_by_name(run)
    for name in PLACEMENT_CHECKS:
        assert checks[name]["outcome"] == "skipped", checks[name]
    run.result.stdout.fnmatch_lines(
        [f"*checks_memory.py::test_memory_settings_apply SKIPPED (blocked by {by})*"]
        + [f"*checks_placement.py::{name} SKIPPED (blocked by {by})*" for name in PLACEMENT_CHECKS[:-1]]
    )


@pytest.mark.usefixtures("wide_terminal")
def test_fake_gpu_machine_without_cuda_runtime(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """The lower layers pass on a fake A100 machine; TensorFlow registers no GPU (no CUDA runtime). The
    placement findings are still produced from real TensorFlow behaviour, and blocked by that failure
    rather than by no-nvidia-gpu; advice comes from the GPU's compute capability."""
    fake_machine(A100_VM)
    run = run_gpucheck("-v")
    assert run.root_cause == "cuda-runtime-missing", [(f["id"], f["layer"]) for f in run.report["findings"]]
    for fid in ("placement-failed", "soft-placement-fallback"):
        f = run.finding(fid)
        assert f["blocked_by"] == "cuda-runtime-missing", f
        assert f["subject"] == "/GPU:0"
    assert run.finding("placement-failed")["evidence"]["registered_gpus"] == []
    assert_placement_checks_blocked(run, "cuda-runtime-missing")

    advice = run.finding("mixed-precision-available")
    assert advice["severity"] == "info" and advice["layer"] == "performance"
    assert advice["evidence"]["gpus"][0]["compute_capability"] == "8.0"
    assert advice["evidence"]["gpus"][0]["bfloat16_and_tf32"] is True
    growth = run.finding("memory-growth-advised")
    assert growth["severity"] == "info"
    assert growth["evidence"]["gpus"][0]["processes"][0]["pid"] == 4242
    # Memory growth was asked beside the main TensorFlow process (the host shows a GPU) and not judged: TensorFlow
    # registers no GPU to configure, which its child tells from the libraries the loader finds, before paying for an
    # import that would say the same (the main process's own import, above, registered none).
    growth_facts = run.report["facts"]["memory_growth"]
    assert growth_facts["facts"]["not_checked"].startswith(
        "TensorFlow registers no GPU: the loader finds no libcudart.so.12, libcublas.so.12,"), growth_facts["facts"]
    assert not any("tensorflow" in line.lower() for line in growth_facts["exit"]["stderr_tail"]), growth_facts["exit"]
    assert "memory-config-failed" not in run.finding_ids


@pytest.mark.usefixtures("wide_terminal")
def test_fake_gpu_machine_where_tensorflow_cannot_create_its_devices(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """With every CUDA library (fakes), real TensorFlow lists the fake A100 (cc 8.0, from the fake driver)
    but creating its devices fails in the fake CUDA runtime ("cudaGetDevice() failed", as on machines whose
    runtime and driver disagree). Only the placement step, which initialises the devices, sees it: one
    framework-gpu-init-failed, not a cascade of every op that then fails, and no memory configuration."""
    fake_machine(A100_VM_WITH_LIBRARIES)
    run = run_gpucheck("-v")
    assert run.root_cause == "framework-gpu-init-failed", [(f["id"], f["layer"]) for f in run.report["findings"]]
    rc = run.report["root_cause"]
    assert rc["subject"] == "device initialisation"
    assert "cudaGetDevice() failed" in rc["evidence"]["error"]
    assert rc["evidence"]["gpus"] == ["NVIDIA A100-SXM4-40GB"]
    assert run.finding_ids.count("framework-gpu-init-failed") == 1
    assert "placement-failed" not in run.finding_ids and "memory-config-failed" not in run.finding_ids
    tf = tensorflow_facts(run.report)
    assert [g["details"]["compute_capability"] for g in tf["gpus"]] == [[8, 0]]
    growth = run.report["facts"]["memory_growth"]["facts"]
    assert growth["applied"] is None and growth["not_checked"].startswith("TensorFlow could not create its GPU devices")
    assert_placement_checks_blocked(run, "framework-gpu-init-failed")


def test_fake_gpu_machine_where_cuinit_fails_in_tensorflow(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """Another way TensorFlow's GPU start fails: cuInit returns CUDA_ERROR_UNKNOWN (999) in every process,
    TensorFlow's too. The root cause is the driver's; the placement step still reports what TensorFlow
    did with /GPU:0, and the placement checks are blocked by the driver finding."""
    scenario = {**A100_VM, "cuda": {"init": 999, "driver_version": 12040}}
    fake_machine(scenario)
    run = run_gpucheck("-rs")
    assert run.root_cause == "cuda-init-failed", run.finding_ids
    runs = runs_for(run.report, "/GPU:0")
    assert runs[("eager", False)]["error_type"] == "InvalidArgumentError"
    assert runs[("eager", True)]["device"].endswith("device:CPU:0")
    assert run.finding("soft-placement-fallback")["blocked_by"] == "cuda-init-failed"
    checks = checks_by_name(run)
    for name in PLACEMENT_CHECKS:
        assert checks[name]["outcome"] == "skipped", checks[name]


def test_memory_setting_process_that_aborts_is_a_fact(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    """A TensorFlow process of a memory setting that dies (here a real abort: the fake driver's cuInit calls
    abort(), as TensorFlow's LOG(FATAL) does for an unsupported cuda_malloc_async) is a fact and then
    memory-config-failed for a setting the user relies on, a note of its own id for one nothing uses; never
    a crash of gpucheck. The probes are started through the runner the diagnosis uses. Slow: each of the two
    children imports TensorFlow before the fake cuInit aborts it."""
    from gpucheck.facts import ProbeOutcome, from_json
    from gpucheck.frameworks.tensorflow.facts import MemoryConfigFacts
    from gpucheck.frameworks.tensorflow.rules.memory import memory_rules
    from gpucheck.frameworks.tensorflow.units import MALLOC_ASYNC_PROBE, MEMORY_GROWTH_PROBE
    from gpucheck.isolation import ChildRunner
    from gpucheck.settings import Settings
    from tests.test_placement_rules import base_facts

    # With every CUDA library, so that TensorFlow gets as far as the driver (without them each child tells from the
    # loader's search that TensorFlow registers no GPU, and never imports it).
    fake_machine({**A100_VM_WITH_LIBRARIES, "cuda": {"init": "abort", "driver_version": 12040}})
    outcomes = {}
    for probe in (MEMORY_GROWTH_PROBE, MALLOC_ASYNC_PROBE):
        exit_, data = ChildRunner().run(probe.target, 120, dict(probe.env))
        assert exit_.status == "crashed" and exit_.signal == "SIGABRT" and data is None, exit_
        facts = from_json(MemoryConfigFacts, data) if data is not None else None
        outcomes[probe.field] = ProbeOutcome(probe.name, exit_, facts)
    findings = memory_rules(base_facts(**outcomes), Settings())
    by_subject = {f.subject: f for f in findings}
    assert by_subject["memory-growth"].id == "memory-config-failed"
    assert by_subject["memory-growth"].severity.value == "degraded"
    assert by_subject["memory-growth"].evidence["signal"] == "SIGABRT"
    assert by_subject["cuda-malloc-async"].id == "cuda-malloc-async-unsupported"
    assert by_subject["cuda-malloc-async"].severity.value == "info"


def test_fake_gpu_that_tensorflow_registers_places_ops_and_computes_nothing(gpucheck_shared: SharedRuns) -> None:
    """Real TensorFlow creates /GPU:0 on the fake Quadro P4000 and runs ops there: hard placement on /GPU:0
    succeeds on the GPU, /GPU:1 is refused with TensorFlow's own error naming the device that exists, soft
    placement of /GPU:1 runs on /GPU:0 (not on the CPU), and the results, which no kernel computed, are
    caught against the float64 CPU reference. The scenario's run is shared with tests/test_cuda_scenarios.py."""
    scenario = json.loads((Path(__file__).parent / "scenarios/cuda/gpu-outputs-stay-zero.json").read_text())
    run = gpucheck_shared.run("-rs", scenario=scenario)
    assert run.root_cause == "numerical-mismatch", [(f["id"], f["subject"]) for f in run.report["findings"]]
    tf = tensorflow_facts(run.report)
    assert [g["details"]["device_name"] for g in tf["gpus"]] == ["Quadro P4000"]
    assert "/device:GPU:0" in " ".join(tf["logical_devices"])
    gpu0 = runs_for(run.report, "/GPU:0")
    for (mode, soft), r in gpu0.items():
        assert r["ok"] and r["device"].endswith("/device:GPU:0"), (mode, soft, r)
    gpu1 = runs_for(run.report, "/GPU:1")
    hard = gpu1[("eager", False)]
    assert not hard["ok"] and hard["error_type"] == "InvalidArgumentError", hard
    # TensorFlow's refusal names the device that does exist.
    assert "All available devices [/job:localhost/replica:0/task:0/device:GPU:0" in hard["error"], hard["error"]
    assert not gpu1[("function", False)]["ok"]
    # With soft placement the op asked for the missing /GPU:1 runs on the GPU that exists, not on the CPU.
    for mode in ("eager", "function"):
        soft = gpu1[(mode, True)]
        assert soft["ok"] and soft["device"].endswith("/device:GPU:0"), (mode, soft)
    assert "soft-placement-fallback" not in run.finding_ids
    assert [list(d) for d in tf["created_devices"]] == [["GPU:0", "00000000:01:00.0"]]
    evidence = run.finding("numerical-mismatch")["evidence"]
    matmul = next(c for c in evidence["checks"] if c["op"] == "matmul" and c["precision"] == "float32")
    assert matmul["ran_on"].endswith("/device:GPU:0") and matmul["error"] > matmul["tolerance"]
    # The training step ran its ops on the GPU (none fell back to the CPU).
    step = tf["training_step"]
    assert step["ok"] and step["on_gpu"] == step["placed_ops"] > 0, step


def test_cuda_malloc_async_abort_is_the_root_cause(gpucheck_shared: SharedRuns) -> None:
    """TF_GPU_ALLOCATOR=cuda_malloc_async set by the user on a GPU without memory pools: TensorFlow's own
    LOG(FATAL) kills it creating its devices; that line is the evidence of memory-config-failed, a blocker.
    The scenario's run is shared with tests/test_cuda_scenarios.py."""
    scenario = json.loads(
        (Path(__file__).parent / "scenarios/cuda/cuda-malloc-async-without-memory-pools.json").read_text()
    )
    run = gpucheck_shared.run("-rs", scenario=scenario)
    assert run.root_cause == "memory-config-failed", [(f["id"], f["subject"]) for f in run.report["findings"]]
    text = json.dumps(run.report["root_cause"])
    assert "TF_GPU_ALLOCATOR=cuda_malloc_async isn't currently supported on GPU id 0" in text
