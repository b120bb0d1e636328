"""Issue 13: the performance layer through the full ``pytest --gpucheck --gpucheck-benchmarks`` path.

On this host (no GPU, the real TensorFlow 2.21 wheel): every kind of benchmark runs on the CPU and its
logical devices, with real per-round times and its figures, and pytest-benchmark's JSON says what it ran
on. The plan, the derived figures and the rules are also tested as pure functions on made facts.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import RUN_OPTIONS, GpucheckRun, SharedRuns
from gpucheck.frameworks.tensorflow.benchmarks import derive
from gpucheck.performance import plan as benchplan
from gpucheck.performance.facts import BenchmarkRun
from gpucheck.performance.rules import MIN_JUDGED_STEP_S


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-benchmark switches itself off in any process that inherits an xdist worker's variable: the
    runs below are separate pytest sessions, not workers."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)


KINDS = ("matpow", "matmul", "copy", "conv", "launch", "allreduce", "scaling")
#: pytest-benchmark's --benchmark-max-time for the full-path runs: each benchmark repeats its rounds for 0.1 s
#: instead of gpucheck's 0.8 s (2 s for the matmuls), at least its 5 rounds. What these tests check is what is
#: measured and how it is judged, not how steady a figure is; the benchmark run (tests/test_benchmarks.py) and
#: tools/gpu-acceptance.sh keep gpucheck's own times.
SHORT_S = 0.1
SHORT = (f"--benchmark-max-time={SHORT_S}",)


def benchmarks(path: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text())
    return {b["name"]: {**b, "_machine_info": data["machine_info"]} for b in data["benchmarks"]}


def test_every_benchmark_runs_on_the_cpu_host(run_gpucheck: Callable[..., GpucheckRun], tmp_path: Path) -> None:
    """Slow by what it checks: every benchmark of the plan measured for real on the CPU, each for its rounds
    (``gpucheck.frameworks.tensorflow.benchmarks``: at least MIN_ROUNDS over about MEASURE_S, the matmuls MEASURE_MATMUL_S)."""
    out = tmp_path / "a.json"
    run = run_gpucheck("--gpucheck-benchmarks", f"--benchmark-json={out}", "-p", "no:xdist", *SHORT, timeout=600)
    text = run.result.stdout.str()
    # The verdict is the host's (no GPU); the CPU benchmarks are not blocked by it.
    assert run.root_cause == "no-nvidia-gpu", text
    got = benchmarks(out)
    for kind in KINDS:
        assert any(kind in name for name in got), (kind, sorted(got))
    assert {n for n in got if n.startswith("test_scaling")} == {
        f"test_scaling[{m}-CPU-x{n}]" for m in ("towers", "mirrored") for n in (1, 2, 4)
    }
    assert "test_matpow_fallback[GPU:0-absent]" in got
    for name, b in got.items():
        # Real per-round times: as many rounds as measured, all positive, not all equal.
        stats = b["stats"]
        assert stats["rounds"] >= 5 and stats["min"] > 0 and stats["max"] > stats["min"], (name, stats)
        # --benchmark-max-time was honoured: past its minimum of rounds, a benchmark starts no round once its
        # rounds have lasted that long (the headline matmuls 2.5 times as long), so every round but the last
        # (at most the longest) fits in it.
        if stats["rounds"] > 5:
            bound = SHORT_S * (2.5 if name.startswith("test_matmul[") else 1)
            assert (stats["total"] - stats["max"]) * stats["iterations"] < bound, (name, stats)
        info = b["extra_info"]
        assert info["device"].startswith("CPU:"), (name, info)
        gi = b["_machine_info"]["gpucheck"]
        assert set(gi) == {
            "driver", "cuda_driver", "cuda_build", "cuda_loaded", "cudnn_build", "cudnn_loaded", "tensorflow", "gpus"
        }
        assert gi["tensorflow"] == "2.21.0" and gi["gpus"] == [] and gi["driver"] is None
    assert got["test_matmul[CPU:0-float32]"]["extra_info"]["tflops"] > 0
    assert got["test_matmul[CPU:0-float32]"]["extra_info"]["shape"] == [1024, 1024, 1024]
    assert got["test_copy[CPU:0-host]"]["extra_info"]["gbps"] > 0
    assert got["test_launch[CPU:0-function]"]["extra_info"]["latency_us"] > 0
    ar = got["test_allreduce[CPU-x4]"]["extra_info"]
    assert ar["busbw_gbps"] == pytest.approx(ar["algbw_gbps"] * 2 * 3 / 4)
    for n in (1, 2, 4):
        info = got[f"test_scaling[towers-CPU-x{n}]"]["extra_info"]
        assert info["per_device_batch"] == 32 and info["devices"] == n and info["logical_devices"] is True
        assert info["efficiency"] == pytest.approx(info["speedup"] / n)
    assert got["test_matpow_fallback[GPU:0-absent]"]["extra_info"]["ran_on"].endswith("CPU:0")
    # Logical CPU devices share the cores: their scaling is reported, never judged.
    assert "scaling-inefficient" not in run.finding_ids
    assert [s["state"] for s in run.report["layers"] if s["layer"] == "performance"] == ["blocked"]
    assert run.report["facts"]["performance"]["facts"]["finished"] is True
    # pytest-benchmark's own compare reads the file.
    compare = subprocess.run(
        [str(Path(sys.executable).parent / "pytest-benchmark"), "compare", str(out)], capture_output=True, text=True, timeout=60
    )
    assert compare.returncode == 0 and "test_matmul[CPU:0-float32]" in compare.stdout, compare.stderr


def test_machine_info_for_a_users_own_benchmark(pytester: pytest.Pytester) -> None:
    """A user's own benchmark in a --gpucheck run says what it ran on, without --gpucheck-benchmarks."""
    pytester.makepyfile(
        test_mine="""
        def test_sum(benchmark):
            benchmark(sum, range(1000))
        """
    )
    out = pytester.path / "b.json"
    result = pytester.runpytest_subprocess(
        "--gpucheck", "--gpucheck-framework=none", f"--benchmark-json={out}", str(pytester.path / "test_mine.py"),
        *RUN_OPTIONS, timeout=120,
    )
    assert "test_sum" in result.stdout.str()
    data = json.loads(out.read_text())
    assert [b["name"] for b in data["benchmarks"]] == ["test_sum"]
    assert data["machine_info"]["gpucheck"]["gpus"] == [] and data["machine_info"]["gpucheck"]["tensorflow"] is None


