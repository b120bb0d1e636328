"""The performance layer's benchmark child: how well TensorFlow uses each device.

Started by the parent after the diagnosis of the layers below has ended (``Diagnosis.measure``), so no
other probe of ours competes for the CPU or the GPUs while it times. It splits the CPU into
:data:`~gpucheck.performance.plan.LOGICAL_CPUS` logical devices before TensorFlow initialises (the
multi-device code paths run on them where there is no second GPU), then measures each benchmark of the
plan the parent handed down (``GPUCHECK_BENCH_PLAN``) and writes its facts at once
(:class:`~gpucheck.protocol.Checkpoint`): a benchmark that hangs ends the child at its budget, and what
was measured before stands.

How each benchmark is timed is the performance unit's (:func:`gpucheck.performance.timing.timed`, PyTorch's
benchmarks time theirs the same way): its inputs are made on its device before any timing; the work of one round is a
``tf.function`` traced and run (warm-up) before timing, so tracing, graph optimisation, autotuning and PTX JIT are out
of the timings; a round chains its units of work and synchronises the device once, at its end.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from gpucheck.facts import to_json
from gpucheck.frameworks.tensorflow.imports import import_tensorflow
from gpucheck.performance.facts import BenchmarkRun, PerformanceFacts
from gpucheck.performance.plan import BENCH_PLAN_ENV, LOGICAL_CPUS, MATPOW_REFERENCES, Spec, from_env
from gpucheck.performance.timing import (
    Measurement,
    bandwidth,
    benchmark_run,
    bus_bandwidth,
    latency,
    measure_time,
    throughput,
)
from gpucheck.performance.timing import med as _med
from gpucheck.performance.timing import timed as _timed
from gpucheck.protocol import Checkpoint, stage, timeout_from_env

F = TypeVar("F", bound=Callable[..., Any])


def _graph(tf: Any) -> Callable[[F], F]:
    """``tf.function`` without XLA (TensorFlow's default executor, as most programs run), typed."""

    def wrap(fn: F) -> F:
        return cast(F, tf.function(fn, jit_compile=False))

    return wrap


def probe_performance() -> Iterator[Checkpoint]:
    specs = from_env(os.environ.get(BENCH_PLAN_ENV, ""))
    # The parent's timeout covers every benchmark and the start: each one may take its share (twice
    # --gpucheck-timeout, session.measured: a first run on a GPU may JIT-compile kernels from PTX).
    budget = timeout_from_env() / (len(specs) + 2)
    stage("import tensorflow")
    try:
        tf: Any = import_tensorflow()
    except Exception as exc:  # noqa: BLE001 - a fact: the benchmarks cannot start
        error = f"{type(exc).__name__}: {exc}"
        planned = tuple(s.name for s in specs)
        yield Checkpoint(to_json(PerformanceFacts(None, (), (), error, True, planned, "tensorflow")), None)
        return
    stage("logical CPU devices")
    setup_error = None
    try:
        cpus = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(LOGICAL_CPUS)]
        )
        devices = tuple(d.name for d in tf.config.list_logical_devices())
    except Exception as exc:  # noqa: BLE001 - a fact: the benchmarks cannot start
        devices, setup_error = (), f"{type(exc).__name__}: {exc}"
    runs: list[BenchmarkRun] = []

    def facts(finished: bool) -> Any:
        planned = tuple(s.name for s in specs)
        # Figures across benchmarks as soon as both sides are measured: a later hang leaves them standing.
        figures = tuple(derive(runs))
        version = tf.__version__
        return to_json(PerformanceFacts(version, devices, figures, setup_error, finished, planned, "tensorflow", version))

    yield Checkpoint(facts(setup_error is not None), budget)
    if setup_error is not None:
        return
    bench = _Bench(tf)
    for spec in specs:
        stage(f"benchmark {spec.name}")
        runs.append(bench.run(spec))
        yield Checkpoint(facts(False), budget)
    yield Checkpoint(facts(True), None)


# --- figures across benchmarks --------------------------------------------------------------------------


def median(run: BenchmarkRun) -> float | None:
    """The median time of one unit of work, or None when it was not measured."""
    if run.error is not None or not run.rounds:
        return None
    return statistics.median(run.rounds) / run.iterations


