"""Placement-layer steps of the one TensorFlow process on the critical path: where ops really run,
whether GPU results are right, whether XLA works, what TensorFlow got of each GPU's memory.

They run in the framework probe's child, after it has written its facts (``gpucheck.probes.tfchild``):
importing TensorFlow is most of the time to verdict. Before TensorFlow initialises its devices the step
configures what must be configured then: the placement log, the CPU split in logical devices for the
multi-device path, and a bounded ``memory_limit`` on every GPU, so that this process never reserves a
GPU's memory while another one (the memory-growth probe, started beside it) needs it. Each section is
a step: after it, the facts so far are handed back (and written), so a later step that hangs or dies
leaves them standing.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import faulthandler
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from gpucheck.facts import (
    FallbackOp,
    GpuMemory,
    MultiDeviceRun,
    NumericCheck,
    OpRun,
    PlacementFacts,
    TfDevice,
    TfPlacementFacts,
    TrainingStepPlacement,
    XlaRun,
)
from gpucheck.protocol import CAPTURE_ENV, DEEP_ENV, INIT_SECTION, is_sibling, quiet, stage
from gpucheck.settings import parse_switch

#: Environment variables TensorFlow reads for memory and XLA; their values are facts.
ENV_KEYS = ("TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "XLA_FLAGS", "TF_XLA_FLAGS", "CUDA_VISIBLE_DEVICES")
#: TensorFlow's own log lines, INFO included (the placement log is INFO).
TF_LOG_ENV = {"TF_CPP_MIN_LOG_LEVEL": "0"}
#: How many logical CPU devices the TensorFlow step splits the CPU into, for the multi-device path.
CPU_SPLIT = 2
#: The memory limit (MiB) this process gives every GPU, at most: enough for every step, far from the whole
#: GPU. Less where NVML shows less free (a quarter of the least free GPU, at least MEMORY_LIMIT_MIN_MB).
MEMORY_LIMIT_MB = 1024
MEMORY_LIMIT_MIN_MB = 256
#: Test allocation (float32 elements: 64 MiB).
ALLOC_ELEMENTS = 16 * 1024 * 1024
#: Each step after the devices exist may take this share of the probe's timeout (at least
#: MIN_STEP_BUDGET seconds); creating the devices may take all that is left (a cold PTX JIT takes minutes).
STEP_SHARE = 0.5
MIN_STEP_BUDGET = 10.0

#: Tolerances: max |result - reference| / max |reference|, fit for each precision (inputs rounded to
#: it, accumulation in float32). On this host's CPU the errors are about 6e-7 (float32 matmul), 5e-4
#: (float16), 4e-3 (bfloat16), 3e-7 (conv2d), 5e-10 (2^20-element sum); the margins leave room for the
#: other summation orders of cuBLAS / cuDNN algorithms, while a wrong result is off by order 1.
TOLERANCE = {
    ("matmul", "float32"): 1e-5,
    ("matmul", "tensorfloat32"): 1e-2,
    ("matmul", "float16"): 1e-2,
    ("matmul", "bfloat16"): 3e-2,
    ("conv2d", "float32"): 1e-4,
    ("reduce_sum", "float32"): 1e-4,
}
MULTI_DEVICE_TOLERANCE = 1e-5
XLA_TOLERANCE = 1e-4

#: Ops of a graph that are plumbing, not computation: they say nothing about acceleration.
STRUCTURAL_OPS = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval", "NoOp", "Const"})

_PLACED = re.compile(r"(?:\] |^)(?P<name>[^\s:]+): \((?P<type>[\w]+)\): (?P<device>/job:\S+)\s*$")
_COLOCATION = re.compile(r"Ignoring device specification (?P<spec>\S+) for node '(?P<name>[^']+)' because (?P<why>.*)$")
_XLA_LINE = re.compile(r"libdevice|ptxas|nvvm|Searched for CUDA|xla_gpu_cuda_data_dir|nvlink", re.IGNORECASE)
_SEARCHED_HEADER = "Searched for CUDA in the following directories"
_SEARCHED_ENTRY = re.compile(r"^(?:\S.*\]\s{2,}|\s{2,})(?P<dir>[./$~\w].*?)\s*$")


def _err(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _message(exc: BaseException) -> str:
    """TensorFlow's own message for its errors (``OpError.message``), else ``str(exc)``."""
    msg = getattr(exc, "message", None)
    return str(msg) if isinstance(msg, str) and msg else str(exc)


