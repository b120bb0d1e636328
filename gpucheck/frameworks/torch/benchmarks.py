"""The performance layer's benchmark child in PyTorch: how well torch uses each device (``--gpucheck-benchmarks``
where PyTorch is the measuring framework: ``gpucheck.registry.measuring_framework``).

Started by the parent after the diagnosis has ended (``Diagnosis.measure``), as TensorFlow's is, with the same plan
(``GPUCHECK_BENCH_PLAN``, the benchmarks ``units.BENCHMARKS`` names) and the same timing (:func:`gpucheck.performance.timing.timed`):
inputs made on the device before any timing, a warm-up round (cuBLAS/cuDNN handles, autotuning), rounds of chained units
of work each synchronised once at its end (``torch.cuda.synchronize``; nothing on the CPU, whose ops have finished when
they return). Each benchmark's facts are written at once (:class:`~gpucheck.protocol.Checkpoint`): a benchmark that
hangs ends the child at its budget, and what was measured before stands.

The plan names devices as every framework's benchmarks are named (``/CPU:0``, ``/GPU:i``: the i-th GPU torch lists,
which is ``cuda:i``). Torch runs programs eagerly, as most torch programs do: a unit of work is one op issued from
Python. The all-reduce runs ``torch.distributed`` across processes, one per device (NCCL on GPUs, gloo on the CPU,
where the plan's CPU devices are processes sharing the CPU's cores), rendezvous through a file.
"""

from __future__ import annotations

import importlib
import json
import math
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpucheck.facts import to_json
from gpucheck.performance import timing
from gpucheck.performance.facts import BenchmarkRun, PerformanceFacts
from gpucheck.performance.plan import BENCH_PLAN_ENV, Spec, from_env
from gpucheck.performance.timing import Measurement, timed
from gpucheck.protocol import Checkpoint, stage, timeout_from_env

NAME = "torch"


def probe_performance() -> Iterator[Checkpoint]:
    specs = from_env(os.environ.get(BENCH_PLAN_ENV, ""))
    planned = tuple(s.name for s in specs)
    # The parent's timeout covers every benchmark and the start: each one may take its share.
    budget = timeout_from_env() / (len(specs) + 2)
    stage("import torch")
    try:
        torch: Any = importlib.import_module("torch")
    except Exception as exc:  # noqa: BLE001 - a fact: the benchmarks cannot start
        error = f"{type(exc).__name__}: {exc}"
        yield Checkpoint(to_json(PerformanceFacts(None, (), (), error, True, planned, NAME)), None)
        return
    stage("devices")
    setup_error = None
    try:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        devices = ("cpu", *(f"cuda:{i}" for i in range(gpus)))
    except Exception as exc:  # noqa: BLE001 - a fact: the benchmarks cannot start
        devices, setup_error = (), f"{type(exc).__name__}: {exc}"
    runs: list[BenchmarkRun] = []
    version = str(torch.__version__)

    def facts(finished: bool) -> Any:
        return to_json(PerformanceFacts(None, devices, tuple(runs), setup_error, finished, planned, NAME, version))

    yield Checkpoint(facts(setup_error is not None), budget)
    if setup_error is not None:
        return
    bench = _Bench(torch, budget)
    for spec in specs:
        stage(f"benchmark {spec.name}")
        runs.append(bench.run(spec))
        yield Checkpoint(facts(False), budget)
    yield Checkpoint(facts(True), None)


def torch_device(name: str) -> str:
    """The plan's device name as torch names it: ``/GPU:1`` -> ``cuda:1``; every ``/CPU:k`` -> ``cpu``."""
    kind, _, index = name.lstrip("/").partition(":")
    return f"cuda:{index or 0}" if kind.upper() == "GPU" else "cpu"