def derive(runs: list[BenchmarkRun]) -> list[BenchmarkRun]:
    """Figures that compare benchmarks: multi-device speed-up and efficiency (each device count against
    one device of the same kind and method), the split matpow's speed-up over one GPU, and what the
    silent CPU fallback costs against the device the program asked for."""
    by_name = {r.name: r for r in runs}
    out = []
    for run in runs:
        extra = dict(run.extra_info)
        if run.kind == "scaling" and run.error is None:
            variant, kind, n = run.param.rsplit("-", 2)
            one = by_name.get(f"test_scaling[{variant}-{kind}-x1]")
            base = one.extra_info.get("samples_per_s") if one is not None and one.error is None else None
            rate = extra.get("samples_per_s")
            if isinstance(base, float) and isinstance(rate, float) and base > 0:
                devices = int(n[1:])
                extra["speedup"] = rate / base
                extra["efficiency"] = rate / base / devices
        if run.kind == "matpow" and len(run.devices) == 2:
            one = by_name.get(MATPOW_REFERENCES[0])
            t_one, t_two = (median(one) if one else None), median(run)
            if t_one and t_two:
                extra["speedup"] = t_one / t_two
                extra["efficiency"] = t_one / t_two / 2
        if run.kind == "matpow_fallback":
            asked = by_name.get(MATPOW_REFERENCES[0]) or by_name.get(MATPOW_REFERENCES[1])
            t_asked, t_fell = (median(asked) if asked else None), median(run)
            if asked is not None and t_asked and t_fell:
                extra["compared_with"] = asked.name
                extra["slowdown"] = t_fell / t_asked
        out.append(BenchmarkRun(**{**run.__dict__, "extra_info": extra}))
    return out


# --- timing ---------------------------------------------------------------------------------------------