# --- TensorFlow's own output ----------------------------------------------------------------------

class _Captured:
    lines: list[str]

    def __init__(self) -> None:
        self.lines = []


#: How many captured() blocks are open in this process, and the real stderr (a file over a duplicate of
#: descriptor 2 taken by the outermost block) that faulthandler writes to meanwhile.
_capture_depth = 0
_real_stderr: Any = None


@contextlib.contextmanager
def captured() -> Iterator[_Captured]:
    """File descriptors 1 and 2 (TensorFlow's C++ logs) go to a file for the block; afterwards its
    lines are handed back and, without the placement log, written to the stderr the block found (the
    real one, where the parent keeps them, or an enclosing block's file). faulthandler keeps writing to
    the real stderr meanwhile. Blocks nest; each level has its own file, so that what a level wrote
    before an inner one began is kept, and, named by the parent (CAPTURE_ENV), still there for it when
    TensorFlow aborts inside."""
    global _capture_depth, _real_stderr
    cap = _Captured()
    named = os.environ.get(CAPTURE_ENV)
    tmp = open(f"{named}.{os.getpid()}.{_capture_depth}", "w+b") if named else tempfile.TemporaryFile(mode="w+b")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved_out, saved_err = os.dup(1), os.dup(2)
        if _capture_depth == 0:
            _real_stderr = os.fdopen(os.dup(2), "w", errors="replace")
            faulthandler.enable(file=_real_stderr)
        _capture_depth += 1
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield cap
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            with contextlib.suppress(Exception):
                ctypes.CDLL(None).fflush(None)
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            _capture_depth -= 1
            if _capture_depth == 0 and _real_stderr is not None:
                faulthandler.enable(file=sys.stderr)
                _real_stderr.close()
                _real_stderr = None
            tmp.seek(0)
            cap.lines = tmp.read().decode(errors="replace").splitlines()
            tmp.truncate(0)
    finally:
        tmp.close()
        if named:
            with contextlib.suppress(OSError):
                os.unlink(tmp.name)
    kept = quiet(cap.lines)
    if kept:
        sys.stderr.write("\n".join(kept) + "\n")
        sys.stderr.flush()


def xla_toolchain_lines(lines: list[str]) -> tuple[list[str], list[str]]:
    """XLA's lines about ptxas / libdevice, and the CUDA directories it says it searched."""
    relevant: list[str] = []
    searched: list[str] = []
    in_list = False
    for line in lines:
        if _SEARCHED_HEADER in line:
            relevant.append(line)
            in_list = True
            continue
        if in_list:
            m = _SEARCHED_ENTRY.match(line)
            if m and not line.lstrip().startswith("You can choose"):
                entry = m.group("dir")
                if entry not in searched:
                    searched.append(entry)
                relevant.append(line)
                continue
            in_list = False
        if _XLA_LINE.search(line):
            relevant.append(line)
    return relevant[-40:], searched


_CREATED = re.compile(r"Created device \S*/device:(?P<dev>GPU:\d+) with .*?pci bus id: (?P<bus>[0-9A-Fa-f:.]+)")
_CREATED_MB = re.compile(r"Created device \S*/device:GPU:(?P<index>\d+) with (?P<mb>\d+) MB memory")


def created_devices(lines: list[str]) -> list[tuple[str, str]]:
    """TensorFlow's "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 79759 MB memory:
    -> device: 0, name: ..., pci bus id: 00000000:18:00.0, compute capability: 9.0" lines, as
    ("GPU:0", "00000000:18:00.0")."""
    return [(m.group("dev"), m.group("bus")) for m in map(_CREATED.search, lines) if m]


def created_limits(lines: list[str]) -> dict[int, int]:
    """GPU index -> the memory (MB) TensorFlow created the device with: its allocator's limit."""
    return {int(m.group("index")): int(m.group("mb")) for m in map(_CREATED_MB.search, lines) if m}


