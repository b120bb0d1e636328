"""Speed targets as pytest-benchmark benchmarks (never timed asserts).

- time-to-verdict: ``pytest --gpucheck`` paired round by round with a baseline, the ratio of the medians in
  ``extra_info["ratio"]``: on this driverless host against ``python -c "import tensorflow"`` (target 1.3),
  on the healthy fake H100 against importing TensorFlow and listing its GPUs (target 1.5), and with TensorFlow and
  PyTorch both installed (a venv of its own, ``torch_tf_python``) against the slower framework's import and device
  listing (target 1.2).
- fidelity: gpucheck's float32 matmul benchmark against a plain loop of the same framework on the CPU, TensorFlow's
  and PyTorch's (target: at least 0.9).
- idle-cost: a trivial suite with gpucheck installed beside the same run with ``-p no:gpucheck``
  (target: within 3%); idle-cost-paired: the same two in turn, 10 pairs, the ratio of the medians.
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
from tests.pyenvs import checkout_environment


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> int:
    done = subprocess.run(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    return done.returncode


def _timed(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    _run(args, cwd, env)
    return time.perf_counter() - start


def _ratio_benchmark(
    benchmark: BenchmarkFixture,
    cwd: Path,
    gpucheck: list[str],
    baseline: list[str],
    rounds: int | None = None,
    env: dict[str, str] | None = None,
    warm: bool = True,
) -> None:
    """Time ``gpucheck`` with pytest-benchmark, and before each of its rounds the ``baseline`` (untimed by
    the fixture, timed here), pair by pair, so both see the same machine; the ratio of the medians goes
    into ``extra_info["ratio"]``. ``env``: both commands' environment (None: this one's)."""
    if warm:
        _run(baseline, cwd, env)  # warm the page cache with the framework's files, for both (the median does the rest)
    baseline_times: list[float] = []

    def setup() -> None:
        baseline_times.append(_timed(baseline, cwd, env))

    code = benchmark.pedantic(_run, args=(gpucheck, cwd, env), setup=setup, rounds=rounds or ROUNDS, iterations=1)
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


#: Each framework's import and device listing: the time to verdict with both installed is held against the slower.
IMPORT_AND_LIST = {
    "tensorflow": "import tensorflow as tf; tf.config.list_physical_devices('GPU')",
    "torch": "import torch; torch.cuda.device_count()",
}


@pytest.mark.benchmark(group="time-to-verdict", disable_gc=True, warmup=False)
def test_time_to_verdict_with_tensorflow_and_pytorch(
    benchmark: BenchmarkFixture, tmp_path: Path, torch_tf_python: Path
) -> None:
    """Issue 36: with TensorFlow and PyTorch both installed (a venv of their own with this host's TensorFlow and the
    torch CPU wheel, made once per cache by tests/pyenvs.py), a plain ``pytest --gpucheck`` diagnoses both; it is
    paired round by round with the slower framework's import and device listing (each framework's timed once first,
    which warms the page cache for both; the slower one is the baseline). Target: ratio <= 1.2."""
    env = checkout_environment(tmp_path / "site")
    project = tmp_path / "project"
    project.mkdir()
    python = str(torch_tf_python)
    warm = {name: _timed([python, "-c", code], project, env) for name, code in IMPORT_AND_LIST.items()}
    slower = max(warm, key=lambda name: warm[name])
    report = tmp_path / "report.json"
    gpucheck = [python, "-m", "pytest", "--gpucheck", f"--gpucheck-json={report}", "-p", "no:cacheprovider", "-q"]
    _ratio_benchmark(benchmark, project, gpucheck, [python, "-c", IMPORT_AND_LIST[slower]], env=env, warm=False)
    # Both diagnosed, by default, in every timed round (the last one's report).
    data = json.loads(report.read_text())
    assert list(data["frameworks"]) == ["tensorflow", "torch"], data["frameworks"]
    assert data["settings"]["framework"]["source"] == "default", data["settings"]["framework"]
    made = (torch_tf_python.parent.parent / "complete").read_text().splitlines()[-1]
    benchmark.extra_info.update({f"{name}_first_s": round(t, 3) for name, t in warm.items()}, slower=slower, venv=made)


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


@pytest.mark.benchmark(group="idle-cost-paired", disable_gc=True, warmup=False)
def test_idle_cost_paired(benchmark: BenchmarkFixture, trivial_suite: Path) -> None:
    """Issue 27: a suite without the gpu marker, with the plugin (its marker, fixtures and collection scan)
    against ``-p no:gpucheck``, the two in turn round by round (10 pairs): within noise (target: ratio <= 1.03)."""
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_trivial.py"]
    baseline = [*run[:-1], "-p", "no:gpucheck", "test_trivial.py"]
    _ratio_benchmark(benchmark, trivial_suite, [*run[:-1], "-p", "gpucheck", "test_trivial.py"], baseline, rounds=10)


#: The timing of a plain loop of 8 chained n×n matmuls ``loop(a, b)``: its best FLOP/s over 2 s, printed as a number.
PLAIN_LOOP_TIMING = """
loop(a, b)
best, began = float("inf"), time.perf_counter()
while time.perf_counter() - began < 2.0:
    t0 = time.perf_counter()
    loop(a, b)
    best = min(best, (time.perf_counter() - t0) / 8)
