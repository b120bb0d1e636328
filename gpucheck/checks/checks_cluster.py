"""The cluster layer (a set TF_CONFIG, or ``--gpucheck-cluster``): is the multi-worker configuration valid,
are the peers reachable, does a real collective over gRPC work? Each node of a job runs the same
``pytest --gpucheck --gpucheck-cluster``; ``--gpucheck-cluster=local:N[+ps]`` runs N workers on this machine.

The configuration and the peers need nothing below them (a driverless node still has a network); the
collective needs TensorFlow itself, not the GPUs (it runs on the CPU devices).
"""

from __future__ import annotations

from gpucheck.session import TENSORFLOW_BROKEN, Check

CONFIG = ("cluster-config-invalid", "cluster-config-note")
PEERS = ("cluster-peer-unreachable",)
COLLECTIVE = ("cluster-collective-failed",)


def _not_asked(check: Check) -> str | None:
    facts = check.result.facts
    config = facts.cluster_config if facts is not None else None
    if config is not None and not config.asked:
        return "TF_CONFIG is validated on every run; --gpucheck-cluster reaches the peers and runs a collective"
    if facts is not None and facts.cluster is None:
        return facts.not_run.get("cluster", "the cluster probe did not run")
    return None


def test_cluster_config(gpucheck_check: Check) -> None:
    """Is the cluster configuration (TF_CONFIG, the Slurm step, --gpucheck-cluster) valid as TensorFlow reads it:
    well-formed, this task's type and index in range, one address per task, roles a strategy takes, no
    localhost in a cluster that spans hosts, ports that are ports?"""
    gpucheck_check.verify("cluster", CONFIG, instead=())


def test_cluster_peers_reachable(gpucheck_check: Check) -> None:
    """Does every other task's address resolve and its port answer within the wait, and is this task's own
    port free for its gRPC server?"""
    gpucheck_check.verify("cluster", PEERS, requires=CONFIG, instead=(), unchecked=_not_asked(gpucheck_check))


def test_cluster_collective(gpucheck_check: Check) -> None:
    """Does a real all-reduce across the workers (MultiWorkerMirroredStrategy over gRPC) give the right sum,
    or, with a ps job, do the ParameterServerStrategy steps run on the workers with the variable on the ps?"""
    gpucheck_check.verify(
        "cluster",
        COLLECTIVE,
        requires=CONFIG + PEERS + TENSORFLOW_BROKEN,
        instead=(),
        unchecked=_not_asked(gpucheck_check) or gpucheck_check.framework_not_diagnosed,
    )
