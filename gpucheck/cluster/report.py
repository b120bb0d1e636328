"""The cluster unit in the terminal summary and in ``gpucheck merge``'s table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucheck.cluster.facts import config as config_of
from gpucheck.cluster.facts import outcome as outcome_of
from gpucheck.facts import Facts, facts_of
from gpucheck.jsonfile import as_list, dig, number


def cluster_summary(facts: Facts) -> list[str]:
    """The collective's figures for the terminal: replicas, latency, bandwidth, per task."""
    config = config_of(facts)
    cf = facts_of(outcome_of(facts))
    if config is None or cf is None:
        return []
    lines = []
    for t in cf.tasks:
        run = t.collective
        if run is None or not run.correct:
            continue
        if run.kind == "all-reduce" and run.latency_s is not None and run.busbw_gbps is not None:
            lines.append(
                f"  {t.job}:{t.index} {t.address}: all-reduce of {run.replicas} replicas correct, latency "
                f"{run.latency_s * 1e3:.2f} ms, {run.bytes / 2**20:g} MiB at {run.busbw_gbps:.3g} GB/s busbw"
            )
        elif run.kind == "parameter-server":
            lines.append(
                f"  {t.job}:{t.index} {t.address}: {int(run.expected)} steps on {run.replicas} workers "
                f"({', '.join(run.workers_stepped)}), variable on {', '.join(run.variable_devices)}"
            )
    if not lines:
        return []
    head = f"cluster ({config.text if config.source == 'local' else config.source}, over gRPC on the CPU):"
    return ["", head, *lines]


def figures(facts: Any) -> dict[str, Any]:
    """The all-reduce's figures of this host's task, from a report's facts JSON (any shape)."""
    out: dict[str, Any] = {}
    runs = [dig(t, "collective") for t in as_list(dig(facts, "cluster", "facts", "tasks"))]
    run = next((r for r in runs if isinstance(r, dict) and r.get("kind") == "all-reduce" and r.get("correct")), None)
    if run is not None:
        latency, busbw = number(run.get("latency_s")), number(run.get("busbw_gbps"))
        if latency is not None:
            out["allreduce_latency_ms"] = round(latency * 1e3, 3)
        if busbw is not None:
            out["allreduce_busbw_gbps"] = round(busbw, 3)
    return out


def figures_text(figures: Mapping[str, Any]) -> list[str]:
    if "allreduce_latency_ms" not in figures:
        return []
    bw = figures.get("allreduce_busbw_gbps")
    return [f"all-reduce {figures['allreduce_latency_ms']:.3g} ms" + (f", {bw:.3g} GB/s" if bw is not None else "")]