def test_the_pinned_pytest_benchmark_takes_rounds_measured_elsewhere(pytester: pytest.Pytester) -> None:
    """The pin on pytest-benchmark's private way in (``gpucheck.performance.plugin``): the installed major is
    one the pin names, and ``BenchmarkFixture._make_stats(iterations)`` with one ``update`` per round, as
    ``Measured.record`` uses it, saves those rounds divided by the iterations, as its own timing would."""
    from importlib.metadata import version

    from gpucheck.performance.plugin import TESTED_PYTEST_BENCHMARK

    assert version("pytest-benchmark").split(".")[0] in TESTED_PYTEST_BENCHMARK
    pytester.makepyfile(
        test_fed="""
        def test_fed(benchmark):
            stats = benchmark._make_stats(4)
            for seconds in (0.4, 0.8, 1.2):
                stats.update(seconds)
            benchmark._mode = "fed"
        """
    )
    out = pytester.path / "b.json"
    result = pytester.runpytest_subprocess(f"--benchmark-json={out}", "-p", "no:gpucheck", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    stats = json.loads(out.read_text())["benchmarks"][0]["stats"]
    assert (stats["rounds"], stats["iterations"]) == (3, 4)
    assert (stats["min"], stats["median"], stats["max"]) == pytest.approx((0.1, 0.2, 0.3))


def test_the_default_run_has_no_benchmark(gpucheck_shared: SharedRuns) -> None:
    """This host's plainest run, shared with tests/test_report_file.py."""
    run = gpucheck_shared.run("--gpucheck-framework=none")
    assert "checks_performance" not in run.result.stdout.str()
    assert [s["state"] for s in run.report["layers"] if s["layer"] == "performance"] == ["not checked"]
    assert run.report["facts"].get("performance") is None


def test_no_benchmark_without_a_framework(run_gpucheck: Callable[..., GpucheckRun]) -> None:
    """--gpucheck-framework=none imports no TensorFlow: the benchmarks, which need it, are not collected."""
    run = run_gpucheck("--gpucheck-framework=none", "--gpucheck-benchmarks")
    assert "checks_performance" not in run.result.stdout.str()
    assert [s["state"] for s in run.report["layers"] if s["layer"] == "performance"] == ["not checked"]


# --- the plan and the derived figures, as pure functions ------------------------------------------------


def test_the_max_time_pytest_benchmark_was_given() -> None:
    """--benchmark-max-time reaches gpucheck's benchmarks only where given another value than pytest-benchmark's
    default (1.0): a run without it keeps gpucheck's own times. pytest-benchmark hands the value on as a string."""
    assert benchplan.max_time_option(None) is None
    assert benchplan.max_time_option("1.0") is None and benchplan.max_time_option("1") is None
    assert benchplan.max_time_option("0.1") == 0.1 and benchplan.max_time_option("2.5") == 2.5
    for bad in ("0", "-1", "nan", "inf", "", "x"):
        assert benchplan.max_time_option(bad) is None, bad
    assert benchplan.max_time_from_env(repr(0.25)) == 0.25 and benchplan.max_time_from_env("") is None


def test_the_plan_by_gpu_count() -> None:
    cpu_only = {s.name for s in benchplan.plan([])}
    assert not any("GPU:0-" in n and "absent" not in n for n in cpu_only)
    two = benchplan.plan([(9, 0), (7, 0)])
    names = {s.name for s in two}
    assert {"test_matmul[GPU:0-bfloat16]", "test_matmul[GPU:0-tf32]", "test_matmul[GPU:1-float16]"} <= names
    # A V100 (7.0) has no bfloat16 or TF32 Tensor Cores.
    assert "test_matmul[GPU:1-bfloat16]" not in names and "test_matmul[GPU:1-tf32]" not in names
    assert {"test_matpow[GPU:0+GPU:1]", "test_copy[GPU:0-GPU:1]", "test_allreduce[GPU-x2]"} <= names
    assert {"test_scaling[towers-GPU-x1]", "test_scaling[mirrored-GPU-x2]", "test_matpow_fallback[GPU:2-absent]"} <= names
    assert all(s.physical for s in two if "GPU" in s.param and "absent" not in s.param)
    assert benchplan.from_env(benchplan.to_env(two)) == two
    # MirroredStrategy reduces with NCCL where the loader finds it, by copies where it does not.
    assert {s.reduction for s in two if s.kind == "allreduce" and "GPU" in s.param} == {"nccl"}
    without = benchplan.plan([(9, 0), (9, 0)], nccl=False)
    assert {s.reduction for s in without if s.variant == "mirrored" and "GPU" in s.param} == {"hierarchical-copy"}
    assert benchplan.from_env("not json") == [] and benchplan.from_env('[{"kind": "rm -rf"}]') == []


def test_one_framework_measures_and_its_plan_is_what_its_child_measures() -> None:
    """Issue 36: with TensorFlow and PyTorch both asked, one benchmark process times the machine, TensorFlow's (the
    first of the registry's frameworks); asked alone, PyTorch's, whose plan holds only the benchmarks its unit says its
    child measures (no soft-placement fallback, no towers, launch latency eagerly), under the same names."""
    from gpucheck import registry
    from gpucheck.settings import Settings

    def after(framework: str) -> list[str]:
        settings = Settings(framework=framework, benchmarks=True)
        return [p.target for p in registry.measured_after(settings)]

    both = Settings(framework="tensorflow,torch", benchmarks=True)
    assert registry.measuring_framework(both, "performance") == "tensorflow"
    assert after("tensorflow,torch") == after("tensorflow") == ["gpucheck.frameworks.tensorflow.benchmarks:probe_performance"]
    assert after("torch") == ["gpucheck.frameworks.torch.benchmarks:probe_performance"]
    assert after("none") == []
    torch = registry.framework_named("torch")
    assert torch is not None
    names = {s.name for s in benchplan.plan([(9, 0), (9, 0)], True, torch.benchmarks)}
    assert {s.name for s in benchplan.plan([(9, 0), (9, 0)])} > names
    assert {"test_matmul[GPU:1-tf32]", "test_copy[GPU:0-h2d-pinned]", "test_copy[GPU:0-GPU:1]", "test_conv[CPU:0-bfloat16]",
            "test_launch[GPU:0-eager]", "test_allreduce[CPU-x4]", "test_allreduce[GPU-x2]"} <= names
    assert not {n for n in names if n.startswith(("test_matpow", "test_scaling")) or n.endswith("-function]")}


def _run(name: str, devices: int, rate: float) -> BenchmarkRun:
    kind, param = name.removeprefix("test_").rstrip("]").split("[")
    return BenchmarkRun(name, kind, param, tuple(f"/GPU:{i}" for i in range(devices)), True, 1, (0.1,) * 5,
                        {"samples_per_s": rate, "method": param.split("-")[0]})


def test_speedup_and_efficiency_are_against_one_device_of_the_same_method() -> None:
    runs = derive([
        _run("test_scaling[towers-GPU-x1]", 1, 100.0),
        _run("test_scaling[towers-GPU-x2]", 2, 150.0),
        _run("test_scaling[mirrored-GPU-x2]", 2, 190.0),
    ])
    by = {r.name: r.extra_info for r in runs}
    assert by["test_scaling[towers-GPU-x2]"]["speedup"] == pytest.approx(1.5)
    assert by["test_scaling[towers-GPU-x2]"]["efficiency"] == pytest.approx(0.75)
    # No mirrored x1 measured: no speed-up to claim.
    assert "speedup" not in by["test_scaling[mirrored-GPU-x2]"]


# --- the rules through the full path, on fake GPUs whose GEMM speed the scenario sets --------------------

SLOW_H100 = json.loads((Path(__file__).parent / "scenarios/cuda/h100-80gb-slow-gemm.json").read_text())


def two_slow_h100s(first: dict[str, Any]) -> dict[str, Any]:
    """The slow H100 of h100-80gb-slow-gemm.json twice (a second GPU at 00:07.0), the first changed by
    ``first``: e.g. throttled (HW slowdown and power brake, as card-in-hw-slowdown.json's GPU 1) on a link
    trained at x4 under load. The GEMM figures are made on purpose (see the scenario's _source)."""
    scenario = copy.deepcopy(SLOW_H100)
    gpu = copy.deepcopy(scenario["gpus"][0])
    gpu.update(uuid=gpu["uuid"][:-1] + "b", pci_bus_id="00000000:00:07.0", cuda_pci_bus_id="0000:00:07.0")
    scenario["gpus"][0].update(first)
    scenario["gpus"].append(gpu)
    [nvidia] = [p for p in scenario["host"]["pci"] if p["vendor"] == "0x10de"]
    scenario["host"]["pci"].append({**nvidia, "bus_id": "0000:00:07.0"})
    scenario["host"]["dev"].append("nvidia1")
    scenario["env"]["NVIDIA_VISIBLE_DEVICES"] = "0,1"
    return scenario


THROTTLED_ON_X4 = {
    "clocks_event_reasons": "0x88",
    "temperature": 61,
    "utilization_gpu": 100,
    "pcie": {"gen": 5, "gen_max": 5, "gpu_gen_max": 5, "width": 4, "width_max": 16},
}


#: GEMMs of float32 (and TF32, TensorFlow's default for float32) slow enough that one GPU's training step of
#: the scaling benchmark is the GPUs' work (about 60 ms of GEMMs), and the GPUs' GEMMs run one at a time. The
#: step's own overhead is CPU work that grows with the machine's load (x1 = G + O, x2 = 2G + O): at 12 ms of
#: GEMMs a loaded 2-core machine measured 63% efficiency, above the 60% the rule asks for; at 60 ms an
#: overhead of 30 ms still gives 60%.
TIME_SLICED = {"tflops.float32": 0.01, "tflops.tf32": 0.01, "serial": 1}


def test_underperforming_gpus_and_poor_scaling_through_the_full_path(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun], tmp_path: Path
) -> None:
    """Slow by what it checks: the fake GEMMs sleep for their FLOPs (TIME_SLICED: about 60 ms a training step
    on one GPU) through every round of the scaling benchmarks, and the CPU benchmarks it judges are real work."""
    scenario = two_slow_h100s(THROTTLED_ON_X4)
    scenario["blas"].update(TIME_SLICED)
    fake_machine(scenario)
    out = tmp_path / "b.json"
    run = run_gpucheck(
        "--gpucheck-benchmarks", f"--benchmark-json={out}", "-p", "no:xdist", *SHORT,
        "-k", "test_matmul and bfloat16 or test_copy and (d2d or h2d-pinned) or towers",
        timeout=600,
    )
    text = run.result.stdout.str()
    findings = [f for f in run.report["findings"] if f["layer"] == "performance" and f["severity"] != "info"]
    slow = {(f["subject"], f["evidence"]["benchmark"]): f for f in findings if f["id"] == "gpu-underperforming"}
    # The scenario's 200 TFLOP/s bfloat16 against the H100 SXM's 989 dense: about 0.2, on both GPUs; the
    # fake's device copies (a memmove) far below its HBM3.
    assert set(slow) == {
        (f"GPU-{g}", f"test_{what}[GPU:{g}-{how}]") for g in (0, 1) for what, how in (("matmul", "bfloat16"), ("copy", "d2d"))
    }, (sorted(slow), text)
    for gpu in (0, 1):
        ev = slow[(f"GPU-{gpu}", f"test_matmul[GPU:{gpu}-bfloat16]")]["evidence"]
        assert ev["model"] == "H100 SXM5 80GB" and ev["expected"] == pytest.approx(989.4)
        # The fake's sleep bounds the speed from above (a loaded machine only slows it): below half, above zero.
        assert 0 < ev["share_of_expected"] < 0.5, ev
    # GPU 0's clocks explain its figures (its x4 link does not explain work on the GPU); GPU 1 has nothing
    # below that explains them, and its findings say so.
    for what in ("matmul[GPU:0-bfloat16]", "copy[GPU:0-d2d]"):
        assert [e["id"] for e in slow[("GPU-0", f"test_{what}")]["evidence"]["explained_by"]] == ["clocks-throttled"]
    gpu1 = slow[("GPU-1", "test_matmul[GPU:1-bfloat16]")]
    assert gpu1["evidence"]["explained_by"] == [] and "Nothing the diagnosis found explains it" in gpu1["cause"]
    # Poor scaling on the two physical GPUs (time-sliced GEMMs), explained by the x4 link and the clocks;
    # none on the logical CPU devices, which share cores.
    [scaling] = [f for f in findings if f["id"] == "scaling-inefficient"]
    assert scaling["evidence"]["benchmarks"] == ["test_scaling[towers-GPU-x2]"], scaling
    assert {e["id"] for e in scaling["evidence"]["explained_by"]} == {"clocks-throttled", "pcie-link-degraded"}
    efficiency = scaling["evidence"]["by_device_count"]["towers-GPU-x2"]["efficiency"]
    assert efficiency < 0.6, scaling
    checks = {c["nodeid"].split("::")[-1]: c["outcome"] for c in run.report["checks"]}
    assert checks["test_matmul[GPU:0-bfloat16]"] == "failed" and checks["test_scaling[towers-GPU-x2]"] == "failed"
    assert all(checks[f"test_scaling[towers-CPU-x{n}]"] == "passed" for n in (1, 2, 4)), checks
    assert checks["test_matmul[CPU:0-bfloat16]"] == "passed" and checks["test_scaling[towers-GPU-x1]"] == "passed"
    # Host-to-device copies are shown beside the link, not judged.
    assert checks["test_copy[GPU:0-h2d-pinned]"] == "passed", checks
    states = {s["layer"]: s["state"] for s in run.report["layers"]}
    assert states["performance"] == "degraded" and states["health"] == "degraded"
    # The saved benchmarks carry their expectation, and say what they ran on.
    saved = benchmarks(out)
    info = saved["test_matmul[GPU:1-bfloat16]"]["extra_info"]
    assert info["expected"] == pytest.approx(989.4) and info["share_of_expected"] == pytest.approx(info["tflops"] / 989.4)
    link = saved["test_copy[GPU:0-h2d-pinned]"]["extra_info"]
    assert link["expected"] == pytest.approx(63.0, rel=0.01) and link["expected_basis"].startswith("PCIe Gen5 x16")
    gi = saved["test_matmul[GPU:1-bfloat16]"]["_machine_info"]["gpucheck"]
    assert gi["driver"] == "580.159.04" and gi["cuda_driver"] == "13.0" and gi["cuda_build"] == "12.5.1"
    assert gi["cudnn_build"] == "9" and gi["cudnn_loaded"] == "9.3.0" and gi["tensorflow"] == "2.21.0"
    assert gi["cuda_loaded"] == "12.5.82"  # the fake libcudart.so.12.5.82 the scenario installs
    assert [(g["index"], g["name"], g["compute_capability"]) for g in gi["gpus"]] == [
        (0, "NVIDIA H100 80GB HBM3", "9.0"), (1, "NVIDIA H100 80GB HBM3", "9.0")
    ]


