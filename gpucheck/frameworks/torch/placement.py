"""PyTorch's placement layer, in its child after its framework facts (``gpucheck.frameworks.torch.child``, staged by
``gpucheck.probes.steps``): on each GPU torch can use (``cuda:N``),

- placement: a tensor made there, and an op's result on it, are there (the first op on a GPU creates its context: a
  GPU in exclusive-process mode held by another process, or prohibited, refuses it here with "CUDA-capable device(s)
  is/are busy or unavailable");
- numerics: matmul in float32 with TF32 off, in TF32 (compute capability 8.0 and later), float16 and bfloat16, a
  cuDNN convolution and a large sum agree with a float64 reference on the CPU (fresh random inputs);
- training: one SGD step of a small network agrees with the same step in float64 on the CPU from the same weights
  and data, on each GPU, and with its two layers split over two GPUs where there are two.

Where torch can use no GPU they run on the CPU only under --gpucheck-deep: a check of the checks. torch's own settings
(TF32, cuDNN's) are put back as they were after each check.
"""

from __future__ import annotations

import contextlib
import importlib
import math
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

from gpucheck.facts import NUMERIC_TOLERANCE, NumericCheck
from gpucheck.frameworks.torch.facts import (
    TorchNumericsFacts,
    TorchOpRun,
    TorchPlacementFacts,
    TorchTrainingFacts,
    TorchTrainingRun,
)
from gpucheck.protocol import stage
from gpucheck.settings import deep_from_env

#: The share of --gpucheck-timeout each part of a step may take, and its least.
STEP_SHARE = 0.5
MIN_STEP_BUDGET = 10.0
#: The numerics' tolerances, TensorFlow's (``gpucheck.facts.NUMERIC_TOLERANCE``), with the 2^20-element sum's.
TOLERANCE = {**NUMERIC_TOLERANCE, ("sum", "float32"): 1e-4}
#: One SGD step in float32 (TF32 off) against float64: the weights after it agree to about 1e-7 on a CPU.
TRAINING_TOLERANCE = 1e-4


@dataclass(frozen=True)
class TorchContext:
    """What the set-up hands the steps: torch, the devices they run on, each GPU's compute capability, each part's
    time."""

    torch: Any
    devices: tuple[str, ...]
    capability: dict[str, tuple[int, int] | None]
    budget: float


def error_text(exc: BaseException) -> str:
    """The exception in one line (torch's CUDA errors run over several: the first says what happened)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]


def set_up(timeout: float) -> Generator[tuple[Any, float | None], None, TorchContext | None]:
    """The devices the steps run on: every GPU torch can use, else the CPU under --gpucheck-deep, else none (no step
    runs). It writes no facts of its own: the framework facts already list the devices."""
    torch: Any = importlib.import_module("torch")
    stage("placement: the GPUs torch can use")
    count = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    devices = tuple(f"cuda:{i}" for i in range(count))
    capability: dict[str, tuple[int, int] | None] = {}
    for i, dev in enumerate(devices):
        try:
            major, minor = torch.cuda.get_device_capability(i)
            capability[dev] = (int(major), int(minor))
        except Exception:  # noqa: BLE001 - the framework facts have the device's error; the checks still run
            capability[dev] = None
    if not devices and deep_from_env():
        devices = ("cpu",)
    if not devices:
        return None
    if False:  # a generator that hands back no facts of its own
        yield None, None
    return TorchContext(torch, devices, capability, max(MIN_STEP_BUDGET, timeout * STEP_SHARE))


@contextlib.contextmanager
def exact_float32(torch: Any) -> Iterator[None]:
    """TF32 off for matmuls and cuDNN convolutions (full float32), torch's settings as they were afterwards."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def _synchronize(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def placement_step(ctx: TorchContext, timeout: float) -> Iterator[tuple[TorchPlacementFacts, float | None]]:
    """A tensor made on each device and a matmul of it there: where each is (``Unit.steps``)."""
    torch = ctx.torch
    runs: list[TorchOpRun] = []
    yield TorchPlacementFacts(()), ctx.budget
    for dev in ctx.devices:
        stage(f"placement on {dev}")
        try:
            x = torch.arange(16, dtype=torch.float32, device=dev).reshape(4, 4)
            y = x @ x.T
            _synchronize(torch, dev)
            runs.append(TorchOpRun(dev, str(x.device), str(y.device)))
        except Exception as exc:  # noqa: BLE001 - a device that refuses a tensor is the fact
            runs.append(TorchOpRun(dev, None, None, error_text(exc)))
        yield TorchPlacementFacts(tuple(runs)), ctx.budget


