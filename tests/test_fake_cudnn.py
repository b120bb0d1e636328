"""The fake cuDNN (tests/fakes/libcudnn.c) is complete enough for TensorFlow 2.21 on a fake GPU.

Tests of the fakes themselves, not of gpucheck: on the fake healthy H100 (tests/scenarios/cuda/
h100-80gb-healthy.json) a cuDNN handle is created, the legacy convolution API offers one algorithm
without workspace and accepts the convolution without computing it (the output keeps what it held,
like every fake kernel), the backend API answers cudnn-frontend's questions (heuristics, engine config,
execution plan, variant pack) and executes; where the driver has no device cudnnCreate fails as the
real one does. Then the real TensorFlow runs tf.nn.conv2d and a jit_compile function on the fake GPU
(each in a process of its own, which loads the fakes through LD_LIBRARY_PATH as TensorFlow does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import fakelibs

SCENARIO = "cuda/h100-80gb-healthy"

#: cuDNN's legacy API through ctypes: version, handle (argv[1] == "handle-only": stop after cudnnCreate),
#: an NHWC float32 convolution 4x16x16x8 * 3x3x8x16 with padding 1 on buffers of the fake driver, whose
#: output is filled with a sentinel first. JSON on stdout.
LEGACY_PROBE = r"""
import ctypes, json, sys
from ctypes import byref, c_float, c_int, c_size_t, c_uint64, c_void_p
cuda = ctypes.CDLL("libcuda.so.1")
cudnn = ctypes.CDLL("libcudnn.so.9")
cudnn.cudnnGetVersion.restype = c_size_t
cudnn.cudnnGetErrorString.restype = ctypes.c_char_p
out = {"version": cudnn.cudnnGetVersion()}
h = c_void_p()
out["create"] = cudnn.cudnnCreate(byref(h))
out["create_error"] = cudnn.cudnnGetErrorString(out["create"]).decode()
message = ctypes.create_string_buffer(256)
cudnn.cudnnGetLastErrorString(message, c_size_t(256))
out["last_error"] = message.value.decode()
if out["create"] or sys.argv[1:] == ["handle-only"]:
    print(json.dumps(out))
    sys.exit(0)
# Device buffers from the fake driver, in a context of GPU 0, as TensorFlow's allocator has them.
assert cuda.cuInit(0) == 0
dev, ctx = c_int(), c_void_p()
assert cuda.cuDeviceGet(byref(dev), 0) == 0 and cuda.cuDevicePrimaryCtxRetain(byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
def device_buffer(floats, fill):
    ptr = c_uint64()
    assert cuda.cuMemAlloc_v2(byref(ptr), c_size_t(4 * floats)) == 0
    host = (c_float * floats)(*([fill] * floats))
    assert cuda.cuMemcpyHtoD_v2(ptr, host, c_size_t(4 * floats)) == 0
    return ptr
NHWC, FLOAT, CROSS_CORRELATION = 1, 0, 1
x, w, y, conv = c_void_p(), c_void_p(), c_void_p(), c_void_p()
out["descriptors"] = [
    cudnn.cudnnCreateTensorDescriptor(byref(x)), cudnn.cudnnCreateFilterDescriptor(byref(w)),
    cudnn.cudnnCreateConvolutionDescriptor(byref(conv)), cudnn.cudnnCreateTensorDescriptor(byref(y)),
    cudnn.cudnnSetTensor4dDescriptor(x, NHWC, FLOAT, 4, 8, 16, 16),
    cudnn.cudnnSetFilter4dDescriptor(w, FLOAT, NHWC, 16, 8, 3, 3),
    cudnn.cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CROSS_CORRELATION, FLOAT),
    cudnn.cudnnSetConvolutionMathType(conv, 0),
]
n, c, hh, ww = c_int(), c_int(), c_int(), c_int()
out["output_dim"] = cudnn.cudnnGetConvolution2dForwardOutputDim(conv, x, w, byref(n), byref(c), byref(hh), byref(ww))
out["output_shape"] = [n.value, c.value, hh.value, ww.value]
out["descriptors"].append(cudnn.cudnnSetTensor4dDescriptor(y, NHWC, FLOAT, n, c, hh, ww))
class Perf(ctypes.Structure):  # cudnnConvolutionFwdAlgoPerf_t
    _fields_ = [("algo", c_int), ("status", c_int), ("time", c_float), ("memory", c_size_t),
                ("determinism", c_int), ("mathType", c_int), ("reserved", c_int * 3)]
