"""TensorFlow's side of the cluster child (``gpucheck.cluster.probe``): ``MultiWorkerMirroredStrategy`` (which starts
this task's gRPC server and waits, holding the GIL, for every task to join its coordination service: only the
parent's timeout bounds it), or for a cluster with a ps job the ``ParameterServerStrategy`` coordinator on the
chief and a ``tf.distribute.Server`` on each worker and ps; then an all-reduce of known values (each replica adds
``replica id + 1``), its result checked, its latency and bandwidth; or the ps/worker smoke test. Registered as the
cluster child's ``collective`` step (``gpucheck.cluster.collective``)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from gpucheck.cluster.collective import (
    BANDWIDTH_ROUNDS,
    CHIEF_DONE_FILE,
    LARGE_ELEMENTS,
    LATENCY_ROUNDS,
    SMALL_ELEMENTS,
    Collective,
    rounds,
    serve_until_chief_done,
)
from gpucheck.cluster.config import MWMS, PSS, tf_config_for
from gpucheck.cluster.facts import ClusterConfigFacts, CollectiveRun
from gpucheck.frameworks.tensorflow.imports import import_tensorflow


def _start_tensorflow(config: ClusterConfigFacts, role: str, deadline: float) -> tuple[str, Any]:
    """Import TensorFlow and join the cluster as ``role``: (TensorFlow's version, the strategy or server)."""
    # Read as TensorFlow reads it: TF_CONFIG through TFConfigClusterResolver (the cluster of a Slurm step or
    # of --gpucheck-cluster=JSON is handed over as a TF_CONFIG).
    os.environ["TF_CONFIG"] = tf_config_for(config.jobs, config.task_type or "", config.task_index or 0)
    tf: Any = import_tensorflow()

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if role == "collective":
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            timeout_seconds=max(deadline - time.monotonic(), 1.0),
        )
        strategy: Any = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver, communication_options=options
        )
    elif role == "coordinator":
        strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    else:
        # The chief writes CHIEF_DONE_FILE into this process's working directory when its steps are done: the
        # probe's own fresh folder (gpucheck.isolation), so no earlier run's file is there.
        strategy = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=config.task_type,
            task_index=config.task_index,
            protocol=resolver.rpc_layer or "grpc",
            start=True,
        )
    return str(tf.__version__), strategy


def _role_work(role: str, strategy: Any, config: ClusterConfigFacts, deadline: float) -> CollectiveRun | None:
    if role == "collective":
        return all_reduce(strategy)
    if role == "coordinator":
        return parameter_server_smoke_test(strategy, config)
    served_until = serve_until_chief_done(config, deadline)
    return CollectiveRun("served", 0, 0.0, (), True, served_until=served_until)


def all_reduce(strategy: Any) -> CollectiveRun:
    """Each replica contributes ``replica id + 1``: every element of the sum is n(n+1)/2."""
    import tensorflow as tf

    n = int(strategy.num_replicas_in_sync)

    def program(elements: int) -> Callable[[], Any]:
        def step() -> Any:
            ctx = tf.distribute.get_replica_context()
            value = tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)
            return ctx.all_reduce("sum", tf.fill([elements], value))

        fn = tf.function(lambda: strategy.run(step))
        return lambda: strategy.experimental_local_results(fn())[0].numpy()

    expected = n * (n + 1) / 2
    small = program(SMALL_ELEMENTS)
    first = small()
    got = tuple(float(x) for x in first[:SMALL_ELEMENTS])
    correct = all(x == expected for x in got)
    if not correct:
        return CollectiveRun("all-reduce", n, expected, got, False)
    lat = rounds(small, LATENCY_ROUNDS)
    large = program(LARGE_ELEMENTS)
    out = large()
    correct = bool((out == expected).all())
    big = rounds(large, BANDWIDTH_ROUNDS)
    nbytes = LARGE_ELEMENTS * 4
    seconds = statistics.median(big)
    algbw = nbytes / seconds / 1e9
    return CollectiveRun(
        "all-reduce",
        n,
        expected,
        got if correct else tuple(float(x) for x in out[:SMALL_ELEMENTS]),
        correct,
        latency_s=statistics.median(lat),
        latency_rounds=tuple(lat),
        bytes=nbytes,
        seconds=seconds,
        algbw_gbps=algbw,
        busbw_gbps=algbw * 2 * (n - 1) / n if n > 1 else algbw,
    )


def parameter_server_smoke_test(strategy: Any, config: ClusterConfigFacts) -> CollectiveRun:
    """The ps/worker example of distributed TensorFlow: a variable on the ps, two steps per worker scheduled
    by the coordinator, then an op run on each worker directly (the coordinator may give every step to one)."""
    import tensorflow as tf

    workers = next((len(j.addresses) for j in config.jobs if j.name == "worker"), 0)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        total = tf.Variable(0.0)

    @tf.function  # type: ignore[untyped-decorator]
    def step() -> Any:
        total.assign_add(1.0)
        return tf.constant(1.0)

    steps = 2 * workers
    for _ in range(steps):
        coordinator.schedule(step)
    coordinator.join()
    stepped = []
    for i in range(workers):
        with tf.device(f"/job:worker/replica:0/task:{i}/device:CPU:0"):
            if float((tf.constant(float(i + 1)) * 2.0).numpy()) == 2.0 * (i + 1):
                stepped.append(f"worker:{i}")
    value = float(total.numpy())
    tell_the_servers_done(tf, config)
    return CollectiveRun(
        "parameter-server",
        workers,
        float(steps),
        (value,),
        value == steps and len(stepped) == workers,
        variable_devices=(str(total.device),),
        workers_stepped=tuple(stepped),
    )


def tell_the_servers_done(tf: Any, config: ClusterConfigFacts) -> None:
    """Write CHIEF_DONE_FILE on each worker and ps (an op on its device runs in its process): each then stops
    serving, even if it never saw this chief's port open. A server this fails on still ends when this chief's
    port closes."""
    for job in config.jobs:
        if job.name not in ("worker", "ps"):
            continue
        for i in range(len(job.addresses)):
            try:
                with tf.device(f"/job:{job.name}/replica:0/task:{i}/device:CPU:0"):
                    tf.io.write_file(CHIEF_DONE_FILE, tf.constant(""))
            except Exception:  # noqa: BLE001 - the port's closing still tells that server
                continue


class TensorFlowCollective:
    def start(self, config: ClusterConfigFacts, role: str, deadline: float) -> tuple[str, Any]:
        return _start_tensorflow(config, role, deadline)

    def work(self, role: str, strategy: Any, config: ClusterConfigFacts, deadline: float) -> CollectiveRun | None:
        return _role_work(role, strategy, config, deadline)

    def strategy_name(self, role: str) -> str:
        return {"coordinator": PSS, "server": "tf.distribute.Server", "collective": MWMS}.get(role, role)


def collective() -> Collective:
    """The cluster child's ``collective`` step: TensorFlow's."""
    return TensorFlowCollective()
