"""The fake GPU's GEMM speed is the scenario's (tests/fakes/libcudamath.c, keys ``blas.tflops``).

Tests of the fakes themselves, not of gpucheck. A scenario can give the fake cuBLAS/cuBLASLt a speed in
TFLOP/s, per dtype: each GEMM then sleeps 2*m*n*k (times the batch count) / speed in the thread that calls
it, so a benchmark that times TensorFlow matmuls on the fake GPU measures that speed (less its own
overheads: the sleep bounds the speed from above). tests/scenarios/cuda/h100-80gb-slow-gemm.json is an H100
made slow on purpose that way.

First the fake alone through ctypes (which call takes which dtype, batch count and time: its trace,
GPUCHECK_FAKE_TRACE), then the real TensorFlow 2.21 timing chained matmuls (8192x8192; 4096 for float32) on
the fake GPU per dtype, through cuBLAS (its default) and through cuBLASLt (``TF_USE_CUBLASLT=1``). The trace
also pins which entry points TensorFlow calls: float32 ``cublasSgemm_v2`` (with math mode
CUBLAS_TF32_TENSOR_OP_MATH while TF32 is enabled), float16 and bfloat16 ``cublasSgemmEx``;
``cublasLtMatmul`` for all of them with TF_USE_CUBLASLT=1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import fakelibs

SLOW = fakelibs.load_scenario("cuda/h100-80gb-slow-gemm")
#: label -> (TensorFlow dtype, TF32 enabled, matrix size): "tf32" is a float32 matmul with TF32 on, "float32"
#: with it off. The latter at another size: with TF_USE_CUBLASLT=1 TensorFlow caches one cuBLASLt plan per
#: dtype and shape, with the TF32 choice of its first matmul (tensorflow/core/kernels/matmul_util.cc,
#: PlanAndAlgorithms::GetOrCreate), so float32 at the tf32 run's shape would stay tf32.
DTYPES = {
    "bfloat16": ("bfloat16", True, 8192),
    "float16": ("float16", True, 8192),
    "tf32": ("float32", True, 8192),
    "float32": ("float32", False, 4096),
}
TRACE = re.compile(r"fake-blas: (\w+) (\w+) m=(\d+) n=(\d+) k=(\d+) batch=(\d+) sleep_us=(\d+)")

#: cuBLAS and cuBLASLt through ctypes, every call traced (GPUCHECK_FAKE_TRACE): JSON of the return codes.
CTYPES_PROBE = r"""
import ctypes, json
from ctypes import byref, c_int, c_int32, c_longlong, c_size_t, c_uint64, c_void_p
blas = ctypes.CDLL("libcublas.so.12")
lt = ctypes.CDLL("libcublasLt.so.12")
R_32F, R_16F, R_16BF, COMPUTE_32F, COMPUTE_32F_FAST_TF32, TF32_TENSOR_OP_MATH = 0, 2, 14, 68, 77, 3
out = {}
h = c_void_p()
out["create"] = blas.cublasCreate_v2(byref(h))
def gemm(m, n, k):  # (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
    return [h, 0, 0, m, n, k, None, None, m, None, k, None, None, m]
out["sgemm"] = blas.cublasSgemm_v2(*gemm(512, 256, 128))
out["hgemm"] = blas.cublasHgemm(*gemm(512, 256, 128))
out["set_math"] = blas.cublasSetMathMode(h, TF32_TENSOR_OP_MATH)
mode = c_int(-1)
out["get_math"] = [blas.cublasGetMathMode(h, byref(mode)), mode.value]
out["sgemm_tf32_mode"] = blas.cublasSgemm_v2(*gemm(512, 256, 128))
out["set_math_default"] = blas.cublasSetMathMode(h, 0)
def ex(m, n, k, atype):  # cublasGemmEx's A..ldc: A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc
    return [h, 0, 0, m, n, k, None, None, atype, m, None, atype, k, None, None, atype, m]
out["gemmex_bf16"] = blas.cublasGemmEx(*ex(512, 256, 128, R_16BF), COMPUTE_32F, -1)
out["gemmex_fast_tf32"] = blas.cublasGemmEx(*ex(512, 256, 128, R_32F), COMPUTE_32F_FAST_TF32, -1)
out["sgemmex_f16"] = blas.cublasSgemmEx(*ex(512, 256, 128, R_16F))
# cublasGemmBatchedEx: ..., Ctype, ldc, batchCount, computeType, algo (cublas_api.h)
out["gemm_batched_ex"] = blas.cublasGemmBatchedEx(*ex(64, 32, 16, R_16F), 5, COMPUTE_32F, -1)
# cublasGemmStridedBatchedEx: A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC,
# batchCount, computeType, algo
s = c_longlong(1 << 40)
out["gemm_strided_batched_ex"] = blas.cublasGemmStridedBatchedEx(
    h, 0, 0, 64, 32, 16, None, None, R_16BF, 64, s, None, R_16BF, 16, s, None, None, R_16BF, 64, s, 7, COMPUTE_32F, -1)