def normalise_bus_id(text: str) -> str | None:
    """``00000000:3B:00.0`` (NVML) and ``0000:3b:00.0`` (TensorFlow) -> ``0000:3b:00.0``."""
    try:
        head, fn = text.strip().rsplit(".", 1)
        parts = head.split(":")
        domain = int(parts[-3], 16) if len(parts) >= 3 else 0
        return f"{domain:04x}:{int(parts[-2], 16):02x}:{int(parts[-1], 16):02x}.{int(fn, 16)}"
    except (ValueError, IndexError):
        return None


# --- NVML before TensorFlow reserves memory -------------------------------------------------------


def nvml_snapshot() -> dict[str, tuple[int | None, int | None, tuple[tuple[int, int | None], ...]]]:
    """Free / total MiB and compute processes of every GPU NVML sees, by normalised PCI bus id."""
    out: dict[str, tuple[int | None, int | None, tuple[tuple[int, int | None], ...]]] = {}
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - without NVML there is nothing to compare with
        return out
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                bus_raw = pynvml.nvmlDeviceGetPciInfo(handle).busId
                bus = normalise_bus_id(bus_raw.decode() if isinstance(bus_raw, bytes) else str(bus_raw))
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                procs: list[Any] = []
                # The 470 branch lacks the _v3 entry point the default binding calls (PITFALLS.md).
                for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2"):
                    fn = getattr(pynvml, name, None)
                    if fn is None:
                        continue
                    try:
                        procs = list(fn(handle))
                        break
                    except Exception:  # noqa: BLE001
                        continue
                plist = tuple(
                    (int(p.pid), int(p.usedGpuMemory) // (1 << 20) if isinstance(p.usedGpuMemory, int) else None)
                    for p in procs
                    if not is_sibling(int(p.pid))
                )
                if bus:
                    out[bus] = (int(mem.free) // (1 << 20), int(mem.total) // (1 << 20), plist)
            except Exception:  # noqa: BLE001 - one GPU NVML cannot read is not the end of the snapshot
                continue
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return out


# --- the TensorFlow step --------------------------------------------------------------------------


def _gpu_details(tf: Any, dev: Any) -> dict[str, Any]:
    try:
        raw = dict(tf.config.experimental.get_device_details(dev))
    except Exception as exc:  # noqa: BLE001
        return {"error": _err(exc)}
    out: dict[str, Any] = {}
    for k, v in raw.items():
        out[str(k)] = list(v) if isinstance(v, tuple) else v if isinstance(v, (str, int, float, bool)) else str(v)
    return out


def compute_capability(details: dict[str, Any]) -> tuple[int, int] | None:
    cc = details.get("compute_capability")
    if isinstance(cc, (list, tuple)) and len(cc) == 2:
        try:
            return int(cc[0]), int(cc[1])
        except (TypeError, ValueError):
            return None
    return None


def _place_matmul(tf: Any, np: Any, requested: str, mode: str, soft: bool) -> OpRun:
    rng = np.random.default_rng()
    a = tf.constant(rng.standard_normal((64, 64)), dtype=tf.float32)
    try:
        tf.config.set_soft_device_placement(soft)
        if mode == "eager":
            with tf.device(requested):
                out = tf.matmul(a, a)
        else:

            def body(x: Any) -> Any:
                with tf.device(requested):
                    return tf.matmul(x, x)

            out = tf.function(body)(a)
        return OpRun(requested, mode, soft, True, str(out.device), None, None)
    except Exception as exc:  # noqa: BLE001 - TensorFlow's refusal is the fact
        return OpRun(requested, mode, soft, False, None, type(exc).__name__, _message(exc))


def _kernel_reason(op_type: str, dtype: str | None, have_gpu: bool) -> str:
    if not have_gpu:
        return "no GPU device"
    try:
        from tensorflow.python.framework import kernels

        kl = kernels.get_registered_kernels_for_op(op_type)
    except Exception:  # noqa: BLE001
        return "unknown (the kernel registry could not be read)"
    gpu_kernels = [k for k in kl.kernel if k.device_type == "GPU"]
    if not gpu_kernels:
        return "no GPU kernel"
    if dtype is None:
        return "GPU kernel exists (placed by colocation)"
    import tensorflow as tf

    for k in gpu_kernels:
        t_constraints = [c for c in k.constraint if c.name == "T"]
        if not t_constraints:
            return "GPU kernel exists (placed by colocation)"
        allowed = {tf.dtypes.as_dtype(t).name for t in t_constraints[0].allowed_values.list.type}
        if dtype in allowed:
            return "GPU kernel exists (placed by colocation)"
    return f"no GPU kernel for {dtype}"


def _training_step(tf: Any, np: Any, requested: str, have_gpu: bool) -> TrainingStepPlacement:
    """A small softmax-regression step in a tf.function under ``requested``; the placement log (on since
    before the devices were initialised) says where each of its ops ran."""
    rng = np.random.default_rng()
    with tf.device(requested):
        w = tf.Variable(rng.standard_normal((16, 4)).astype("float32"))
    x = tf.constant(rng.standard_normal((32, 16)), dtype=tf.float32)
    y = tf.one_hot(tf.constant(rng.integers(0, 4, 32)), 4)

    def step_body(xb: Any, yb: Any) -> Any:
        with tf.device(requested):
            with tf.GradientTape() as tape:
                logits = tf.matmul(xb, w)
                loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=yb, logits=logits))
            grad = tape.gradient(loss, w)
            w.assign_sub(0.1 * grad)
            return loss

    step = tf.function(step_body)

    error = None
    with captured() as cap:
        try:
            step(x, y)
        except Exception as exc:  # noqa: BLE001
            error = _message(exc)
    placed: dict[str, tuple[str, str]] = {}
    colocated: dict[str, str] = {}
    for line in cap.lines:
        m = _PLACED.search(line)
        if m:
            placed[m.group("name")] = (m.group("type"), m.group("device"))
        c = _COLOCATION.search(line)
        if c:
            colocated[c.group("name")] = "TensorFlow: " + c.group("why").strip()
    graph_ops: dict[str, tuple[str, str, str | None]] = {}
    try:
        for op in step.get_concrete_function(x, y).graph.get_operations():
            dtype = None
            try:
                dtype = tf.dtypes.as_dtype(op.get_attr("T")).name
            except Exception:  # noqa: BLE001 - ops without a T attribute
                dtype = op.outputs[0].dtype.name if op.outputs else None
            graph_ops[op.name] = (op.type, op.device, dtype)
    except Exception as exc:  # noqa: BLE001
        error = error or _err(exc)
    fallbacks: list[FallbackOp] = []
    on_gpu = 0
    for name, (op_type, device) in placed.items():
        if "GPU" in device.upper().rsplit("/", 1)[-1]:
            on_gpu += 1
            continue
        _type, g_requested, dtype = graph_ops.get(name, (op_type, "", None))
        if op_type in STRUCTURAL_OPS or "GPU" not in g_requested.upper():
            continue
        reason = _kernel_reason(op_type, dtype, have_gpu)
        if name in colocated and have_gpu:
            reason = colocated[name]
        fallbacks.append(FallbackOp(name, op_type, dtype, g_requested, device, reason))
    return TrainingStepPlacement(requested, error is None, error, len(placed), on_gpu, tuple(fallbacks))