count, perf = c_int(), (Perf * 4)()
out["get_algorithm"] = cudnn.cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, 4, byref(count), perf)
out["algorithms"] = [{"algo": p.algo, "status": p.status, "memory": p.memory} for p in perf[: count.value]]
workspace = c_size_t(123)
out["workspace"] = cudnn.cudnnGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, perf[0].algo, byref(workspace))
out["workspace_bytes"] = workspace.value
xp, wp = device_buffer(4 * 16 * 16 * 8, 1.0), device_buffer(16 * 3 * 3 * 8, 1.0)
yp = device_buffer(4 * 16 * 16 * 16, 7.0)
alpha, beta = c_float(1.0), c_float(0.0)
out["stream"] = cudnn.cudnnSetStream(h, None)
out["forward"] = cudnn.cudnnConvolutionForward(h, byref(alpha), x, xp, w, wp, conv, perf[0].algo, None, c_size_t(0),
                                               byref(beta), y, yp)
result = (c_float * 16)()
assert cuda.cuMemcpyDtoH_v2(result, yp, c_size_t(4 * 16)) == 0
out["output_head"] = list(result)
out["destroy"] = [cudnn.cudnnDestroyTensorDescriptor(x), cudnn.cudnnDestroyFilterDescriptor(w),
                  cudnn.cudnnDestroyConvolutionDescriptor(conv), cudnn.cudnnDestroyTensorDescriptor(y),
                  cudnn.cudnnDestroy(h)]
print(json.dumps(out))
"""

#: The backend API as cudnn-frontend's v8 builders use it (cudnn_frontend_Heuristics.h,
#: cudnn_frontend_ExecutionPlan.h): descriptor numbers from cudnn_graph_v9.h. JSON on stdout.
BACKEND_PROBE = r"""
import ctypes, json
from ctypes import byref, c_char, c_int, c_int64, c_void_p
cudnn = ctypes.CDLL("libcudnn.so.9")
ENGINE, ENGINECFG, ENGINEHEUR, EXECUTION_PLAN, OPERATIONGRAPH, VARIANT_PACK = 2, 3, 4, 5, 15, 16
T_HANDLE, T_INT64, T_VOID_PTR, T_HEUR_MODE, T_NUMERICAL_NOTE, T_DESC, T_CHAR = 0, 3, 6, 8, 11, 15, 24
out = {}
h = c_void_p()
assert cudnn.cudnnCreate(byref(h)) == 0
def create(kind):
    d = c_void_p()
    assert cudnn.cudnnBackendCreateDescriptor(kind, byref(d)) == 0
    return d
def set_attr(d, name, kind, values):
    return cudnn.cudnnBackendSetAttribute(d, name, kind, c_int64(len(values)), values)
def get_attr(d, name, kind, requested, array):
    n = c_int64(-1)
    status = cudnn.cudnnBackendGetAttribute(d, name, kind, c_int64(requested), byref(n), array)
    return status, n.value
graph = create(OPERATIONGRAPH)
out["graph"] = [set_attr(graph, 800, T_HANDLE, (c_void_p * 1)(h)), cudnn.cudnnBackendFinalize(graph)]
heur = create(ENGINEHEUR)
out["heuristics"] = [set_attr(heur, 201, T_DESC, (c_void_p * 1)(graph)), set_attr(heur, 200, T_HEUR_MODE, (c_int * 1)(0)),
                     cudnn.cudnnBackendFinalize(heur)]
out["results_count"] = get_attr(heur, 202, T_DESC, 0, None)
cfg = create(ENGINECFG)
out["results"] = get_attr(heur, 202, T_DESC, 1, (c_void_p * 1)(cfg))
engine = create(ENGINE)
out["engine"] = get_attr(cfg, 300, T_DESC, 1, (c_void_p * 1)(engine))
index = (c_int64 * 1)(-1)
out["global_index"] = list(get_attr(engine, 1301, T_INT64, 1, index)) + [index[0]]
out["numerical_notes"] = get_attr(engine, 1303, T_NUMERICAL_NOTE, 10, None)
out["knob_choices"] = get_attr(cfg, 302, T_DESC, 8, None)
plan = create(EXECUTION_PLAN)
out["plan"] = [set_attr(plan, 401, T_DESC, (c_void_p * 1)(cfg)), cudnn.cudnnBackendFinalize(plan)]
workspace = (c_int64 * 1)(-1)
out["workspace"] = [cudnn.cudnnBackendGetAttribute(plan, 402, T_INT64, c_int64(1), None, workspace), workspace[0]]
status, size = get_attr(plan, 405, T_CHAR, 0, None)
text = (c_char * max(size, 1))()
out["json"] = [status, size, get_attr(plan, 405, T_CHAR, size, text)[0], text.raw[:size].decode()]
buffer = ctypes.create_string_buffer(64)
pack = create(VARIANT_PACK)
out["variant_pack"] = [set_attr(pack, 1001, T_VOID_PTR, (c_void_p * 1)(ctypes.addressof(buffer))),
                       set_attr(pack, 1000, T_INT64, (c_int64 * 1)(1)),
                       set_attr(pack, 1003, T_VOID_PTR, (c_void_p * 1)(None)), cudnn.cudnnBackendFinalize(pack)]