def _rel_error(torch: Any, out: Any, ref: Any, scale: float | None = None) -> float:
    """max |out - ref| / max |ref| (or / ``scale``), in float64 on the CPU."""
    diff = float((out.detach().to("cpu", torch.float64) - ref).abs().max())
    denom = scale if scale is not None else float(ref.abs().max())
    return diff / denom if denom > 0 else float("inf")


def _fresh(torch: Any, generator: Any, *shape: int) -> Any:
    """Standard-normal float64 inputs on the CPU from a fresh generator: never zeros (checked, not assumed)."""
    while True:
        t = torch.randn(*shape, dtype=torch.float64, generator=generator)
        if bool((t != 0).all()):
            return t


def numerics(torch: Any, device: str, cc: tuple[int, int] | None) -> list[NumericCheck]:
    generator = torch.Generator().manual_seed(int(torch.randint(1 << 30, ()).item()))
    is_gpu = device.startswith("cuda")
    out: list[NumericCheck] = []

    def check(op: str, precision: str, shape: str, fn: Callable[[], tuple[Any, float]]) -> None:
        tol = TOLERANCE[(op, "float32" if precision == "tensorfloat32" and op != "matmul" else precision)]
        stage(f"numerics on {device}: {op} in {precision}")
        try:
            result, err = fn()
            _synchronize(torch, device)
            out.append(NumericCheck(device, op, precision, err <= tol, str(result.device), err, tol, None, shape))
        except Exception as exc:  # noqa: BLE001 - an op that cannot run is a fact too
            out.append(NumericCheck(device, op, precision, False, None, None, tol, error_text(exc), shape))

    a, b = _fresh(torch, generator, 256, 256), _fresh(torch, generator, 256, 256)
    ref = a @ b

    def matmul(dtype: Any, tf32: bool = False) -> Callable[[], tuple[Any, float]]:
        def go() -> tuple[Any, float]:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                r = a.to(device, dtype) @ b.to(device, dtype)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False
            return r, _rel_error(torch, r, ref)

        return go

    with exact_float32(torch):
        check("matmul", "float32", "256x256 @ 256x256", matmul(torch.float32))
        if is_gpu and cc is not None and cc >= (8, 0):
            check("matmul", "tensorfloat32", "256x256 @ 256x256", matmul(torch.float32, tf32=True))
        if not is_gpu or (cc is not None and cc >= (5, 3)):
            check("matmul", "float16", "256x256 @ 256x256", matmul(torch.float16))
        if not is_gpu or (cc is not None and cc >= (8, 0)):
            check("matmul", "bfloat16", "256x256 @ 256x256", matmul(torch.bfloat16))

        x, w = _fresh(torch, generator, 4, 8, 16, 16), _fresh(torch, generator, 16, 8, 3, 3)
        conv_ref = torch.nn.functional.conv2d(x, w)

        def conv() -> tuple[Any, float]:
            r = torch.nn.functional.conv2d(x.to(device, torch.float32), w.to(device, torch.float32))
            return r, _rel_error(torch, r, conv_ref)

        check("conv2d", "float32", "NCHW 4x8x16x16 * 16x8x3x3", conv)

        v = _fresh(torch, generator, 1 << 20)

        def total() -> tuple[Any, float]:
            r = v.to(device, torch.float32).sum()
            return r, _rel_error(torch, r, v.sum(), float(v.abs().sum()))

        check("sum", "float32", "2^20", total)
    return out