def _rel_error(np: Any, out: Any, ref: Any, scale: float | None = None) -> float:
    out64 = np.asarray(out, dtype=np.float64)
    denom = scale if scale is not None else float(np.max(np.abs(ref)))
    return float(np.max(np.abs(out64 - ref)) / denom) if denom > 0 else float("inf")


def _fresh(np: Any, rng: Any, shape: tuple[int, ...]) -> Any:
    """Standard-normal inputs from a fresh generator: never zeros (checked, not assumed)."""
    while True:
        arr = rng.standard_normal(shape)
        if np.all(arr != 0):
            return arr


def _numerics(tf: Any, np: Any, device: str, cc: tuple[int, int] | None) -> list[NumericCheck]:
    rng = np.random.default_rng()
    is_gpu = "GPU" in device.upper()
    out: list[NumericCheck] = []

    def run(op: str, precision: str, shape: str, fn: Callable[[], tuple[Any, float]]) -> None:
        tol = TOLERANCE[(op, "float32" if precision == "tensorfloat32" and op != "matmul" else precision)]
        try:
            with tf.device(device):
                result, err = fn()
            out.append(NumericCheck(device, op, precision, err <= tol, str(result.device), err, tol, None, shape))
        except Exception as exc:  # noqa: BLE001 - an op that cannot run is a fact too
            out.append(NumericCheck(device, op, precision, False, None, None, tol, _err(exc), shape))

    a = _fresh(np, rng, (256, 256))
    b = _fresh(np, rng, (256, 256))
    ref = a @ b

    def matmul(dtype: Any) -> Callable[[], tuple[Any, float]]:
        def go() -> tuple[Any, float]:
            r = tf.matmul(tf.constant(a, dtype=dtype), tf.constant(b, dtype=dtype))
            return r, _rel_error(np, tf.cast(r, tf.float64).numpy(), ref)

        return go

    tf32_before = tf.config.experimental.tensor_float_32_execution_enabled()
    try:
        tf.config.experimental.enable_tensor_float_32_execution(False)
        run("matmul", "float32", "256x256 @ 256x256", matmul(tf.float32))
        if is_gpu and cc is not None and cc >= (8, 0):
            tf.config.experimental.enable_tensor_float_32_execution(True)
            run("matmul", "tensorfloat32", "256x256 @ 256x256", matmul(tf.float32))
            tf.config.experimental.enable_tensor_float_32_execution(False)
        if not is_gpu or (cc is not None and cc >= (5, 3)):
            run("matmul", "float16", "256x256 @ 256x256", matmul(tf.float16))
        if not is_gpu or (cc is not None and cc >= (8, 0)):
            run("matmul", "bfloat16", "256x256 @ 256x256", matmul(tf.bfloat16))

        x = _fresh(np, rng, (4, 16, 16, 8))
        f = _fresh(np, rng, (3, 3, 8, 16))
        windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))
        conv_ref = np.einsum("nhwcij,ijco->nhwo", windows, f)

        def conv() -> tuple[Any, float]:
            r = tf.nn.conv2d(tf.constant(x, tf.float32), tf.constant(f, tf.float32), strides=1, padding="VALID")
            return r, _rel_error(np, r.numpy(), conv_ref)

        run("conv2d", "float32", "NHWC 4x16x16x8 * 3x3x8x16", conv)

        v = _fresh(np, rng, (1 << 20,))

        def reduce() -> tuple[Any, float]:
            r = tf.reduce_sum(tf.constant(v, tf.float32))
            return r, _rel_error(np, r.numpy(), v.sum(), float(np.abs(v).sum()))

        run("reduce_sum", "float32", "2^20", reduce)
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32_before)
    return out