def test_launch_bound_scaling_is_not_judged(
    fake_machine: Callable[[dict[str, Any]], Path], run_gpucheck: Callable[..., GpucheckRun]
) -> None:
    """The same two GPUs with GEMMs at the scenario's own speed: one GPU's step is a fraction of a
    millisecond, bound by launching kernels, and however poorly two GPUs scale it is not called a fault.
    Slow: a diagnosis of two fake GPUs (two TensorFlow processes), then the benchmarks' own."""
    fake_machine(two_slow_h100s({}))
    run = run_gpucheck("--gpucheck-benchmarks", "-p", "no:xdist", *SHORT, "-k", "towers and GPU", timeout=600)
    perf = run.report["facts"]["performance"]["facts"]["benchmarks"]
    one = next(b for b in perf if b["name"] == "test_scaling[towers-GPU-x1]")
    step = one["extra_info"]["step_s"]
    # The step's length is a measurement (no speed target in an assert): on a machine loaded enough to stretch a
    # launch-bound step past the rule's threshold, the premise does not hold and the rule is asked nothing.
    if step >= MIN_JUDGED_STEP_S:
        pytest.skip(f"one GPU's step took {step * 1e3:.1f} ms on this loaded machine: not launch-bound here")
    assert "scaling-inefficient" not in run.finding_ids
