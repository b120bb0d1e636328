"""The performance layer (``--gpucheck-benchmarks``): how well the measuring framework uses each device, as
pytest-benchmark benchmarks. One item per benchmark of the plan (``gpucheck.performance.plan``), named
after its device and what varies (``test_matmul[GPU:0-bfloat16]``, ``test_scaling[towers-CPU-x2]``).

The timed work runs in a process of the measuring framework's own (TensorFlow's, or PyTorch's:
``gpucheck.registry.measuring_framework``) after the diagnosis (``plugin.BenchmarkPlugin``); each item
hands its real per-round times to pytest-benchmark's fixture, its figures in ``extra_info``, and fails when
a GPU reaches far less than its model is built for (``gpu-underperforming``), when training scales poorly
over physical GPUs (``scaling-inefficient``), or when the benchmark could not be measured. A kind of benchmark the
measuring framework does not measure is one skipped item that says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpucheck.performance.plan import Spec
from gpucheck.performance.plugin import BenchmarkPlugin, Measured


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spec" not in metafunc.fixturenames:
        return
    plugin = next((p for p in metafunc.config.pluginmanager.get_plugins() if isinstance(p, BenchmarkPlugin)), None)
    kind = metafunc.function.__name__.removeprefix("test_")
    specs = [s for s in plugin.plan() if s.kind == kind] if plugin is not None else []
    if plugin is not None and not specs and (why := plugin.not_measured(kind)) is not None:
        metafunc.parametrize("spec", [pytest.param(None, id="not-measured", marks=pytest.mark.skip(reason=why))])
        return
    metafunc.parametrize("spec", specs, ids=[s.param for s in specs])


def test_matmul(gpucheck_measured: Measured, benchmark: Any, spec: Spec) -> None:
    """Matmul throughput by dtype (float32 with TF32 off, TF32, float16, bfloat16), chained n×n matmuls."""
    gpucheck_measured.record(benchmark)


def test_matpow(gpucheck_measured: Measured, benchmark: Any, spec: Spec) -> None:
    """A^n + B^n by chained matmuls (n = 10), on one device, or split over two GPUs with the sum on the CPU."""
    gpucheck_measured.record(benchmark)


def test_matpow_fallback(gpucheck_measured: Measured, benchmark: Any, spec: Spec) -> None:
    """The matpow program asked for a GPU that does not exist, with soft placement: the cost of the silent
    fallback to the CPU (``slowdown`` against the device it should have run on)."""
    gpucheck_measured.record(benchmark)


def test_copy(gpucheck_measured: Measured, benchmark: Any, spec: Spec) -> None:
    """Copy bandwidth: host to device (pinned and pageable), device to host, within a device, between GPUs."""
    gpucheck_measured.record(benchmark)


def test_conv(gpucheck_measured: Measured, benchmark: Any, spec: Spec) -> None:
    """cuDNN convolution throughput: a ResNet-like 3×3 convolution (NHWC in TensorFlow, NCHW in PyTorch)."""
    gpucheck_measured.record(benchmark)


def test_launch(gpucheck_measured: Measured, benchmark: Any, spec: Spec) -> None:
    """Kernel-launch latency: a tiny op in a loop, eagerly (and inside a tf.function in TensorFlow)."""
    gpucheck_measured.record(benchmark)


def test_allreduce(gpucheck_measured: Measured, benchmark: Any, spec: Spec) -> None:
    """All-reduce across the local devices (TensorFlow's MirroredStrategy; torch.distributed across processes, gloo on
    the CPU; NCCL on GPUs): algorithm and bus bandwidth."""
    gpucheck_measured.record(benchmark)


def test_scaling(gpucheck_measured: Measured, benchmark: Any, spec: Spec) -> None:
    """Multi-device training scaling (towers and MirroredStrategy, 1, 2, 4 … devices): speed-up and efficiency."""
    gpucheck_measured.record(benchmark)