def _xla(tf: Any, np: Any, device: str) -> XlaRun:
    rng = np.random.default_rng()
    a = _fresh(np, rng, (128, 64))
    b = _fresh(np, rng, (64, 32))
    # exp is lowered to libdevice's __nv_expf on a GPU: without it XLA would never need libdevice and a
    # missing one ('libdevice not found') would go unnoticed; the fused elementwise part needs ptxas.
    ref = np.exp(-np.maximum(a @ b, 0)).sum(axis=1)

    def body(x: Any, y: Any) -> Any:
        return tf.reduce_sum(tf.exp(-tf.nn.relu(tf.matmul(x, y))), axis=1)

    fused = tf.function(body, jit_compile=True)

    error = ran_on = None
    max_error = None
    tf32_before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    with captured() as cap:
        try:
            with tf.device(device):
                out = fused(tf.constant(a, tf.float32), tf.constant(b, tf.float32))
            ran_on = str(out.device)
            max_error = _rel_error(np, out.numpy(), ref)
        except Exception as exc:  # noqa: BLE001 - the compiler's refusal is the fact
            error = f"{type(exc).__name__}: {_message(exc)}"
        finally:
            tf.config.experimental.enable_tensor_float_32_execution(tf32_before)
    lines, searched = xla_toolchain_lines(quiet(cap.lines))
    ok = error is None and max_error is not None and max_error <= XLA_TOLERANCE
    if error is None and not ok:
        error = f"result differs from the float64 reference by {max_error:.3g} (tolerance {XLA_TOLERANCE:g})"
    return XlaRun(device, ok, ran_on, error, tuple(lines), tuple(searched), max_error)


