"""Cluster layer: is the multi-worker configuration valid, are the peers reachable, does a collective work?

The configuration needs nothing but the environment; reaching the peers needs the network; the collective
needs TensorFlow itself (not the GPUs: it runs on the CPU devices), so a TensorFlow that cannot be imported
is the framework's finding, not this layer's.
"""

from __future__ import annotations

import re
from typing import Any

from gpucheck.cluster.facts import ClusterConfigFacts, ClusterFacts, ConfigProblem, PeerReach, TaskFacts
from gpucheck.cluster.facts import config as config_of
from gpucheck.cluster.facts import outcome as outcome_of
from gpucheck.facts import Facts
from gpucheck.model import Finding, Severity, finding
from gpucheck.settings import Settings

#: TensorFlow's coordination service names the tasks it still waits for.
_STRAGGLERS = re.compile(r"(Waiting for \d+/\d+ tasks to connect\.|/job:\w+/replica:\d+/task:\d+)")


def _where(config: ClusterConfigFacts) -> str:
    return {
        "TF_CONFIG": "TF_CONFIG",
        "slurm": "the Slurm step's variables",
        "--gpucheck-cluster": "the --gpucheck-cluster spec",
    }.get(config.source or "", config.source or "the configuration")


def config_finding(p: ConfigProblem, config: ClusterConfigFacts) -> Finding:
    value = f" = {p.value}" if p.value is not None else ""
    slurm = config.source == "slurm"
    # What TensorFlow tolerates (it runs each process alone) is a note unless a cluster was asked for.
    blocker = p.kind == "fatal" or (p.kind == "silent" and config.asked)
    return finding(
        "cluster-config-invalid" if blocker else "cluster-config-note",
        Severity.BLOCKER if blocker else Severity.INFO,
        summary=f"{p.key}{value}: {p.problem}"[:400],
        cause=f"{_where(config)} is what every TensorFlow process of this job reads to find its place in the "
        f"cluster; {_sentence_inside(p.problem)}",
        remedy=(
            "Fix the Slurm job (run the tasks with srun, --ntasks matching the nodes) or build the cluster spec "
            "yourself and hand it over as TF_CONFIG."
            if slurm
            else "Fix TF_CONFIG on this node: {\"cluster\": {\"worker\": [\"host1:port\", \"host2:port\"]}, "
            "\"task\": {\"type\": \"worker\", \"index\": i}}, with the same cluster on every node, each node's "
            "own task type and index, one address per task, reachable host names (not localhost across hosts)."
        ),
        evidence={"key": p.key, "value": p.value, "source": config.source, "config": config.text},
    )


def cluster_rules(facts: Facts, settings: Settings) -> list[Finding]:
    config = config_of(facts)
    if config is None or config.source is None:
        return []
    out = [config_finding(p, config) for p in config.problems]
    outcome = outcome_of(facts)
    if outcome is None or config.blocking():
        return out
    cf = outcome.facts
    if cf is None or not cf.tasks:
        if not _framework_broken(facts):
            out.append(_child_failed(outcome.exit, cf))
        return out
    out += _own_ports(cf, config)
    out += _peers(cf)
    if cf.collective and not any(f.id == "cluster-peer-unreachable" for f in out) and not _framework_broken(facts):
        out += _collectives(cf, outcome.exit.status, list(outcome.exit.stderr_tail), settings)
    return out


def _framework_broken(facts: Facts) -> bool:
    """The framework the collective runs in (the first diagnosed) does not run at all: its own finding says why."""
    view = next(iter(facts.frameworks.values()), None)
    return view is not None and view.runs is not True


def _name(t: TaskFacts) -> str:
    return f"{t.job}:{t.index} ({t.address})"