out["execute"] = cudnn.cudnnBackendExecute(h, plan, pack)
out["execute_unfinalized"] = cudnn.cudnnBackendExecute(h, create(EXECUTION_PLAN), pack)
out["set_after_finalize"] = set_attr(plan, 401, T_DESC, (c_void_p * 1)(cfg))
out["destroy"] = [cudnn.cudnnBackendDestroyDescriptor(d) for d in (pack, plan, engine, cfg, heur, graph)]
print(json.dumps(out))
"""

#: tf.nn.conv2d (NHWC float32) and the matmul-relu-exp-sum gpucheck's XLA check compiles
#: (gpucheck/frameworks/tensorflow/xla.py, xla_run), each on /GPU:0. JSON on stdout.
TF_PROBE = r"""
import json
import numpy as np
import tensorflow as tf
out = {"gpus": [d.name for d in tf.config.list_physical_devices("GPU")]}
rng = np.random.default_rng(0)
def run(name, fn):
    try:
        with tf.device("/GPU:0"):
            y = fn()
        out[name] = {"ok": True, "device": y.device, "shape": list(y.shape)}
    except Exception as exc:
        out[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
x = tf.constant(rng.random((4, 16, 16, 8), dtype=np.float32))
w = tf.constant(rng.random((3, 3, 8, 16), dtype=np.float32))
run("conv2d", lambda: tf.nn.conv2d(x, w, strides=1, padding="SAME"))
a = tf.constant(rng.random((128, 64), dtype=np.float32))
b = tf.constant(rng.random((64, 32), dtype=np.float32))
fused = tf.function(lambda p, q: tf.reduce_sum(tf.exp(-tf.nn.relu(tf.matmul(p, q))), axis=1), jit_compile=True)
run("xla", lambda: fused(a, b))
print("GPUCHECK-PROBE " + json.dumps(out))
"""


def run_probe(code: str, *args: str, timeout: float = 60) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


@pytest.fixture
def h100(fake_machine: Callable[[dict[str, Any]], Path]) -> dict[str, Any]:
    """The real H100 host of tests/scenarios/cuda/h100-80gb-healthy.json, every library installed."""
    scenario = fakelibs.load_scenario(SCENARIO)
    fake_machine(scenario)
    return scenario


@pytest.mark.usefixtures("h100")
def test_cudnn_handle_and_a_convolution_that_is_accepted_not_run() -> None:
    out = run_probe(LEGACY_PROBE)
    assert out["version"] == 90300 and out["create"] == 0, out
    assert out["descriptors"] == [0] * 9 and out["output_dim"] == 0, out
    # SAME padding of a 3x3 filter keeps 16x16; cuDNN's dimensions are N, C, H, W whatever the layout.
    assert out["output_shape"] == [4, 16, 16, 16]
    # One algorithm (IMPLICIT_PRECOMP_GEMM), without workspace.
    assert out["get_algorithm"] == 0 and out["algorithms"] == [{"algo": 1, "status": 0, "memory": 0}], out
    assert (out["workspace"], out["workspace_bytes"]) == (0, 0)
    # Accepted and not computed: the output keeps the sentinel it held (a real convolution of ones gives 32..72).
    assert out["stream"] == 0 and out["forward"] == 0, out
    assert out["output_head"] == [7.0] * 16
    assert out["destroy"] == [0] * 5


def test_cudnn_create_fails_where_the_driver_has_no_device(
    h100: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA_VISIBLE_DEVICES=-1: cuInit answers CUDA_ERROR_NO_DEVICE (../shared/PITFALLS.md), so the CUDA
    runtime that cudnnCreate initialises fails and cudnnCreate answers CUDNN_STATUS_NOT_INITIALIZED."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    out = run_probe(LEGACY_PROBE, "handle-only")
    assert out["create"] == 1001 and out["create_error"] == "CUDNN_STATUS_NOT_INITIALIZED", out
    assert "no usable device" in out["last_error"], out


def test_cudnn_create_status_from_the_scenario(fake_machine: Callable[[dict[str, Any]], Path]) -> None:
    scenario = fakelibs.load_scenario(SCENARIO)
    scenario["cudnn"] = {"create": 4000}
    fake_machine(scenario)
    out = run_probe(LEGACY_PROBE, "handle-only")
    assert out["create"] == 4000 and out["create_error"] == "CUDNN_STATUS_INTERNAL_ERROR", out


@pytest.mark.usefixtures("h100")
def test_backend_api_plans_and_executes_one_engine() -> None:
    out = run_probe(BACKEND_PROBE)
    assert out["graph"] == [0, 0] and out["heuristics"] == [0, 0, 0], out
    # One engine config, filled into the caller's descriptor; its engine has global index 0 and no notes.
    assert out["results_count"] == [0, 1] and out["results"] == [0, 1], out
    assert out["engine"] == [0, 1] and out["global_index"] == [0, 1, 0], out
    assert out["numerical_notes"] == [0, 0] and out["knob_choices"] == [0, 0], out
    assert out["plan"] == [0, 0] and out["workspace"] == [0, 0], out
    status, size, status2, text = out["json"]
    assert status == status2 == 0 and size == len(text) and json.loads(text), out["json"]
    assert out["variant_pack"] == [0, 0, 0, 0] and out["execute"] == 0, out
    # A plan that was never finalized is refused (CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED), and so is a change to a
    # finalized descriptor (CUDNN_STATUS_BAD_PARAM).
    assert out["execute_unfinalized"] == 2004 and out["set_after_finalize"] == 2000, out
    assert out["destroy"] == [0] * 6


def test_host_links_stand_for_this_machines_files(tmp_path: Path) -> None:
    """A scenario's host.links: the host view's usr/local/cuda is this machine's toolkit, or dangles."""
    there, absent = tmp_path / "toolkit", str(tmp_path / "no-such-toolkit")
    (there / "nvvm/libdevice").mkdir(parents=True)
    (there / "nvvm/libdevice/libdevice.10.bc").write_bytes(b"BC")
    host = {"links": {"usr/local/cuda": str(there), "/opt/cuda": absent}}
    root = fakelibs.make_host_root(tmp_path / "root", host)
    assert (root / "usr/local/cuda/nvvm/libdevice/libdevice.10.bc").read_bytes() == b"BC"
    assert (root / "opt/cuda").is_symlink() and not (root / "opt/cuda").exists()
    assert fakelibs.missing_link_targets(host) == [absent]


def test_tensorflow_runs_conv2d_and_jit_compile_on_the_fake_h100(h100: dict[str, Any]) -> None:
    """TensorFlow 2.21 initialises cuDNN on the fake GPU and runs conv2d there; XLA compiles with the
    toolkit the scenario's host view links (this machine's /usr/local/cuda) and runs on the GPU. Slow:
    TensorFlow's import, then XLA's compile with the toolkit's ptxas."""
    proc = subprocess.run(
        [sys.executable, "-c", TF_PROBE],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"},
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("GPUCHECK-PROBE ")), None)
    assert proc.returncode == 0 and line, proc.stderr[-4000:]
    out = json.loads(line.split(" ", 1)[1])
    assert out["gpus"] == ["/physical_device:GPU:0"], out
    conv = out["conv2d"]
    assert conv["ok"] and conv["device"].endswith("/device:GPU:0") and conv["shape"] == [4, 16, 16, 16], conv
    missing = fakelibs.missing_link_targets(h100["host"])
    if missing:
        pytest.skip(f"no CUDA toolkit at {', '.join(missing)}: XLA finds no libdevice on this machine")
    xla = out["xla"]
    assert xla["ok"] and xla["device"].endswith("/device:GPU:0") and xla["shape"] == [128], xla
    # Neither cuDNN nor XLA's autotuning (which frees buffers, encodes TMA descriptors, launches its own
    # kernels through the runtime) met a refusal of the fakes that TensorFlow logs as an error.
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("E0000")]
    assert not errors, errors
