"""How every framework's benchmark child times a benchmark (the performance unit's contract with whoever measures,
beside the plan it hands them): one judgement of rounds for TensorFlow's and PyTorch's alike.

- the work of one round is run once before timing (warm-up: tracing, graph optimisation, autotuning, PTX JIT);
- a round runs ``iterations`` units of work (chained, so no optimiser can fold them) and synchronises the device once,
  at its end; the number of units is calibrated so a round lasts about :data:`ROUND_S` seconds;
- rounds are repeated for about :data:`MEASURE_S` seconds (:func:`measure_time`: pytest-benchmark's
  ``--benchmark-max-time`` where the run gives another value than its default), at least :data:`MIN_ROUNDS` times.
  Each round's time is a real measurement; the parent hands them to pytest-benchmark as they are.

Standard library only: the parent may import it without any framework. ``benchmark_run`` and the figures
(``throughput``, ``bandwidth``, ``latency``) are what every framework's child says of a benchmark, in the same words.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from gpucheck.performance.facts import BenchmarkRun
from gpucheck.performance.plan import BENCH_MAX_TIME_ENV, Spec, max_time_from_env

#: A round lasts about this long; rounds are repeated for about MEASURE_S, at least MIN_ROUNDS times.
ROUND_S = 0.05
MEASURE_S = 0.8
#: The headline throughput figures (matmul by dtype), judged against the GPU model's peak, are timed longer.
MEASURE_MATMUL_S = 2.0
MIN_ROUNDS = 5
MAX_ROUNDS = 200
#: The most units of work one round chains (a unit slower than ROUND_S runs alone).
MAX_ITERATIONS = 64

#: ``work(n)`` returns the function that runs ``n`` units of work, each depending on the one before.
Work = Callable[[int], Callable[[], Any]]


def measure_time(headline: bool = False) -> float:
    """How long a benchmark repeats its rounds: gpucheck's own (MEASURE_S; MEASURE_MATMUL_S for the ``headline``
    matmuls), or pytest-benchmark's --benchmark-max-time as the parent passed it (BENCH_MAX_TIME_ENV; the headline
    matmuls as many times longer as they are by default)."""
    own = MEASURE_MATMUL_S if headline else MEASURE_S
    given = max_time_from_env(os.environ.get(BENCH_MAX_TIME_ENV, ""))
    return own if given is None else given * own / MEASURE_S


def timed(
    work: Work,
    sync: Callable[[Any], None],
    measure_s: float | None = None,
    max_iterations: int = MAX_ITERATIONS,
    agree: Callable[[float], float] | None = None,
) -> tuple[int, list[float]]:
    """Calibrate the units of work per round, warm up (tracing, compilation, autotuning), then time rounds.
    ``work(n)`` returns the function that runs ``n`` units, each depending on the one before (so that no
    graph optimiser can merge them); ``measure_s``: how long rounds are repeated (:func:`measure_time` where None);
    each round is synchronised once at its end (``sync`` is handed what the round
    returned). ``max_iterations=1``: one unit per round (work that cannot be chained). ``agree``: the
    value every process of a collective agrees on (the largest of theirs), for the units per round and whether to go
    on, asked outside the timed part of a round, so that every process runs the same rounds."""
    same = agree or (lambda value: value)
    measure_s = measure_time() if measure_s is None else measure_s
    one = work(1)
    sync(one())  # traced, compiled, autotuned
    start = time.perf_counter()
    sync(one())
    unit = same(max(time.perf_counter() - start, 1e-7))
    iterations = max(1, min(max_iterations, round(ROUND_S / unit)))
    fn = work(iterations) if iterations > 1 else one
    sync(fn())  # the round's own trace
    rounds: list[float] = []
    began = time.perf_counter()
    while len(rounds) < MAX_ROUNDS and (len(rounds) < MIN_ROUNDS or same(time.perf_counter() - began) < measure_s):
        t0 = time.perf_counter()
        sync(fn())
        rounds.append(time.perf_counter() - t0)
    return iterations, rounds


def best(rounds: list[float], iterations: int) -> float:
    """The time of one unit of work in the fastest round."""
    return min(rounds) / iterations


def med(rounds: list[float], iterations: int) -> float:
    """The time of one unit of work in the median round."""
    return statistics.median(rounds) / iterations


#: What a framework's method for a kind of benchmark returns: units of work per round, the rounds' seconds, figures.
Measurement = tuple[int, list[float], dict[str, Any]]


def throughput(flops: float, iterations: int, rounds: list[float]) -> dict[str, float]:
    """TFLOP/s of the median round and of the best, ``flops`` being one unit of work's."""
    return {"tflops": flops / med(rounds, iterations) / 1e12, "tflops_best": flops / best(rounds, iterations) / 1e12}


def bandwidth(nbytes: float, iterations: int, rounds: list[float]) -> dict[str, float]:
    """GB/s of the median round and of the best, ``nbytes`` being copied by one unit of work."""
    return {"gbps": nbytes / med(rounds, iterations) / 1e9, "gbps_best": nbytes / best(rounds, iterations) / 1e9}


def latency(iterations: int, rounds: list[float]) -> dict[str, float]:
    """Microseconds per unit of work in the median round and in the best."""
    return {"latency_us": med(rounds, iterations) * 1e6, "latency_us_best": best(rounds, iterations) * 1e6}


def benchmark_run(spec: Spec, device: str, measure: Callable[[], Measurement], after: Callable[[], None]) -> BenchmarkRun:
    """One benchmark of the plan as a framework's child measured it (``measure()``), with what every benchmark's
    ``extra_info`` says (its device as the framework names it, its dtype, its rounds and units per round); the exception
    ``measure()`` raised is the run's error, and the next benchmark runs. ``after()`` restores what the framework's
    settings were, whatever happened."""
    base = BenchmarkRun(spec.name, spec.kind, spec.param, spec.devices, spec.physical)
    try:
        iterations, rounds, extra = measure()
    except Exception as exc:  # noqa: BLE001 - a fact of this benchmark; the next one runs
        text = " ".join(str(exc).split())
        return BenchmarkRun(**{**base.__dict__, "error": f"{type(exc).__name__}: {text[:2000]}"})
    finally:
        after()
    info = {"device": device, **extra}
    if spec.dtype is not None:
        info.setdefault("dtype", spec.dtype)
    info["rounds"] = len(rounds)
    info["units_per_round"] = iterations
    return BenchmarkRun(**{**base.__dict__, "iterations": iterations, "rounds": tuple(rounds), "extra_info": info})


def bus_bandwidth(nbytes: float, devices: int, iterations: int, rounds: list[float]) -> dict[str, float]:
    """An all-reduce of ``nbytes`` across ``devices``: algorithm bandwidth of the median round, and bus bandwidth as
    nccl-tests computes it (``busbw = algbw × 2(n−1)/n``)."""
    algbw = nbytes / med(rounds, iterations) / 1e9
    return {"devices": devices, "bytes": nbytes, "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (devices - 1) / devices}