def _own_ports(cf: ClusterFacts, config: ClusterConfigFacts) -> list[Finding]:
    out = []
    for t in cf.tasks:
        if t.own_port == "bad-address":
            out.append(
                finding(
                    "cluster-config-invalid",
                    Severity.BLOCKER,
                    summary=(t.own_port_error or f"task {_name(t)}: its address is not host:port")[:400],
                    cause=f"{_where(config)} gives this task ({t.job}, index {t.index}) the address {t.address}; "
                    "its server listens on that port and the other tasks connect there, so it must be host:port.",
                    remedy="Write every address as host:port (an IPv6 address as [address]:port), with a port "
                    "from 1 to 65535.",
                    evidence={"task": _name(t), "address": t.address, "own_port": t.own_port},
                    subject=f"{t.job}:{t.index}",
                )
            )
        elif t.own_port == "taken":
            out.append(
                finding(
                    "cluster-peer-unreachable",
                    Severity.BLOCKER,
                    summary=f"Task {_name(t)} cannot listen: {t.own_port_error}"[:400],
                    cause="TensorFlow's gRPC server of this task must listen on the port of its address; another "
                    "process already does, so the other tasks would reach that process instead, and this task's "
                    "server fails to start.",
                    remedy=(
                        f"Stop {t.holder}, or give this task another port in the cluster spec (on every node)."
                        if t.holder
                        else "Stop whatever listens on that port (`ss -ltnp`), or give this task another port "
                        "in the cluster spec (on every node)."
                    ),
                    evidence={"task": _name(t), "error": t.own_port_error, "holder": t.holder},
                    subject=f"{t.job}:{t.index}",
                )
            )
    return out


_STATE_WORDS = {
    "dns-failed": "its host name does not resolve",
    "refused": "its port refused every connection (nothing listens there)",
    "timeout": "its host did not answer (packets dropped: a firewall, a security group, or the host down)",
    "unreachable": "there is no route to its host",
    "bad-address": "its address is not host:port",
    "no-inbound": "this task reached it, but it never reached this task",
}

_REMEDY = {
    "dns-failed": "Use host names every node resolves (the pod's or node's DNS name, or its IP address).",
    "refused": "Start gpucheck (or the training job) on that node too: every task must run for the cluster to "
    "form; if it runs, check that its task index and port match the cluster spec.",
    "timeout": "Open the cluster's ports between the nodes (firewall, security group, NetworkPolicy) and check "
    "that the host is up.",
    "unreachable": "Check the network between the nodes (routes, interfaces, VPN).",
    "bad-address": "Write each address as host:port.",
    "no-inbound": "Open this task's port to the other nodes (inbound firewall rule, security group, "
    "NetworkPolicy), and give every node the same cluster spec.",
}


def _peers(cf: ClusterFacts) -> list[Finding]:
    """One finding per peer that some task could not reach (in a local:N run, several tasks may name it)."""
    by_peer: dict[tuple[str, int], list[tuple[TaskFacts, PeerReach]]] = {}
    for t in cf.tasks:
        for p in t.peers:
            if p.state != "reachable":
                by_peer.setdefault((p.job, p.index), []).append((t, p))
    out = []
    for (job, index), seen in by_peer.items():
        t, p = seen[0]
        what = _STATE_WORDS.get(p.state, p.state)
        waited = f" within the {cf.wait_s:g} s wait" if cf.wait_s else ""
        out.append(
            finding(
                "cluster-peer-unreachable",
                Severity.BLOCKER,
                summary=f"Peer {job}:{index} ({p.address}) cannot be reached{waited}: {what}.",
                cause=f"{p.error or what}. Every task of a multi-worker job connects to every other; "
                "TensorFlow itself would wait for this one without a word after \"Started server with target\".",
                remedy=_REMEDY.get(p.state, "Check that the task runs and that its address is reachable."),
                evidence={
                    "peer": f"{job}:{index}",
                    "address": p.address,
                    "state": p.state,
                    "resolved": list(p.resolved),
                    "error": p.error,
                    "attempts": p.attempts,
                    "seconds": p.seconds,
                    "from": [_name(x) for x, _p in seen],
                },
                subject=f"{job}:{index}",
            )
        )
    return out


def _stragglers(lines: list[str]) -> list[str]:
    found = []
    for line in lines:
        m = _STRAGGLERS.search(line)
        if m and m.group(1) not in found:
            found.append(m.group(1))
    return found[-4:]