def multi_device_step(tf: Any, np: Any, devices: list[str], kind: str) -> MultiDeviceRun:
    """Data-parallel: each device computes the gradient of its shard, the first sums them."""
    rng = np.random.default_rng()
    per = 16
    n = per * len(devices)
    xs = _fresh(np, rng, (n, 8))
    ys = _fresh(np, rng, (n, 1))
    w = _fresh(np, rng, (8, 1))
    ref = 2.0 / n * xs.T @ (xs @ w - ys)
    tf32_before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        wt = tf.constant(w, tf.float32)
        grads = []
        ran_on: list[str] = []
        for i, dev in enumerate(devices):
            with tf.device(dev):
                xb = tf.constant(xs[i * per : (i + 1) * per], tf.float32)
                yb = tf.constant(ys[i * per : (i + 1) * per], tf.float32)
                with tf.GradientTape() as tape:
                    tape.watch(wt)
                    loss = tf.reduce_sum(tf.square(tf.matmul(xb, wt) - yb))
                g = tape.gradient(loss, wt)
            grads.append(g)
            ran_on.append(str(g.device))
        with tf.device(devices[0]):
            total = tf.add_n(grads) / n
        err = _rel_error(np, total.numpy(), ref)
        return MultiDeviceRun(tuple(devices), kind, err <= MULTI_DEVICE_TOLERANCE, tuple(ran_on), err, MULTI_DEVICE_TOLERANCE, None)
    except Exception as exc:  # noqa: BLE001
        return MultiDeviceRun(tuple(devices), kind, False, (), None, MULTI_DEVICE_TOLERANCE, _err(exc))
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32_before)


def nvml_process_usage() -> dict[str, int]:
    """What NVML says this process holds on each GPU (MiB), by normalised PCI bus id; empty where NVML
    does not list this process (no NVML, a container that hides process ids)."""
    out: dict[str, int] = {}
    me = os.getpid()
    for bus, (_free, _total, procs) in nvml_snapshot().items():
        for pid, used in procs:
            if pid == me and used is not None:
                out[bus] = used
    return out


def gpu_memory(
    tf: Any,
    nvml: dict[str, tuple[int | None, int | None, tuple[tuple[int, int | None], ...]]],
    created: list[tuple[str, str]],
    limits: dict[int, int],
    count: int,
) -> list[GpuMemory]:
    """A test allocation on each GPU; what TensorFlow's allocator may use there (its "Created device ...
    with N MB" line), what NVML said before TensorFlow started, and what it says this process holds now."""
    buses = {int(dev.split(":")[1]): normalise_bus_id(bus) for dev, bus in created}
    # What this process holds once its devices exist, before the test allocation (its CUDA context).
    base = nvml_process_usage() if nvml else {}
    infos: list[tuple[dict[str, int] | None, str | None]] = []
    for i in range(count):
        info = None
        error = None
        try:
            with tf.device(f"/GPU:{i}"):
                t = tf.random.uniform((ALLOC_ELEMENTS,), dtype=tf.float32)
                _ = float(t[0])
            raw = tf.config.experimental.get_memory_info(f"GPU:{i}")
            info = {str(k): int(v) for k, v in raw.items()}
            del t
        except Exception as exc:  # noqa: BLE001
            error = f"{type(exc).__name__}: {_message(exc)}"
        infos.append((info, error))
    held = nvml_process_usage() if nvml else {}
    out: list[GpuMemory] = []
    for i, (info, error) in enumerate(infos):
        bus = buses.get(i)
        free, total, procs = nvml.get(bus, (None, None, ())) if bus else (None, None, ())
        out.append(
            GpuMemory(
                f"/GPU:{i}", bus, limits.get(i), info, free, total, procs, error, held.get(bus or ""), base.get(bus or "")
            )
        )
    return out