# cublasSgemmStridedBatched: A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount
out["sgemm_strided_batched"] = blas.cublasSgemmStridedBatched(
    h, 0, 0, 64, 32, 16, None, None, 64, s, None, 16, s, None, None, 64, s, 3)
out["destroy"] = blas.cublasDestroy_v2(h)
# cuBLASLt: D = op(A) op(B), op(A) m x k; A transposed, stored k x m; 6 matrices (batch count of D).
lh, desc, a, b, d = c_void_p(), c_void_p(), c_void_p(), c_void_p(), c_void_p()
out["lt_create"] = [lt.cublasLtCreate(byref(lh)), lt.cublasLtMatmulDescCreate(byref(desc), COMPUTE_32F, R_32F),
    lt.cublasLtMatmulDescSetAttribute(desc, 3, byref(c_int32(1)), c_size_t(4)),
    lt.cublasLtMatrixLayoutCreate(byref(a), R_16BF, c_uint64(128), c_uint64(512), ctypes.c_int64(128)),
    lt.cublasLtMatrixLayoutCreate(byref(b), R_16BF, c_uint64(128), c_uint64(256), ctypes.c_int64(128)),
    lt.cublasLtMatrixLayoutCreate(byref(d), R_16BF, c_uint64(512), c_uint64(256), ctypes.c_int64(512)),
    lt.cublasLtMatrixLayoutSetAttribute(d, 5, byref(c_int32(6)), c_size_t(4))]
batch = c_int32(-1)
written = c_size_t(0)
out["lt_batch"] = [lt.cublasLtMatrixLayoutGetAttribute(d, 5, byref(batch), c_size_t(4), byref(written)), batch.value,
                   written.value]
out["lt_matmul"] = lt.cublasLtMatmul(lh, desc, None, None, a, None, b, None, None, d, None, d, None, None,
                                     c_size_t(0), None)
print(json.dumps(out))
"""

#: TensorFlow on /GPU:0: per dtype, a warm-up matmul, then ROUNDS rounds of N chained matmuls of SIZE x SIZE
#: (the best round counts), each synchronised once at its end by reading a scalar back (the fake runs no
#: kernel: values are garbage, only time matters). "GPUCHECK-DTYPE <label>" on stderr before each dtype's
#: calls. JSON on stdout.
TF_BENCH = r"""
import json, sys, time
import tensorflow as tf
dtypes, rounds = json.loads(sys.argv[1]), int(sys.argv[2])
out = {"gpus": [d.name for d in tf.config.list_physical_devices("GPU")], "tflops": {}}
for label, (dtype, tf32, size, n) in dtypes.items():
    tf.config.experimental.enable_tensor_float_32_execution(tf32)
    print(f"GPUCHECK-DTYPE {label}", file=sys.stderr, flush=True)
    with tf.device("/GPU:0"):
        a = tf.ones((size, size), dtype=dtype)
        float(tf.reduce_sum(tf.matmul(a, a)).numpy())
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            x = a
            for _ in range(n):
                x = tf.matmul(x, a)
            float(tf.reduce_sum(x).numpy())
            best = min(best, time.perf_counter() - start)
    out["tflops"][label] = 2 * size**3 * n / best / 1e12