def _collectives(cf: ClusterFacts, status: str, tail: list[str], settings: Settings) -> list[Finding]:
    out = []
    for t in cf.tasks:
        lines = list(t.exit_detail) or tail
        ended = t.exit_status or status
        run = t.collective
        if (t.stage == "done" and (run is None or run.correct)) or (
            t.stage in ("config", "own port") and t.own_port in ("taken", "bad-address")
        ):
            continue  # done, or stopped at its own port for a reason _own_ports names (a crash is named here)
        evidence: dict[str, Any] = {
            "task": _name(t),
            "stage": t.stage,
            "strategy": t.strategy,
            "error": t.error,
            "process": ended,
            "output": lines[-8:],
        }
        if run is not None and not run.correct:
            summary = (
                f"The {run.kind} across {run.replicas} replicas gave {list(run.got)} on task {_name(t)}, "
                f"not {run.expected:g}."
            )
            cause = "The collective completed but its result is wrong: a task joined with a different cluster spec, " \
                "or data was corrupted on the way."
            evidence["collective"] = {"expected": run.expected, "got": list(run.got), "workers_stepped": list(run.workers_stepped)}
        elif t.error is not None:
            summary = f"Task {_name(t)}: {t.error}"[:400]
            cause = f"TensorFlow failed while this task was at its {t.stage} step (every peer's port had answered)."
        elif t.stage in ("strategy", "collective"):
            waiting = _stragglers(lines)
            summary = (
                f"Task {_name(t)} hung at its {t.stage} step: every peer's port answered, but the "
                f"{'tasks did not all join' if t.stage == 'strategy' else 'collective did not finish'} "
                f"within the {cf.wait_s or settings.cluster_timeout:g} s wait."
            )
            cause = (
                "TensorFlow's coordination service waits for every task of the cluster: "
                + ("; ".join(waiting) if waiting else "a task that listens but does not join")
                + ". Something answers on a peer's port but is not a task of this cluster (another program, a "
                "task started with a different cluster spec or task index, a task of another job)."
            )
            evidence["waiting_for"] = waiting
        elif t.stage == "starting":
            summary = f"Task {_name(t)} of the local cluster did not report ({ended})."
            cause = "The local:N run was stopped at its time limit before this task's process had written anything."
        else:
            summary = f"Task {_name(t)} ended at its {t.stage} step ({ended})."
            cause = "The task's process ended before the collective finished."
        out.append(
            finding(
                "cluster-collective-failed",
                Severity.BLOCKER,
                summary=summary,
                cause=cause,
                remedy="Give every node the same cluster spec and its own task index; run the same TensorFlow on "
                "each; then run `pytest --gpucheck --gpucheck-cluster` on every node at once (srun, a Kubernetes "
                "Job) and compare with `gpucheck merge`.",
                evidence=evidence,
                subject=f"{t.job}:{t.index}",
            )
        )
    return out


def _child_failed(exit_: Any, cf: ClusterFacts | None) -> Finding:
    return finding(
        "cluster-collective-failed",
        Severity.BLOCKER,
        summary=f"The cluster check ended without a result ({exit_.status}"
        + (f": {cf.setup_error}" if cf is not None and cf.setup_error else "")
        + ").",
        cause="The process that reaches the peers and runs the collective crashed or overran its time before it "
        "had checked any task.",
        remedy="Read its last output in the evidence; run `pytest --gpucheck --gpucheck-cluster=local:2` to see "
        "whether this machine's distributed TensorFlow works at all.",
        evidence={"status": exit_.status, "error": exit_.error, "output": list(exit_.stderr_tail[-10:])},
    )


#: The questions that need the peers (and the collective, TensorFlow too).
PEERS = ("cluster-peer-unreachable",)
COLLECTIVE = ("cluster-collective-failed",)


def not_checked(facts: Facts, settings: Settings) -> dict[str, str]:
    """Why the peers and the collective were not looked at: a TF_CONFIG is validated on every run, the rest
    only with --gpucheck-cluster; the child did not run; with --gpucheck-framework=none, no collective."""
    config = config_of(facts)
    why: str | None = None
    if config is not None and not config.asked:
        why = "TF_CONFIG is validated on every run; --gpucheck-cluster reaches the peers and runs a collective"
    elif outcome_of(facts) is None:
        why = facts.not_run.get("cluster", "the cluster probe did not run")
    if why is not None:
        return dict.fromkeys(PEERS + COLLECTIVE, why)
    return dict.fromkeys(COLLECTIVE, "--gpucheck-framework=none") if not settings.frameworks else {}


def _sentence_inside(text: str) -> str:
    """``text`` continuing a sentence: its first letter lowered, unless it starts a name (``TF_CONFIG``, ``SLURM``)."""
    first = text.split(" ", 1)[0]
    return text if first[1:2].isupper() or not first[:1].isupper() else text[0].lower() + text[1:]