def memory_limit_for(nvml: dict[str, tuple[int | None, int | None, tuple[tuple[int, int | None], ...]]]) -> int:
    """The memory_limit (MiB) for every GPU of the main TensorFlow process: MEMORY_LIMIT_MB, or a quarter
    of the least free GPU where that is less (another process may hold most of it)."""
    free = [f for f, _t, _p in nvml.values() if f is not None]
    if not free:
        return MEMORY_LIMIT_MB
    return max(MEMORY_LIMIT_MIN_MB, min(MEMORY_LIMIT_MB, min(free) // 4))


def growth_kept_with_logical_devices(tf: Any, physical: list[Any]) -> bool | None:
    """Whether this TensorFlow keeps memory growth once a logical device is configured (the CPU split is
    already set): growth on, TensorFlow's own computation of the GPU options read, growth off again (the
    GPUs then get a memory_limit). TensorFlow 2.21 drops it. None where it cannot be read."""
    try:
        from tensorflow.python.eager import context

        for dev in physical:
            tf.config.experimental.set_memory_growth(dev, True)
        try:
            options = context.context()._compute_device_options("GPU")
            kept = bool(options.allow_growth)
        finally:
            for dev in physical:
                tf.config.experimental.set_memory_growth(dev, False)
        return kept
    except Exception:  # noqa: BLE001 - a private API: another TensorFlow may not have it
        return None


def _section(errors: dict[str, str], name: str, fn: Callable[[], Any], default: Any, capture: bool = True) -> Any:
    """Run one section of the placement step; an unexpected exception is recorded, the rest goes on.
    TensorFlow's output of the section (the placement log) is captured unless ``capture`` is off."""
    stage(f"placement: {name}")
    try:
        if not capture:
            return fn()
        with captured():
            return fn()
    except Exception as exc:  # noqa: BLE001
        errors[name] = _err(exc)
        return default


def _bind(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: fn(*args)


def _unimportable(exc: BaseException) -> TfPlacementFacts:
    return TfPlacementFacts(False, _err(exc), None, (), (), 0, None, (), None, (), (), None, ())


def initialise_devices(tf: Any, device_type: str | None, lines: list[str]) -> list[str]:
    """Create TensorFlow's devices (listing the logical ones does) with its output captured, for its "Created
    device" lines: they land in ``lines``, also when creation raises (where TensorFlow dies creating them,
    its last words reach the parent through the capture file, CAPTURE_ENV)."""
    cap = None
    try:
        with captured() as cap:
            return [str(d.name) for d in tf.config.list_logical_devices(device_type)]
    finally:
        # The block's lines are there once it has closed, also when the listing raised.
        if cap is not None:
            lines.extend(cap.lines)


def deep_from_env() -> bool:
    """--gpucheck-deep, as the parent hands it down (DEEP_ENV)."""
    try:
        return parse_switch(os.environ.get(DEEP_ENV, ""))
    except ValueError:
        return False


def placement_steps(timeout: float) -> Iterator[tuple[TfPlacementFacts, float | None]]:
    """The placement steps, in a process where TensorFlow is imported and its devices not yet initialised.
    After each step: the facts so far, and how long the next step may take (None: what is left of the
    probe's own deadline)."""
    try:
        import numpy as np
        import tensorflow as tf
    except Exception as exc:  # noqa: BLE001 - reported by the framework probe as well
        yield _unimportable(exc), None
        return
    errors: dict[str, str] = {}
    version = str(getattr(tf, "__version__", "unknown"))
    step_budget = max(MIN_STEP_BUDGET, STEP_SHARE * timeout)
    facts = TfPlacementFacts(True, None, version, (), (), 0, None, (), None, (), (), None, (), errors)

    def now(**changes: Any) -> TfPlacementFacts:
        nonlocal facts
        facts = dataclasses.replace(facts, errors=dict(errors), **changes)
        return facts

    # Before the devices are initialised: the placement log (it cannot be switched on later for
    # functions), the CPU split, a bounded memory limit on every GPU.
    _section(errors, "log device placement", lambda: tf.debugging.set_log_device_placement(True), None, capture=False)
    physical = _section(
        errors,
        "list GPUs",
        lambda: [d for d in tf.config.list_physical_devices("GPU") if getattr(d, "device_type", None) == "GPU"],
        [],
        capture=False,
    )
    gpus = tuple(TfDevice(str(d.name), "GPU", _gpu_details(tf, d)) for d in physical)
    nvml = nvml_snapshot() if gpus else {}

    def split_cpu() -> int:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * CPU_SPLIT)
        return CPU_SPLIT

    cpu_split: int = _section(errors, "split the CPU", split_cpu, 0, capture=False)
    kept = growth_kept_with_logical_devices(tf, physical) if physical else None
    limit = memory_limit_for(nvml) if physical else None

    def bound() -> None:
        for dev in physical:
            tf.config.set_logical_device_configuration(dev, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])

    _section(errors, "memory limit", bound, None, capture=False)
    yield now(gpus=gpus, cpu_split=cpu_split, memory_limit_mb=limit, growth_kept_with_logical_devices=kept), None

    init_lines: list[str] = []
    logical = _section(errors, INIT_SECTION, _bind(initialise_devices, tf, None, init_lines), [], capture=False)
    created = created_devices(init_lines)
    limits = created_limits(init_lines)
    yield now(logical_devices=tuple(logical), created_devices=tuple(created)), step_budget
    if INIT_SECTION in errors:
        return  # Every op would fail the same way: the error of the device creation is the fact.

    soft_default = _section(errors, "soft placement default", lambda: bool(tf.config.get_soft_device_placement()), None)
    runs: list[OpRun] = []

    def placements() -> None:
        for requested in [f"/GPU:{i}" for i in range(len(gpus) + 1)]:
            for soft in (False, True):
                for mode in ("eager", "function"):
                    stage(f"placement: {mode} op on {requested}, soft placement {'on' if soft else 'off'}")
                    runs.append(_place_matmul(tf, np, requested, mode, soft))

    try:
        _section(errors, "placement", placements, None)
    finally:
        if soft_default is not None:
            with contextlib.suppress(Exception):
                tf.config.set_soft_device_placement(soft_default)
    yield now(soft_placement_default=soft_default, runs=tuple(runs)), step_budget

    training = _section(errors, "training step", _bind(_training_step, tf, np, "/GPU:0", bool(gpus)), None)
    yield now(training_step=training), step_budget

    numerics: list[NumericCheck] = []
    xla: list[XlaRun] = []
    # Numerics and XLA say something about a GPU where there is one; on the CPU alone (no GPU registered)
    # they only check the checks themselves, which --gpucheck-deep asks for.
    compute_devices = [f"/GPU:{i}" for i in range(len(gpus))] or (["/CPU:0"] if deep_from_env() else [])
    for i, dev in enumerate(compute_devices):
        cc = compute_capability(gpus[i].details) if gpus else None
        numerics.extend(_section(errors, f"numerics on {dev}", _bind(_numerics, tf, np, dev, cc), []))
        yield now(numerics=tuple(numerics)), step_budget
        run = _section(errors, f"XLA on {dev}", _bind(_xla, tf, np, dev), None)
        if run is not None:
            xla.append(run)
        yield now(xla=tuple(xla)), step_budget

    if len(gpus) >= 2:
        md_devices, kind = [f"/GPU:{i}" for i in range(len(gpus))], "gpus"
    else:
        md_devices, kind = [f"/CPU:{i}" for i in range(max(cpu_split, 1))], "logical-cpus"
    if len(md_devices) >= 2:
        multi = _section(errors, "multi-device step", _bind(multi_device_step, tf, np, md_devices, kind), None)
        yield now(multi_device=multi), step_budget
    if gpus:
        memory = _section(errors, "memory", _bind(gpu_memory, tf, nvml, created, limits, len(gpus)), [])
        yield now(memory=tuple(memory)), None


def placement_facts(timeout: float) -> Iterator[tuple[PlacementFacts, float | None]]:
    """The placement layer's step of the TensorFlow child (``Layer.tf_steps``): the placement steps' facts
    with the environment TensorFlow reads; a fault of the step itself is recorded with the facts so far."""
    env = {k: os.environ.get(k) for k in ENV_KEYS}
    last: TfPlacementFacts | None = None
    try:
        for last, budget in placement_steps(timeout):
            yield PlacementFacts(last, env), budget
    except Exception as exc:  # noqa: BLE001 - a fault of the probe itself: a fact, not a dead TensorFlow
        base = last or TfPlacementFacts(True, None, None, (), (), 0, None, (), None, (), (), None, ())
        broken = dataclasses.replace(base, errors={**base.errors, "placement step": _err(exc)})
        yield PlacementFacts(broken, env), None