def numerics_step(ctx: TorchContext, timeout: float) -> Iterator[tuple[TorchNumericsFacts, float | None]]:
    """The numerics of each device (``Unit.steps``): the facts after each."""
    found: list[NumericCheck] = []
    errors: dict[str, str] = {}
    yield TorchNumericsFacts(()), ctx.budget
    for dev in ctx.devices:
        try:
            found.extend(numerics(ctx.torch, dev, ctx.capability.get(dev)))
        except Exception as exc:  # noqa: BLE001 - the inputs or the reference failed: recorded, the next device runs
            errors[f"numerics on {dev}"] = error_text(exc)
        yield TorchNumericsFacts(tuple(found), dict(errors)), ctx.budget


def _network(torch: Any, generator: Any) -> tuple[list[Any], Any, Any]:
    """The weights of a two-layer network (64 -> 128 -> 10) and a batch of 32 inputs with their classes, in float64
    on the CPU."""
    weights = [_fresh(torch, generator, 128, 64) * 0.1, _fresh(torch, generator, 128) * 0.1,
               _fresh(torch, generator, 10, 128) * 0.1, _fresh(torch, generator, 10) * 0.1]
    data = _fresh(torch, generator, 32, 64)
    classes = torch.randint(0, 10, (32,), generator=generator)
    return weights, data, classes


def _sgd_step(torch: Any, weights: list[Any], data: Any, classes: Any, where: tuple[str, str], dtype: Any
              ) -> tuple[list[Any], float]:
    """One SGD step (learning rate 0.1) of the network, its first layer on ``where[0]`` and its second on
    ``where[1]``: the weights after it, on the CPU in float64, and the loss before it."""
    first, second = where
    params = [w.detach().to(first if i < 2 else second, dtype, copy=True).requires_grad_() for i, w in enumerate(weights)]
    hidden = torch.relu(data.to(first, dtype) @ params[0].T + params[1])
    logits = hidden.to(second) @ params[2].T + params[3]
    loss = torch.nn.functional.cross_entropy(logits, classes.to(second))
    loss.backward()
    with torch.no_grad():
        after = [(p - 0.1 * p.grad).to("cpu", torch.float64) for p in params]
    return after, float(loss.detach().item())


def training(torch: Any, devices: tuple[str, ...]) -> TorchTrainingRun:
    """One step on ``devices`` (one: the whole network there; two: a layer on each) against float64 on the CPU."""
    generator = torch.Generator().manual_seed(int(torch.randint(1 << 30, ()).item()))
    weights, data, classes = _network(torch, generator)
    reference, reference_loss = _sgd_step(torch, weights, data, classes, ("cpu", "cpu"), torch.float64)
    where = (devices[0], devices[-1])
    stage(f"training step on {', '.join(devices)}")
    try:
        with exact_float32(torch):
            after, loss = _sgd_step(torch, weights, data, classes, where, torch.float32)
            for dev in devices:
                _synchronize(torch, dev)
    except Exception as exc:  # noqa: BLE001 - a step that cannot run is the fact
        return TorchTrainingRun(devices, False, None, TRAINING_TOLERANCE, None, reference_loss, error_text(exc))
    errors = [float((a - r).abs().max()) / max(float(r.abs().max()), 1e-12) for a, r in zip(after, reference, strict=True)]
    # A NaN anywhere is the result (max() would pass over one that is not first), and fails the comparison.
    err = next((e for e in errors if not math.isfinite(e)), max(errors))
    return TorchTrainingRun(devices, err <= TRAINING_TOLERANCE, err, TRAINING_TOLERANCE, loss, reference_loss)


def training_step(ctx: TorchContext, timeout: float) -> Iterator[tuple[TorchTrainingFacts, float | None]]:
    """A training step on each device, then split over the first two GPUs (``Unit.steps``)."""
    runs: list[TorchTrainingRun] = []
    errors: dict[str, str] = {}
    yield TorchTrainingFacts(()), ctx.budget
    gpus = tuple(d for d in ctx.devices if d.startswith("cuda"))
    for devices in [(d,) for d in ctx.devices] + ([gpus[:2]] if len(gpus) >= 2 else []):
        try:
            runs.append(training(ctx.torch, devices))
        except Exception as exc:  # noqa: BLE001 - the reference itself failed: recorded, the next run goes on
            errors[f"training step on {', '.join(devices)}"] = error_text(exc)
        yield TorchTrainingFacts(tuple(runs), dict(errors)), ctx.budget