class _Bench:
    """Runs one benchmark of each kind; every method returns ``(units per round, rounds, extra_info)`` or raises."""

    def __init__(self, torch: Any, budget: float | None) -> None:
        self.torch = torch
        self.budget = budget

    def run(self, spec: Spec) -> BenchmarkRun:
        matmul_tf32, cudnn_tf32 = self._tf32()

        def measure() -> Measurement:
            method = KIND_METHODS.get(spec.kind)
            if method is None or (spec.kind == "launch" and spec.variant != "eager"):
                raise LookupError(f"no PyTorch benchmark of the kind {spec.kind!r} ({spec.variant})")
            return method(self, spec)

        def restore() -> None:
            self._set_tf32(matmul_tf32, cudnn_tf32)  # as the program had them
            self._release(spec)

        return timing.benchmark_run(spec, ",".join(torch_device(d) for d in spec.devices), measure, restore)

    # --- helpers ---

    def _tf32(self) -> tuple[Any, Any]:
        backends = self.torch.backends
        return getattr(backends.cuda.matmul, "allow_tf32", None), getattr(backends.cudnn, "allow_tf32", None)

    def _set_tf32(self, matmul: Any, cudnn: Any) -> None:
        backends = self.torch.backends
        if isinstance(matmul, bool):
            backends.cuda.matmul.allow_tf32 = matmul
        if isinstance(cudnn, bool):
            backends.cudnn.allow_tf32 = cudnn

    def _release(self, spec: Spec) -> None:
        """The GPU memory a benchmark's tensors held, handed back to the driver (the next one may be in processes of
        its own, the all-reduce)."""
        if any(torch_device(d) != "cpu" for d in spec.devices):
            self.torch.cuda.empty_cache()

    def _sync(self, *devices: str) -> Callable[[Any], None]:
        """Wait for the devices once: each GPU's streams (a copy between GPUs: both); nothing on the CPU."""
        gpus = [d for d in dict.fromkeys(devices) if d != "cpu"]
        synchronize = self.torch.cuda.synchronize

        def wait(_result: Any) -> None:
            for gpu in gpus:
                synchronize(gpu)

        return wait

    def _random(self, shape: tuple[int, ...], dtype: str, device: str, scale: float = 1.0) -> Any:
        torch = self.torch
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(shape, generator=gen) * scale
        return x.to(device=device, dtype=getattr(torch, "float32" if dtype == "tf32" else dtype))

    # --- the benchmarks ---

    def _matmul(self, spec: Spec) -> Measurement:
        """Chained ``c = c @ b`` of n×n matrices (b scaled by 1/√n, so values stay bounded in float16); float32
        with TF32 off, ``tf32`` with it on (``torch.backends.cuda.matmul.allow_tf32``)."""
        torch = self.torch
        dev, dtype = torch_device(spec.devices[0]), spec.dtype or "float32"
        on_gpu = dev != "cpu"
        n = 8192 if on_gpu else (1024 if dtype == "float32" else 512)
        if on_gpu:
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        a = self._random((n, n), dtype, dev)
        b = self._random((n, n), dtype, dev, 1 / math.sqrt(n))

        def work(k: int) -> Callable[[], Any]:
            def chain() -> Any:
                c = a
                for _ in range(k):
                    c = c @ b
                return c

            return chain

        iterations, rounds = timed(work, self._sync(dev), timing.measure_time(headline=True))
        figures = timing.throughput(2.0 * n**3, iterations, rounds)
        return iterations, rounds, {"shape": [n, n, n], **figures, "tf32": dtype == "tf32" if on_gpu else None}

    def _copy(self, spec: Spec) -> Measurement:
        """Copy bandwidth (bytes copied per second). ``host``: a host-memory copy (``clone``); ``h2d-pinned``: from
        page-locked memory (``pin_memory``), ``non_blocking``, the bare DMA; ``h2d-pageable``: from ordinary memory,
        which CUDA stages through a pinned buffer of its own; ``d2h``: to ordinary memory (``.cpu()``); ``d2d``: a
        device-memory copy, which reads and writes each byte (``memory_gbps`` counts both); ``peer``: GPU to GPU."""
        variant = spec.variant or "host"
        dev = torch_device(spec.devices[0])
        on_gpu = dev != "cpu"
        nbytes = (256 if on_gpu else 64) * 1024 * 1024
        count = nbytes // 4
        src_dev = "cpu" if variant in ("h2d-pinned", "h2d-pageable") else dev
        dst_dev = {"d2h": "cpu", "peer": torch_device(spec.devices[-1])}.get(variant, dev)
        src = self._random((count,), "float32", src_dev)
        if variant == "h2d-pinned":
            src = src.pin_memory()
        blocking = variant != "h2d-pinned"

        def work(k: int) -> Callable[[], Any]:
            if variant in ("host", "d2d"):

                def copies() -> Any:
                    x = src
                    for _ in range(k):
                        x = x.clone()
                    return x

                return copies

            def transfers() -> Any:
                out = None
                for _ in range(k):
                    out = src.to(dst_dev, non_blocking=not blocking)
                return out

            return transfers

        iterations, rounds = timed(work, self._sync(dev, dst_dev))
        extra: dict[str, Any] = {"bytes": nbytes, "pinned": variant == "h2d-pinned"}
        extra.update(timing.bandwidth(nbytes, iterations, rounds))
        if variant == "d2d":
            extra["memory_gbps"] = 2 * extra["gbps"]
        extra["direction"] = variant
        return iterations, rounds, extra

    def _conv(self, spec: Spec) -> Measurement:
        """A ResNet-like 3×3 convolution, NCHW (torch's own layout), 64 → 64 channels at 56×56, chained (cuDNN on a
        GPU, TF32 off: ``torch.backends.cudnn.allow_tf32``)."""
        torch = self.torch
        conv2d = torch.nn.functional.conv2d
        dev, dtype = torch_device(spec.devices[0]), spec.dtype or "float32"
        on_gpu = dev != "cpu"
        batch, hw, ch = (64 if on_gpu else 4), 56, 64
        if on_gpu:
            torch.backends.cudnn.allow_tf32 = False
        x = self._random((batch, ch, hw, hw), dtype, dev)
        w = self._random((ch, ch, 3, 3), dtype, dev, 1 / math.sqrt(9 * ch))

        def work(k: int) -> Callable[[], Any]:
            def chain() -> Any:
                y = x
                with torch.no_grad():
                    for _ in range(k):
                        y = conv2d(y, w, padding=1)
                return y

            return chain

        iterations, rounds = timed(work, self._sync(dev))
        figures = timing.throughput(2.0 * batch * hw * hw * ch * ch * 9, iterations, rounds)
        shapes = {"shape": [batch, ch, hw, hw], "filter": [ch, ch, 3, 3], "layout": "NCHW"}
        return iterations, rounds, {**shapes, **figures}

    def _launch(self, spec: Spec) -> Measurement:
        """Kernel-launch latency: a chain of tiny ops (sin of a one-element tensor), issued eagerly one by one. A
        unit is one op."""
        torch = self.torch
        dev = torch_device(spec.devices[0])
        x = self._random((1,), "float32", dev)

        def work(k: int) -> Callable[[], Any]:
            def ops() -> Any:
                y = x
                for _ in range(k):
                    y = torch.sin(y)
                return y

            return ops

        # A round chains thousands of ops: its own cost (one call, one synchronisation) is spread over them.
        iterations, rounds = timed(work, self._sync(dev), max_iterations=4096)
        return iterations, rounds, {"mode": "eager", **timing.latency(iterations, rounds)}

    def _allreduce(self, spec: Spec) -> Measurement:
        """A sum all-reduce with ``torch.distributed`` across one process per device (NCCL on GPUs, gloo on the
        CPU), checked for the right answer; bus bandwidth as nccl-tests computes it: ``busbw = algbw × 2(n−1)/n``.
        The processes agree on the units per round and on when to stop (each round the same on every rank)."""
        n = len(spec.devices)
        on_gpu = any(torch_device(d) != "cpu" for d in spec.devices)
        backend = "nccl" if on_gpu else "gloo"
        count = (64 if on_gpu else 4) * 1024 * 1024 // 4
        ctx = multiprocessing.get_context("spawn")
        with tempfile.TemporaryDirectory(prefix="gpucheck-allreduce-") as folder:
            where = Path(folder)
            procs = [
                ctx.Process(
                    target=allreduce_rank,
                    args=(rank, n, backend, torch_device(spec.devices[rank]), count, str(where)),
                    daemon=True,
                )
                for rank in range(n)
            ]
            for p in procs:
                p.start()
            deadline = time.monotonic() + (self.budget or 0.0)
            for p in procs:
                p.join(max(0.0, deadline - time.monotonic()) if self.budget else None)
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join()
            results = []
            for rank in range(n):
                out = where / f"rank{rank}.json"
                results.append(json.loads(out.read_text()) if out.exists() else None)
        errors = [f"rank {r}: {res['error']}" for r, res in enumerate(results) if res and res.get("error")]
        if errors:
            raise RuntimeError("; ".join(errors))
        first = results[0]  # rank 0 writes the rounds, every rank its error
        if first is None:
            codes = [p.exitcode for p in procs]
            raise RuntimeError(f"the {backend} processes ended without a result (exit codes {codes})")
        iterations, rounds = int(first["iterations"]), [float(r) for r in first["rounds"]]
        figures = timing.bus_bandwidth(count * 4, n, iterations, rounds)
        return iterations, rounds, {**figures, "backend": backend, "processes": n}


