"""The cluster unit (``--gpucheck-cluster``, or a set TF_CONFIG): the multi-worker configuration read as
TensorFlow's resolvers read it (in-process), this task's port, its peers and a real collective over gRPC
(a child), its rules, checks and rendering. ``UNIT`` is what the registry lists."""

from __future__ import annotations

from collections.abc import Mapping

from gpucheck.cluster import report, rules
from gpucheck.cluster.config import (
    CLUSTER_ENVIRONMENT_KEYS,
    CLUSTER_SPEC_ENV,
    CLUSTER_WAIT_ENV,
    PROBE_TARGET,
    read_config,
)
from gpucheck.cluster.facts import CONFIG_FIELD, FIELD, ClusterConfigFacts, ClusterFacts
from gpucheck.settings import Settings
from gpucheck.unit import CheckFile, ChildProbe, InProcess, LayerRule, PreStart, Unit

#: TensorFlow's import and its set-up, beyond the wait for the peers (a local:N run's tasks each need it).
CLUSTER_MARGIN_S = 30.0


def _not_wanted(pre: PreStart) -> str | None:
    """The peers and the collective are tried when --gpucheck-cluster asks and the configuration is valid."""
    config = read_config(pre.settings.cluster, pre.environment)
    if not config.asked:
        return "--gpucheck-cluster was not given"
    if config.blocking():
        return "the cluster configuration is invalid"
    if not pre.settings.frameworks and config.source == "local":
        return "--gpucheck-framework=none: the local:N tasks are TensorFlow's"
    return None


def _child_env(settings: Settings) -> dict[str, str]:
    return {
        CLUSTER_SPEC_ENV: settings.cluster or "",
        CLUSTER_WAIT_ENV: f"{settings.cluster_timeout:g}",
    }


def _read(settings: Settings, environment: Mapping[str, str | None]) -> ClusterConfigFacts:
    return read_config(settings.cluster, environment)


#: Its own port, its peers, and a real collective over gRPC (on the CPU: no GPU memory taken from the other
#: probes, and what it tests is the distributed runtime and the network).
CLUSTER_PROBE = ChildProbe(
    "cluster",
    "cluster",
    PROBE_TARGET,
    ClusterFacts,
    FIELD,
    (("TF_CPP_MIN_LOG_LEVEL", "0"), ("CUDA_VISIBLE_DEVICES", "")),
    skip_reason=_not_wanted,
    timeout=lambda s: s.cluster_timeout + CLUSTER_MARGIN_S,
    settings_env=_child_env,
)

UNIT = Unit(
    "cluster",
    probes=(CLUSTER_PROBE,),
    in_process=(InProcess(CONFIG_FIELD, "cluster", _read),),
    rules=(LayerRule("cluster", rules.cluster_rules),),
    not_checked=rules.not_checked,
    checks=(CheckFile("cluster", "cluster/checks_cluster.py"),),
    environment_keys=CLUSTER_ENVIRONMENT_KEYS,
    summary=report.cluster_summary,
    figures=report.figures,
    figures_text=report.figures_text,
)
