"""Speed targets as pytest-benchmark benchmarks (never timed asserts).

- time-to-verdict: ``pytest --gpucheck`` on this host beside ``python -c "import tensorflow"``
  (target: the first within 1.5x of the second). Compare the two rows of the group.
- idle-cost: a trivial suite with gpucheck installed beside the same run with ``-p no:gpucheck``
  (target: within 3%).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture


def _run(args: list[str], cwd: Path) -> int:
    return subprocess.run(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode


@pytest.mark.benchmark(group="time-to-verdict", disable_gc=True, warmup=False)
def test_time_to_verdict_gpucheck(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    args = [sys.executable, "-m", "pytest", "--gpucheck", "-p", "no:cacheprovider", "-q"]
    _run(args, tmp_path)  # warm the page cache like the baseline's first round does
    code = benchmark.pedantic(_run, args=(args, tmp_path), rounds=3, iterations=1)
    assert code in (0, 1)


@pytest.mark.benchmark(group="time-to-verdict", disable_gc=True, warmup=False)
def test_time_to_verdict_baseline_import_tensorflow(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    args = [sys.executable, "-c", "import tensorflow"]
    _run(args, tmp_path)
    code = benchmark.pedantic(_run, args=(args, tmp_path), rounds=3, iterations=1)
    assert code == 0


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