def allreduce_rank(rank: int, world: int, backend: str, device: str, count: int, folder: str) -> None:
    """One process of the all-reduce (spawned: a fresh interpreter, CUDA not yet initialised): join the group through a
    file store, check the sum, time rounds agreed with the others; rank 0 writes the rounds, any rank its error."""
    out = Path(folder) / f"rank{rank}.json"
    try:
        torch: Any = importlib.import_module("torch")
        dist: Any = importlib.import_module("torch.distributed")

        if device != "cpu":
            torch.cuda.set_device(device)
        store = dist.FileStore(str(Path(folder) / "store"), world)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world)
        try:
            x = torch.full((count,), float(rank + 1), device=device)
            check = x.clone()
            dist.all_reduce(check)
            want = world * (world + 1) / 2
            low, high = float(check.min()), float(check.max())
            if low != want or high != want:
                raise ArithmeticError(f"the all-reduce returned values from {low} to {high}, not {want}")

            def agree(value: float) -> float:
                t = torch.tensor([value], dtype=torch.float64, device=device)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                return float(t.item())

            def work(k: int) -> Callable[[], Any]:
                def reduce() -> Any:
                    for _ in range(k):
                        dist.all_reduce(x)
                        x.mul_(1.0 / world)
                    return x

                return reduce

            sync = (lambda _r: None) if device == "cpu" else (lambda _r: torch.cuda.synchronize(device))
            iterations, rounds = timed(work, sync, agree=agree)
        finally:
            dist.destroy_process_group()
        if rank == 0:
            out.write_text(json.dumps({"iterations": iterations, "rounds": rounds}))
    except Exception as exc:  # noqa: BLE001 - a fact of this benchmark, written for the child to report
        out.write_text(json.dumps({"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:1000]}"}))


#: The method that measures each kind of benchmark torch measures (``units.BENCHMARKS``).
KIND_METHODS: dict[str, Callable[[_Bench, Spec], Measurement]] = {
    "matmul": _Bench._matmul,
    "copy": _Bench._copy,
    "conv": _Bench._conv,
    "launch": _Bench._launch,
    "allreduce": _Bench._allreduce,
}