print("GPUCHECK-BENCH " + json.dumps(out))
"""

ROUNDS = 3
#: Each round sleeps about this long in the fake (the test's budget: 4 dtypes x ROUNDS rounds, per backend).
ROUND_S = 0.15


def set_tflops(scenario: dict[str, Any], label: str) -> float:
    blas = scenario["blas"]
    return float(blas.get(f"tflops.{label}", blas.get("tflops", 0)))


def trace(stderr: str) -> list[tuple[str, str, int, int, int, int, int]]:
    return [
        (fn, dtype, int(m), int(n), int(k), int(batch), int(us))
        for fn, dtype, m, n, k, batch, us in TRACE.findall(stderr)
    ]


def trace_by_dtype(stderr: str) -> dict[str, set[tuple[str, str, int, int, int, int]]]:
    """The GEMM calls (function, dtype, m, n, k, batch) traced after each "GPUCHECK-DTYPE <label>" marker."""
    calls: dict[str, set[tuple[str, str, int, int, int, int]]] = {}
    label = None
    for line in stderr.splitlines():
        if line.startswith("GPUCHECK-DTYPE "):
            label = line.split(" ", 1)[1]
            calls[label] = set()
        elif label and (found := trace(line)):
            calls[label].update(call[:6] for call in found)
    return calls


def test_each_gemm_sleeps_for_its_flops_at_its_dtypes_speed(
    fake_machine: Callable[[dict[str, Any]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signatures, batch-count positions and dtypes as cublas_api.h / cublasLt.h have them; a dtype without a
    figure of its own takes blas.tflops; NVIDIA_TF32_OVERRIDE=0 makes tf32 float32, as in the real libraries."""
    scenario = {**SLOW, "blas": {"tflops": 1, "tflops.bfloat16": 4, "tflops.tf32": 2, "tflops.float32": 0.5}}
    fake_machine(scenario)
    monkeypatch.setenv("GPUCHECK_FAKE_TRACE", "1")
    proc = subprocess.run([sys.executable, "-c", CTYPES_PROBE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    codes = [v for v in out.values() if isinstance(v, int)] + out["lt_create"]
    assert codes == [0] * len(codes), out
    assert out["get_math"] == [0, 3] and out["lt_batch"] == [0, 6, 4], out

    def us(m: int, n: int, k: int, batch: int, tflops: float) -> int:
        return round(2 * m * n * k * batch / (tflops * 1e12) * 1e6)

    assert trace(proc.stderr) == [
        ("cublasSgemm_v2", "float32", 512, 256, 128, 1, us(512, 256, 128, 1, 0.5)),
        ("cublasHgemm", "float16", 512, 256, 128, 1, us(512, 256, 128, 1, 1)),
        ("cublasSgemm_v2", "tf32", 512, 256, 128, 1, us(512, 256, 128, 1, 2)),
        ("cublasGemmEx", "bfloat16", 512, 256, 128, 1, us(512, 256, 128, 1, 4)),
        ("cublasGemmEx", "tf32", 512, 256, 128, 1, us(512, 256, 128, 1, 2)),
        ("cublasSgemmEx", "float16", 512, 256, 128, 1, us(512, 256, 128, 1, 1)),
        ("cublasGemmBatchedEx", "float16", 64, 32, 16, 5, us(64, 32, 16, 5, 1)),
        ("cublasGemmStridedBatchedEx", "bfloat16", 64, 32, 16, 7, us(64, 32, 16, 7, 4)),
        ("cublasSgemmStridedBatched", "float32", 64, 32, 16, 3, us(64, 32, 16, 3, 0.5)),
        ("cublasLtMatmul", "bfloat16", 512, 256, 128, 6, us(512, 256, 128, 6, 4)),
    ], proc.stderr

    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    proc = subprocess.run([sys.executable, "-c", CTYPES_PROBE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-4000:]
    calls = trace(proc.stderr)
    assert calls[2][:2] == ("cublasSgemm_v2", "float32") and calls[4][:2] == ("cublasGemmEx", "float32"), calls


@pytest.mark.parametrize("backend", ["cublas", "cublaslt"])
def test_tensorflow_matmuls_on_the_slow_h100_run_at_its_set_speed(
    backend: str, fake_machine: Callable[[dict[str, Any]], Path]
) -> None:
    """Slow: a TensorFlow process per backend, and in it about ROUND_S of the fake's sleep per round, warm-up
    included, for each dtype."""
    fake_machine(SLOW)
    expected = {label: set_tflops(SLOW, label) for label in DTYPES}
    # Chained matmuls per round: about ROUND_S of sleep in the fake at the set speed.
    plan = {
        label: (dtype, tf32, size, max(2, round(ROUND_S * expected[label] * 1e12 / (2 * size**3))))
        for label, (dtype, tf32, size) in DTYPES.items()
    }
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1", "GPUCHECK_FAKE_TRACE": "1"}
    if backend == "cublaslt":
        env["TF_USE_CUBLASLT"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", TF_BENCH, json.dumps(plan), str(ROUNDS)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("GPUCHECK-BENCH ")), None)
    assert proc.returncode == 0 and line, proc.stderr[-4000:]
    out = json.loads(line.split(" ", 1)[1])
    assert out["gpus"] == ["/physical_device:GPU:0"], out
    # Which entry points TensorFlow 2.21 calls for tf.matmul, per dtype (cuBLAS and cuBLASLt are column-major:
    # m, n, k of C = A @ B are those of C^T = B^T A^T, all one size here).
    if backend == "cublas":
        entry = {
            "bfloat16": "cublasSgemmEx",
            "float16": "cublasSgemmEx",
            "tf32": "cublasSgemm_v2",
            "float32": "cublasSgemm_v2",
        }
    else:
        entry = dict.fromkeys(DTYPES, "cublasLtMatmul")
    assert trace_by_dtype(proc.stderr) == {
        label: {(entry[label], label, size, size, size, 1)} for label, (_dtype, _tf32, size) in DTYPES.items()
    }, proc.stderr[-4000:]
    # The sleep bounds the speed from above (no load can make it faster); TensorFlow's own per-op overheads
    # and a loaded machine only slow it, so the lower bound only says the fake did not stall (ten times slower).
    measured = out["tflops"]
    for label, tflops in expected.items():
        assert 0.1 * tflops <= measured[label] <= 1.05 * tflops, (label, measured, expected)