print(2 * n ** 3 / best)
"""

#: A plain ``tf.function`` loop of chained float32 matmuls on the CPU, the shape gpucheck's float32 matmul
#: benchmark uses there: the best matmul FLOP/s this TensorFlow reaches, printed as a number.
PLAIN_MATMUL = """
import os, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
n = 1024
with tf.device("/CPU:0"):
    a = tf.random.normal((n, n))
    b = tf.random.normal((n, n)) / n ** 0.5
@tf.function
def loop(c, m):
    for _ in range(8):
        c = tf.matmul(c, m)
    return c
""" + PLAIN_LOOP_TIMING


def _against_a_plain_loop(
    benchmark: BenchmarkFixture,
    plain: Callable[[], float],
    gpucheck: list[str],
    cwd: Path,
    report: Path,
    loop: str,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """gpucheck's float32 matmul on the CPU (one round of ``gpucheck``, its ``--benchmark-json`` in ``report``) against
    the best of the plain ``loop`` before and after it: the ratio in ``extra_info`` and the summary; its benchmark."""
    before = plain()
    code = benchmark.pedantic(_run, args=(gpucheck, cwd, env), rounds=1, iterations=1)
    after = plain()
    assert code in (0, 1)
    [matmul] = [b for b in json.loads(report.read_text())["benchmarks"] if b["name"] == "test_matmul[CPU:0-float32]"]
    ours = matmul["extra_info"]["tflops_best"] * 1e12
    ratio = ours / max(before, after)
    benchmark.extra_info.update(gpucheck_flops=ours, plain_loop_flops=max(before, after), ratio=round(ratio, 3))
    BENCHMARK_RATIOS[benchmark.name] = (
        f"gpucheck {ours / 1e9:.1f} GFLOP/s / plain {loop} {max(before, after) / 1e9:.1f} GFLOP/s = {ratio:.2f}"
    )
    # The ratio is this benchmark's figure (extra_info, and the summary at the end of the run), not an assert:
    # a speed target in an assert fails on a loaded machine. It measured something, in both loops:
    assert ours > 0 and min(before, after) > 0, benchmark.extra_info
    return dict(matmul)


@pytest.mark.benchmark(group="matmul-vs-plain-loop", disable_gc=True, warmup=False)
def test_matmul_benchmark_reaches_a_plain_tf_function_loop(
    benchmark: BenchmarkFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13: gpucheck's float32 matmul benchmark against the best float32 matmul FLOP/s the same
    TensorFlow reaches on the same device and shape in a plain tf.function loop, measured in this run: the
    plain loop before and after gpucheck's (the better of the two), gpucheck's best round. The ratio (target:
    at least 0.9) is this benchmark's figure, shown at the end of the run, not an assert (issue 25)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)

    def plain() -> float:
        out = subprocess.run([sys.executable, "-c", PLAIN_MATMUL], capture_output=True, text=True, timeout=300, check=True)
        return float(out.stdout.split()[-1])

    report = tmp_path / "bench.json"
    gpucheck = [*GPUCHECK, "--gpucheck-benchmarks", "-k", "test_matmul and float32", f"--benchmark-json={report}"]
    matmul = _against_a_plain_loop(benchmark, plain, gpucheck, tmp_path, report, "tf.function loop")
    assert matmul["extra_info"]["shape"] == [1024, 1024, 1024]


#: A plain loop of chained float32 matmuls in torch on the CPU, the shape gpucheck's float32 matmul benchmark uses
#: there: the best matmul FLOP/s this torch reaches, printed as a number.
PLAIN_TORCH_MATMUL = """
import time
import torch
n = 1024
g = torch.Generator().manual_seed(1)
a = torch.randn((n, n), generator=g)
b = torch.randn((n, n), generator=g) / n ** 0.5
def loop(c, m):
    for _ in range(8):
        c = c @ m
    return c
