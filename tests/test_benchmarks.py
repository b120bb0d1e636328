"""Speed targets as pytest-benchmark benchmarks (never timed asserts).

- time-to-verdict: ``pytest --gpucheck`` paired round by round with a baseline, the ratio of the medians in
  ``extra_info["ratio"]``: on this driverless host against ``python -c "import tensorflow"`` (target 1.3),
  on the healthy fake H100 against importing TensorFlow and listing its GPUs (target 1.5).
- idle-cost: a trivial suite with gpucheck installed beside the same run with ``-p no:gpucheck``
  (target: within 3%).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from conftest import BENCHMARK_RATIOS


def _run(args: list[str], cwd: Path) -> int:
    return subprocess.run(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode


def _timed(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    _run(args, cwd)
    return time.perf_counter() - start


def _ratio_benchmark(benchmark: BenchmarkFixture, cwd: Path, gpucheck: list[str], baseline: list[str]) -> None:
    """Time ``gpucheck`` with pytest-benchmark, and before each of its rounds the ``baseline`` (untimed by
    the fixture, timed here), pair by pair, so both see the same machine; the ratio of the medians goes
    into ``extra_info["ratio"]``."""
    _run(baseline, cwd)  # warm the page cache with TensorFlow's files, for both (the median of the rounds does the rest)
    baseline_times: list[float] = []

    def setup() -> None:
        baseline_times.append(_timed(baseline, cwd))

    code = benchmark.pedantic(_run, args=(gpucheck, cwd), setup=setup, rounds=ROUNDS, iterations=1)
    assert code in (0, 1)
    base = statistics.median(baseline_times)
    benchmark.extra_info["baseline"] = " ".join(baseline[-2:]) if baseline[1] == "-c" else " ".join(baseline)
    benchmark.extra_info["baseline_median_s"] = round(base, 3)
    stats = benchmark.stats
    if stats is not None:  # None where benchmarks are disabled (--benchmark-disable, xdist)
        ratio = round(stats.stats.median / base, 3)
        benchmark.extra_info["ratio"] = ratio
        BENCHMARK_RATIOS[benchmark.name] = (
            f"{stats.stats.median:.2f} s / {base:.2f} s = {ratio:.2f} (baseline: {benchmark.extra_info['baseline']})"
        )


ROUNDS = 3
#: ``pytest --gpucheck`` as a user's install runs it (README: ``pip install ".[tensorflow]"``): without the
#: pytest plugins only the test extra brings (hypothesis alone costs 0.65 s at every pytest start here).
GPUCHECK = [
    sys.executable, "-m", "pytest", "--gpucheck", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:xdist",
    "-q",
]


@pytest.mark.benchmark(group="time-to-verdict", disable_gc=True, warmup=False)
def test_time_to_verdict_driverless_host(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """This host as it is: the tensorflow wheel (a CUDA build) and no driver. Target: ratio <= 1.3."""
    _ratio_benchmark(benchmark, tmp_path, GPUCHECK, [sys.executable, "-c", "import tensorflow"])


@pytest.mark.benchmark(group="time-to-verdict", disable_gc=True, warmup=False)
def test_time_to_verdict_healthy_h100(
    benchmark: BenchmarkFixture, tmp_path: Path, fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """The healthy H100 of ../shared/machines/h100-80gb-driver-580 as fakes (tests/scenarios/cuda/
    h100-80gb-healthy.json): ``pytest --gpucheck`` against importing TensorFlow and listing its GPUs, which
    creates the GPU as TensorFlow does. Target: ratio <= 1.5."""
    fake_machine(json.loads((Path(__file__).parent / "scenarios/cuda/h100-80gb-healthy.json").read_text()))
    baseline = [sys.executable, "-c", "import tensorflow as tf; tf.config.list_physical_devices('GPU')"]
    _ratio_benchmark(benchmark, tmp_path, GPUCHECK, baseline)


TRIVIAL_SUITE = "\n".join(f"def test_{i}():\n    assert {i} + 1 > {i}\n" for i in range(200))


@pytest.fixture
def trivial_suite(tmp_path: Path) -> Path:
    (tmp_path / "test_trivial.py").write_text(TRIVIAL_SUITE)
    return tmp_path


@pytest.mark.benchmark(group="idle-cost", disable_gc=True, warmup=False)
def test_idle_cost_with_gpucheck_installed(benchmark: BenchmarkFixture, trivial_suite: Path) -> None:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_trivial.py"]
    code = benchmark.pedantic(_run, args=(args, trivial_suite), rounds=7, iterations=1)
    assert code == 0


@pytest.mark.benchmark(group="idle-cost", disable_gc=True, warmup=False)
def test_idle_cost_baseline_without_gpucheck(benchmark: BenchmarkFixture, trivial_suite: Path) -> None:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:gpucheck", "test_trivial.py"]
    code = benchmark.pedantic(_run, args=(args, trivial_suite), rounds=7, iterations=1)
    assert code == 0