class _Bench:
    """Runs one benchmark of each kind; every method returns a :class:`BenchmarkRun` or raises."""

    def __init__(self, tf: Any) -> None:
        self.tf = tf
        sync = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)
        self._sync_all: Callable[[], None] | None = sync if callable(sync) else None

    def run(self, spec: Spec) -> BenchmarkRun:
        def measure() -> Measurement:
            method = KIND_METHODS.get(spec.kind)
            if method is None:
                raise LookupError(f"no benchmark of the kind {spec.kind!r}")
            return method(self, spec)

        def tf32_default() -> None:
            self.tf.config.experimental.enable_tensor_float_32_execution(True)  # TensorFlow's default

        return benchmark_run(spec, ",".join(d.lstrip("/") for d in spec.devices), measure, tf32_default)

    # --- helpers ---

    def _on_gpu(self, spec: Spec) -> bool:
        return any("GPU" in d.upper() for d in spec.devices)

    def _sync(self, spec: Spec) -> Callable[[Any], None]:
        """Wait for the device(s) once: the GPUs' streams (tf.test.experimental.sync_devices, or one element
        read back), nothing on the CPU, whose ops have finished when the function returns."""
        if not self._on_gpu(spec):
            return lambda _result: None
        if self._sync_all is not None:
            sync_all = self._sync_all
            return lambda _result: sync_all()
        tf = self.tf

        def read_one(result: Any) -> None:
            for t in tf.nest.flatten(result):
                tf.reshape(t, [-1])[:1].numpy()

        return read_one

    def _strategy(self, spec: Spec) -> Any:
        """MirroredStrategy over the devices, its cross-device reduction named: NCCL on GPUs, a reduction
        on the first device on logical CPUs. Named rather than left to the strategy, whose collective-op
        default keys its groups per process: a second strategy over another device count in the same
        process then fails ("joining a group with size 4, but that group has size 2")."""
        tf = self.tf
        if spec.reduction == "nccl":
            ops = tf.distribute.NcclAllReduce()
        elif spec.reduction == "hierarchical-copy":
            ops = tf.distribute.HierarchicalCopyAllReduce()
        else:
            ops = tf.distribute.ReductionToOneDevice(spec.devices[0])
        return tf.distribute.MirroredStrategy(list(spec.devices), cross_device_ops=ops), type(ops).__name__

    def _dtype(self, name: str) -> Any:
        return {"tf32": self.tf.float32}.get(name) or getattr(self.tf, name)

    def _random(self, shape: tuple[int, ...], dtype: str, device: str, scale: float = 1.0) -> Any:
        tf = self.tf
        with tf.device(device):
            x = tf.random.normal(shape, seed=1) * scale
            return tf.identity(tf.cast(x, self._dtype(dtype)))

    # --- the benchmarks ---

    def _matmul(self, spec: Spec) -> Measurement:
        """Chained ``c = c @ b`` of n×n matrices (b scaled by 1/√n, so values stay bounded in float16)."""
        tf = self.tf
        dev, dtype = spec.devices[0], spec.dtype or "float32"
        on_gpu = self._on_gpu(spec)
        n = 8192 if on_gpu else (1024 if dtype == "float32" else 512)
        if on_gpu and dtype == "tf32":
            # With TF_USE_CUBLASLT=1 TensorFlow keeps one plan per dtype and shape, TF32 or not as the first
            # matmul of that shape had it (PITFALLS.md): TF32 gets a shape of its own.
            n -= 64
        if on_gpu:
            tf.config.experimental.enable_tensor_float_32_execution(dtype == "tf32")
        a = self._random((n, n), dtype, dev)
        b = self._random((n, n), dtype, dev, 1 / math.sqrt(n))

        def work(k: int) -> Callable[[], Any]:
            @_graph(tf)
            def chain(c: Any, m: Any) -> Any:
                with tf.device(dev):
                    for _ in range(k):
                        c = tf.matmul(c, m)
                return c

            return lambda: chain(a, b)

        iterations, rounds = _timed(work, self._sync(spec), measure_time(headline=True))
        flops = 2.0 * n**3
        return (
            iterations,
            rounds,
            {
                "shape": [n, n, n],
                **throughput(flops, iterations, rounds),
                "tf32": dtype == "tf32" if on_gpu else None,
            },
        )

    def _matpow(self, spec: Spec, size: int | None = None) -> Measurement:
        """``A^n + B^n`` by chained matmuls, n = 10, the classic TensorFlow GPU example: on one device, or
        ``A^n`` on one GPU and ``B^n`` on the other with the sum on the CPU. A round is one whole program
        (repeating it inside one function would let the graph optimiser compute it once)."""
        tf = self.tf
        power = 10
        on_gpu = self._on_gpu(spec) and spec.kind == "matpow"
        n = size or (1024 if on_gpu else 512)
        first, second = spec.devices[0], spec.devices[-1]
        a = self._random((n, n), "float32", "/CPU:0" if not on_gpu else first, 1 / math.sqrt(n))
        b = self._random((n, n), "float32", "/CPU:0" if not on_gpu else second, 1 / math.sqrt(n))
        split = len(spec.devices) == 2
        traced: dict[int, Callable[[], Any]] = {}

        def work(k: int) -> Callable[[], Any]:
            if k in traced:
                return traced[k]

            @_graph(tf)
            def program(x: Any, y: Any) -> Any:
                total = None
                for _ in range(k):
                    parts = []
                    for m, dev in ((x, first), (y, second)):
                        with tf.device(dev):
                            p = m
                            for _ in range(power - 1):
                                p = tf.matmul(m, p)
                            parts.append(p)
                    with tf.device("/CPU:0" if split else first):
                        s = parts[0] + parts[1]
                    total = s if total is None else total + s
                return total

            traced[k] = lambda: program(a, b)
            return traced[k]

        iterations, rounds = _timed(work, self._sync(spec), max_iterations=1)
        flops = 2.0 * 2 * (power - 1) * n**3
        result = work(1)()  # the program traced for timing: where it ran
        return (
            iterations,
            rounds,
            {
                "shape": [n, n],
                "power": power,
                "tflops": flops / _med(rounds, iterations) / 1e12,
                "seconds": _med(rounds, iterations),
                "ran_on": result.device,
            },
        )

    def _matpow_fallback(self, spec: Spec) -> Measurement:
        """The matpow program asked for a GPU that does not exist, with soft placement: TensorFlow runs it on
        the CPU without a word. The same size as the GPU program where there is a GPU (1024: 18 GFLOP a
        round on the CPU, seconds at most)."""
        tf = self.tf
        had = tf.config.get_soft_device_placement()
        tf.config.set_soft_device_placement(True)
        try:
            gpus = tf.config.list_logical_devices("GPU")
            iterations, rounds, extra = self._matpow(spec, 1024 if gpus else 512)
        finally:
            tf.config.set_soft_device_placement(had)
        ran_on = str(extra.get("ran_on", ""))
        device = ran_on.rsplit("device:", 1)[-1] if "device:" in ran_on else ran_on
        return iterations, rounds, {**extra, "asked_for": spec.devices[0].lstrip("/"), "device": device}

    def _copy(self, spec: Spec) -> Measurement:
        """Copy bandwidth (bytes copied per second). ``host``: a host-memory copy on the CPU device;
        ``h2d-pageable``: a CPU tensor copied to the GPU eagerly; ``h2d-pinned``: the same inside a
        ``tf.function``, where TensorFlow stages what a CPU op hands to a GPU in pinned (CUDA host)
        memory, the host-side copy that feeds it included (timed alone in ``host_copy_s``); ``d2h``; ``d2d`` (a
        device-memory copy, which reads and writes each byte: ``memory_gbps`` counts both); ``peer``: GPU
        to GPU (peer-to-peer where the GPUs allow it, else through the host)."""
        tf = self.tf
        variant = spec.variant or "host"
        on_gpu = self._on_gpu(spec)
        nbytes = (256 if on_gpu else 64) * 1024 * 1024
        count = nbytes // 4
        src_dev = {"h2d-pinned": "/CPU:0", "h2d-pageable": "/CPU:0"}.get(variant, spec.devices[0])
        dst_dev = {"d2h": "/CPU:0", "peer": spec.devices[-1]}.get(variant, spec.devices[0])
        src = self._random((count,), "float32", src_dev)

        def deep_copy(x: Any) -> Any:
            return tf.raw_ops.DeepCopy(x=x)

        if variant == "h2d-pageable" or variant == "d2h" or variant == "peer":
            # Eager TensorFlow keeps a copy of a tensor on each device it was copied to (a mirror) and copies
            # it once: each round reads a variable, a new tensor every time, so every copy is made.
            with tf.device(src_dev):
                held = tf.Variable(src, trainable=False)

            def work(k: int) -> Callable[[], Any]:
                def eager() -> Any:
                    out = None
                    for _ in range(k):
                        fresh = held.read_value()
                        with tf.device(dst_dev):
                            out = tf.identity(fresh)
                    return out

                return eager

        elif variant == "h2d-pinned":

            def work(k: int) -> Callable[[], Any]:
                @_graph(tf)
                def staged(x: Any) -> Any:
                    last = None
                    for _ in range(k):
                        # One after the other: the next host copy waits for the previous transfer.
                        with tf.control_dependencies([] if last is None else [last]), tf.device("/CPU:0"):
                            host = deep_copy(x)
                        with tf.device(dst_dev):
                            last = tf.identity(host)[0]
                    return last

                return lambda: staged(src)

        else:  # host, d2d: a copy within one device's memory, chained (DeepCopy is stateful: never merged)

            def work(k: int) -> Callable[[], Any]:
                @_graph(tf)
                def copies(x: Any) -> Any:
                    with tf.device(dst_dev):
                        for _ in range(k):
                            x = deep_copy(x)
                    return x

                return lambda: copies(src)

        iterations, rounds = _timed(work, self._sync(spec))
        extra: dict[str, Any] = {"bytes": nbytes}
        if variant == "h2d-pinned":
            # The host-side copy that feeds the staged transfer is in the round: a lower bound of the link's
            # bandwidth, shown beside how long that host copy takes alone.
            extra["host_copy_s"] = self._host_copy_seconds(src)
        extra.update(bandwidth(nbytes, iterations, rounds))
        if variant == "d2d":
            extra["memory_gbps"] = 2 * extra["gbps"]
        extra["direction"] = variant
        return iterations, rounds, extra

    def _host_copy_seconds(self, src: Any) -> float:
        tf = self.tf

        @_graph(tf)
        def copy(x: Any) -> Any:
            with tf.device("/CPU:0"):
                return tf.reduce_max(tf.raw_ops.DeepCopy(x=x)[:1])

        copy(src)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            copy(src).numpy()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def _conv(self, spec: Spec) -> Measurement:
        """A ResNet-like 3×3 convolution, NHWC, 64 → 64 channels at 56×56, chained (cuDNN on a GPU)."""
        tf = self.tf
        dev, dtype = spec.devices[0], spec.dtype or "float32"
        on_gpu = self._on_gpu(spec)
        batch, hw, ch = (64 if on_gpu else 4), 56, 64
        if on_gpu:
            tf.config.experimental.enable_tensor_float_32_execution(False)
        x = self._random((batch, hw, hw, ch), dtype, dev)
        w = self._random((3, 3, ch, ch), dtype, dev, 1 / math.sqrt(9 * ch))

        def work(k: int) -> Callable[[], Any]:
            @_graph(tf)
            def chain(y: Any, f: Any) -> Any:
                with tf.device(dev):
                    for _ in range(k):
                        y = tf.nn.conv2d(y, f, strides=1, padding="SAME", data_format="NHWC")
                return y

            return lambda: chain(x, w)

        iterations, rounds = _timed(work, self._sync(spec))
        flops = 2.0 * batch * hw * hw * ch * ch * 9
        return (
            iterations,
            rounds,
            {
                "shape": [batch, hw, hw, ch],
                "filter": [3, 3, ch, ch],
                "layout": "NHWC",
                **throughput(flops, iterations, rounds),
            },
        )

    def _launch(self, spec: Spec) -> Measurement:
        """Kernel-launch latency: a chain of tiny ops (sin of a scalar), issued eagerly one by one, or inside
        a ``tf.function`` (TensorFlow's executor launching them). A unit is one op."""
        tf = self.tf
        dev = spec.devices[0]
        x = self._random((1,), "float32", dev)
        eager = spec.variant == "eager"

        def work(k: int) -> Callable[[], Any]:
            def ops(y: Any) -> Any:
                with tf.device(dev):
                    for _ in range(k):
                        y = tf.math.sin(y)
                return y

            fn = ops if eager else _graph(tf)(ops)
            return lambda: fn(x)

        # Calibrated per op: one op is far below a round, so a round chains many of them (the round's own
        # cost, one function call and one synchronisation, is then spread over thousands of ops).
        iterations, rounds = _timed(work, self._sync(spec), max_iterations=4096)
        return (
            iterations,
            rounds,
            {
                "mode": spec.variant,
                **latency(iterations, rounds),
            },
        )

    def _allreduce(self, spec: Spec) -> Measurement:
        """A sum all-reduce across the devices with MirroredStrategy (NCCL on GPUs, by default), checked for
        the right answer; bus bandwidth as nccl-tests computes it: ``busbw = algbw × 2(n−1)/n``."""
        tf = self.tf
        n = len(spec.devices)
        count = (64 if self._on_gpu(spec) else 4) * 1024 * 1024 // 4
        strategy, ops = self._strategy(spec)

        def value(ctx: Any) -> Any:
            return tf.fill([count], tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32))

        values = strategy.experimental_distribute_values_from_function(value)

        def work(k: int) -> Callable[[], Any]:
            @_graph(tf)
            def reduce(v: Any) -> Any:
                def replica(x: Any) -> Any:
                    ctx = tf.distribute.get_replica_context()
                    for _ in range(k):
                        x = ctx.all_reduce(tf.distribute.ReduceOp.SUM, x) * (1.0 / n)
                    return x

                return strategy.run(replica, args=(v,))

            return lambda: reduce(values)

        # The right answer first: the sum of 1..n on every device.
        check = strategy.run(
            lambda x: tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, x), args=(values,)
        )
        want = n * (n + 1) / 2
        for got in strategy.experimental_local_results(check):
            low, high = float(tf.reduce_min(got)), float(tf.reduce_max(got))
            if low != want or high != want:
                raise ArithmeticError(f"the all-reduce returned values from {low} to {high}, not {want}")
        iterations, rounds = _timed(work, self._sync(spec))
        return iterations, rounds, {**bus_bandwidth(count * 4, n, iterations, rounds), "cross_device_ops": ops}

    def _scaling(self, spec: Spec) -> Measurement:
        """Training a small conv net on MNIST-shaped synthetic data (no download) for a fixed number of
        steps on n devices, the per-device batch fixed: hand-made towers (the batch split per device, the
        gradients averaged on the first) or MirroredStrategy. A unit is one training step."""
        tf = self.tf
        devices = list(spec.devices)
        n = len(devices)
        on_gpu = self._on_gpu(spec)
        per_device = 256 if on_gpu else 32
        batch = per_device * n
        images = self._random((batch, 28, 28, 1), "float32", "/CPU:0" if not on_gpu else devices[0])
        shapes = {"c1": (3, 3, 1, 16), "c2": (3, 3, 16, 32), "d1": (14 * 14 * 32, 64), "d2": (64, 10)}
        with tf.device("/CPU:0"):
            labels = tf.random.uniform((batch,), 0, 10, dtype=tf.int32, seed=2)
            init = {k: tf.random.normal(s, seed=3) * (1 / math.sqrt(math.prod(s[:-1]))) for k, s in shapes.items()}

        def loss_of(w: dict[str, Any], x: Any, y: Any) -> Any:
            # Two 3x3 convolutions, the second with stride 2 (28x28 -> 14x14), and two dense layers.
            h = tf.nn.relu(tf.nn.conv2d(x, w["c1"], 1, "SAME"))
            h = tf.nn.relu(tf.nn.conv2d(h, w["c2"], 2, "SAME"))
            h = tf.nn.relu(tf.reshape(h, [tf.shape(h)[0], -1]) @ w["d1"])
            logits = h @ w["d2"]
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))

        lr = 0.01
        ops = None
        if spec.variant == "mirrored":
            strategy, ops = self._strategy(spec)
            with strategy.scope():
                w = {k: tf.Variable(v, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA) for k, v in init.items()}
            dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
            batches = iter(strategy.experimental_distribute_dataset(dataset))
            first = next(batches)

            def replica_step(x: Any, y: Any) -> Any:
                ctx = tf.distribute.get_replica_context()
                with tf.GradientTape() as tape:
                    loss = loss_of(w, x, y)
                grads = tape.gradient(loss, list(w.values()))
                grads = ctx.all_reduce(tf.distribute.ReduceOp.MEAN, grads)
                for v, g in zip(w.values(), grads, strict=True):
                    v.assign_sub(lr * g)
                return loss

            def work(k: int) -> Callable[[], Any]:
                @_graph(tf)
                def steps(batch_in: Any) -> Any:
                    loss = None
                    for _ in range(k):
                        loss = strategy.run(replica_step, args=batch_in)
                    return loss

                return lambda: steps(first)

        else:
            with tf.device(devices[0]):
                w = {k: tf.Variable(v) for k, v in init.items()}
            shards = []
            for i, dev in enumerate(devices):
                with tf.device(dev):
                    shards.append(
                        (
                            tf.identity(images[i * per_device : (i + 1) * per_device]),
                            tf.identity(labels[i * per_device : (i + 1) * per_device]),
                        )
                    )

            def work(k: int) -> Callable[[], Any]:
                @_graph(tf)
                def steps() -> Any:
                    loss = None
                    for _ in range(k):
                        tower_grads, losses = [], []
                        for dev, (x, y) in zip(devices, shards, strict=True):
                            with tf.device(dev):
                                with tf.GradientTape() as tape:
                                    loss_i = loss_of(w, x, y)
                                tower_grads.append(tape.gradient(loss_i, list(w.values())))
                                losses.append(loss_i)
                        with tf.device(devices[0]):
                            for j, v in enumerate(w.values()):
                                v.assign_sub(lr * tf.add_n([g[j] for g in tower_grads]) / n)
                            loss = tf.add_n(losses) / n
                    return loss

                return steps

        iterations, rounds = _timed(work, self._sync(spec))
        step = _med(rounds, iterations)
        return (
            iterations,
            rounds,
            {
                "method": spec.variant,
                "cross_device_ops": ops,
                "devices": n,
                "per_device_batch": per_device,
                "global_batch": batch,
                "samples_per_s": batch / step,
                "step_s": step,
                "logical_devices": not spec.physical,
            },
        )


#: The method that measures each kind of benchmark the plan names (``gpucheck.performance.plan.KINDS``).
KIND_METHODS: dict[str, Callable[[_Bench, Spec], Measurement]] = {
    "matmul": _Bench._matmul,
    "matpow": _Bench._matpow,
    "matpow_fallback": _Bench._matpow_fallback,
    "copy": _Bench._copy,
    "conv": _Bench._conv,
    "launch": _Bench._launch,
    "allreduce": _Bench._allreduce,
    "scaling": _Bench._scaling,
}
