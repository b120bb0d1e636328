"""The cluster unit's facts: the configuration as TensorFlow reads it, and what the cluster child found."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

from gpucheck.facts import Facts, ProbeOutcome

#: The facts fields: the configuration (read in-process) and the cluster child's outcome.
CONFIG_FIELD = "cluster_config"
FIELD = "cluster"


@dataclass(frozen=True)
class ClusterJob:
    """One job of a cluster spec: its name (``worker``, ``chief``, ``ps``, ``evaluator``) and its tasks'
    addresses (``host:port``) by task index."""

    name: str
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class ConfigProblem:
    """What is wrong with a cluster configuration: where (``TF_CONFIG task.index``, ``SLURM_PROCID``), the
    value found there (as given, cut short), and the problem in a sentence."""

    key: str
    value: str | None
    problem: str
    #: "fatal": TensorFlow raises on it or the cluster cannot form; "silent": TensorFlow runs each process as a
    #: single machine without a word (a fault when --gpucheck-cluster asks for a cluster, a note otherwise);
    #: "note": what a program using the resolver's defaults would meet (SlurmClusterResolver's GPU split).
    kind: str = "fatal"


@dataclass(frozen=True)
class ClusterConfigFacts:
    """The multi-worker configuration of this run, read as TensorFlow's cluster resolvers read it."""

    #: "TF_CONFIG", "slurm", "local", "--gpucheck-cluster" (a spec given there), or None: no cluster.
    source: str | None
    #: Whether --gpucheck-cluster asked for the peers to be reached and a collective run.
    asked: bool
    #: The configuration as given (the TF_CONFIG text, the spec), cut short.
    text: str | None = None
    jobs: tuple[ClusterJob, ...] = ()
    task_type: str | None = None
    task_index: int | None = None
    #: The strategy the cluster is for: "MultiWorkerMirroredStrategy", or "ParameterServerStrategy" with a ps job.
    strategy: str | None = None
    #: ``local:N[+ps]``: the workers and parameter servers started on this machine's loopback.
    local_workers: int = 0
    local_ps: int = 0
    problems: tuple[ConfigProblem, ...] = ()
    #: For Slurm: the node this task runs on (SLURMD_NODENAME), when Slurm says.
    node: str | None = None

    def blocking(self) -> list[ConfigProblem]:
        """The problems that keep the cluster from forming as asked: every fatal one, and with --gpucheck-cluster
        the silent ones too (a cluster was asked for, and TensorFlow would run each process alone)."""
        return [p for p in self.problems if p.kind == "fatal" or (p.kind == "silent" and self.asked)]


@dataclass(frozen=True)
class PeerReach:
    """Whether one other task of the cluster could be reached from this one."""

    job: str
    index: int
    address: str
    #: "reachable", "dns-failed", "refused", "timeout", "unreachable", "bad-address", "no-inbound" (reached, but
    #: it never reached this task) or "not tried".
    state: str
    resolved: tuple[str, ...] = ()
    error: str | None = None
    #: Seconds from the first try until it answered (or until this task stopped waiting).
    seconds: float | None = None
    attempts: int = 0


@dataclass(frozen=True)
class CollectiveRun:
    """A real collective across the cluster, from one task's side."""

    #: "all-reduce" (MultiWorkerMirroredStrategy over gRPC), "parameter-server" (the ps/worker smoke test, the chief's
    #: side) or "served" (a worker's or ps's side of it).
    kind: str
    replicas: int
    #: The value every element must have, and what this task got (the first elements).
    expected: float
    got: tuple[float, ...]
    correct: bool
    #: Median seconds of a tiny all-reduce (16 bytes), and its rounds.
    latency_s: float | None = None
    latency_rounds: tuple[float, ...] = ()
    #: A large all-reduce: its bytes, median seconds, and the algorithm and bus bandwidth (nccl-tests' busbw).
    bytes: int = 0
    seconds: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    #: The parameter-server smoke test: the devices the variables were placed on, and the workers that ran a step.
    variable_devices: tuple[str, ...] = ()
    workers_stepped: tuple[str, ...] = ()
    #: A worker or ps of a parameter-server cluster (kind "served"): what ended its serving, "the chief's file" (the
    #: chief said it was done) or "the chief's port closing".
    served_until: str | None = None


@dataclass(frozen=True)
class TaskFacts:
    """One task of the cluster: this machine's own (TF_CONFIG, Slurm), or one of the ``local:N`` children."""

    job: str
    index: int
    address: str
    #: "free", "taken", "bad-address", or "not tried".
    own_port: str = "not tried"
    own_port_error: str | None = None
    #: Who holds the port when it is taken ("pid 1234: python -m http.server 2222"), where /proc says.
    holder: str | None = None
    peers: tuple[PeerReach, ...] = ()
    tensorflow: str | None = None
    #: The strategy this task joined ("MultiWorkerMirroredStrategy", "ParameterServerStrategy", "Server").
    strategy: str | None = None
    #: The last step it reached: "config", "own port", "peers", "strategy", "collective", "done".
    stage: str = "config"
    collective: CollectiveRun | None = None
    #: What TensorFlow raised (its type and message), or why this task stopped waiting.
    error: str | None = None
    #: How the process of a ``local:N`` task ended ("ok", "crashed", "timeout"), with its last output lines.
    exit_status: str | None = None
    exit_detail: tuple[str, ...] = ()

    def joined(self, version: str, strategy: str) -> TaskFacts:
        """This task once the framework's collective joined the cluster: its version and strategy."""
        return replace(self, tensorflow=version, strategy=strategy, stage="collective")


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster child found: this task's view (``mode`` "task"), or every ``local:N`` task's ("local")."""

    mode: str
    tasks: tuple[TaskFacts, ...] = ()
    #: The seconds each task had for its peers to come up and the collective to finish.
    wait_s: float | None = None
    setup_error: str | None = None
    #: Whether the collective was asked for (not with --gpucheck-framework=none: the peers only).
    collective: bool = True


def config(facts: Facts) -> ClusterConfigFacts | None:
    """The cluster configuration this run read (None in facts made before the cluster unit existed)."""
    return cast("ClusterConfigFacts | None", facts.unit(CONFIG_FIELD))


def outcome(facts: Facts) -> ProbeOutcome[ClusterFacts] | None:
    """The cluster child's outcome: None when it did not run (``facts.not_run`` says why)."""
    return cast("ProbeOutcome[ClusterFacts] | None", facts.unit(FIELD))
