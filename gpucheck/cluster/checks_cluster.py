"""The cluster layer (a set TF_CONFIG, or ``--gpucheck-cluster``): is the multi-worker configuration valid,
are the peers reachable, does a real collective over gRPC work? Each node of a job runs the same
``pytest --gpucheck --gpucheck-cluster``; ``--gpucheck-cluster=local:N[+ps]`` runs N workers on this machine.

The configuration and the peers need nothing below them (a driverless node still has a network); the
collective needs TensorFlow itself, not the GPUs (it runs on the CPU devices).
"""

from __future__ import annotations

from gpucheck.blocking import FRAMEWORK_BROKEN, asks
from gpucheck.session import Answer

CONFIG = ("cluster-config-invalid", "cluster-config-note")
PEERS = ("cluster-peer-unreachable",)
COLLECTIVE = ("cluster-collective-failed",)


@asks("cluster", CONFIG, instead=())
def test_cluster_config(gpucheck_answer: Answer) -> None:
    """Is the cluster configuration (TF_CONFIG, the Slurm step, --gpucheck-cluster) valid as TensorFlow reads it:
    well-formed, this task's type and index in range, one address per task, roles a strategy takes, no
    localhost in a cluster that spans hosts, ports that are ports?"""
    gpucheck_answer.check()


@asks("cluster", PEERS, blocked_by_ids=CONFIG, instead=())
def test_cluster_peers_reachable(gpucheck_answer: Answer) -> None:
    """Does every other task's address resolve and its port answer within the wait, and is this task's own
    port free for its gRPC server?"""
    gpucheck_answer.check()


@asks("cluster", COLLECTIVE, blocked_by_ids=CONFIG + PEERS + FRAMEWORK_BROKEN, instead=())
def test_cluster_collective(gpucheck_answer: Answer) -> None:
    """Does a real all-reduce across the workers (MultiWorkerMirroredStrategy over gRPC) give the right sum,
    or, with a ps job, do the ParameterServerStrategy steps run on the workers with the variable on the ps?"""
    gpucheck_answer.check()