""" + PLAIN_LOOP_TIMING


@pytest.mark.benchmark(group="matmul-vs-plain-loop", disable_gc=True, warmup=False)
def test_torch_matmul_benchmark_reaches_a_plain_torch_loop(
    benchmark: BenchmarkFixture, tmp_path: Path, torch_python: Path
) -> None:
    """Issue 36 point 4: PyTorch's float32 matmul benchmark (``--gpucheck-framework=torch``, in the torch CPU wheel's
    venv) against the best float32 matmul FLOP/s the same torch reaches on the same device and shape in a plain loop,
    measured in this run: the plain loop before and after gpucheck's (the better of the two), gpucheck's best round.
    The ratio (target: at least 0.9) is this benchmark's figure, not an assert (issue 25), as TensorFlow's above."""
    env = checkout_environment(tmp_path / "site")
    project = tmp_path / "project"
    project.mkdir()

    def plain() -> float:
        out = subprocess.run(
            [str(torch_python), "-c", PLAIN_TORCH_MATMUL], capture_output=True, text=True, timeout=300, check=True,
            env=env,
        )
        return float(out.stdout.split()[-1])

    report = tmp_path / "bench.json"
    gpucheck = [
        str(torch_python), "-m", "pytest", "--gpucheck", "--gpucheck-framework=torch", "--gpucheck-benchmarks", "-q",
        "-p", "no:cacheprovider", "-k", "test_matmul and CPU:0-float32", f"--benchmark-json={report}",
    ]
    matmul = _against_a_plain_loop(benchmark, plain, gpucheck, project, report, "torch loop", env)
    assert matmul["extra_info"]["shape"] == [1024, 1024, 1024] and matmul["extra_info"]["device"] == "cpu"


@pytest.mark.benchmark(group="compare", disable_gc=False, warmup=False)
def test_compare_of_1000_benchmarks(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """Issue 14: two pytest-benchmark files of 1,000 benchmarks each (100 saved rounds apiece, so the rank
    test runs on every one) compared, read from disk to the printed table. Target: under 1 s."""
    import io
    import random

    from gpucheck import compare
    from tests.test_compare import synthetic_run

    rng = random.Random(0)
    times = {f"test_case_{i:04d}": 10 ** rng.uniform(-6, -1) for i in range(1000)}
    base = synthetic_run(tmp_path / "base.json", rng, times)
    new = synthetic_run(tmp_path / "new.json", rng, {k: v * (1.3 if k.endswith("7") else 1) for k, v in times.items()})

    def run() -> int:
        return compare.run(compare.Options(str(base), str(new)), io.StringIO())

    status = benchmark.pedantic(run, rounds=5, iterations=1)
    assert status == compare.REGRESSION
    stats = benchmark.stats
    if stats is not None:
        BENCHMARK_RATIOS[benchmark.name] = f"{stats.stats.median:.3f} s for 2 x 1,000 benchmarks (target < 1 s)"


@pytest.mark.benchmark(group="compare", disable_gc=False, warmup=False)
@pytest.mark.parametrize("timer", ["fine", "coarse"])
def test_hodges_lehmann_at_its_bound(benchmark: BenchmarkFixture, timer: str) -> None:
    """The Hodges-Lehmann shift at the most rounds it takes (MAX_SHIFT_ROUNDS a side: 250,000 differences),
    ten benchmarks' worth: rounds spread 5 % around 1 ms, from a fine timer, or from a coarse one (0.1 ms:
    ties, one difference for many pairs). The 1,000-benchmark compare above has 100 rounds a side."""
    import math
    import random

    from gpucheck import compare

    rng = random.Random(1)
    size = compare.MAX_SHIFT_ROUNDS
    quantum = 1e-4 if timer == "coarse" else 0.0
    pairs = []
    for _ in range(10):
        a = [1e-3 * math.exp(rng.gauss(0, 0.05)) for _ in range(size)]
        b = [1.01e-3 * math.exp(rng.gauss(0, 0.05)) for _ in range(size)]
        if quantum:
            a, b = [round(x / quantum) * quantum for x in a], [round(y / quantum) * quantum for y in b]
        pairs.append((a, b))

    def run() -> list[float]:
        return [compare.hodges_lehmann(a, b) for a, b in pairs]

    shifts = benchmark.pedantic(run, rounds=5, iterations=1)
    assert all(-2e-4 < s < 3e-4 for s in shifts), shifts  # about +1 % of 1 ms, or 0 between coarse ticks
    stats = benchmark.stats
    if stats is not None:
        BENCHMARK_RATIOS[benchmark.name] = f"{stats.stats.median / 10 * 1e3:.2f} ms a call at 500 x 500 rounds"
