"""`gpucheck explain` of multi-worker logs people really posted (``tests/logs/cluster``, each cut from the public
thread its INDEX names): each gets its cluster cause as the root cause, and no single-machine log gets one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpucheck import logs
from gpucheck.model import Severity

LOGS = Path(__file__).parent / "logs"
CLUSTER = LOGS / "cluster"
ENTRIES: list[dict[str, Any]] = json.loads((CLUSTER / "INDEX.json").read_text())
CLUSTER_IDS = ("cluster-config-invalid", "cluster-peer-unreachable", "cluster-collective-failed")


def test_every_cluster_cause_has_real_logs() -> None:
    assert all(e["url"].startswith("https://github.com/") and (CLUSTER / e["file"]).is_file() for e in ENTRIES)
    for cause in CLUSTER_IDS:
        assert len({e["url"] for e in ENTRIES if e["expected"] == cause}) >= 3, cause


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_each_cluster_log_gets_its_cause(entry: dict[str, Any]) -> None:
    lines = (CLUSTER / entry["file"]).read_text(encoding="utf-8", errors="replace").splitlines()
    findings, _classification, rc = logs.explain(lines)
    assert rc is not None and rc.id == entry["expected"], ([f.id for f in findings], entry["why"])


SINGLE_MACHINE = sorted(p for p in LOGS.rglob("*.log") if CLUSTER not in p.parents)


@pytest.mark.parametrize("path", SINGLE_MACHINE, ids=[p.name for p in SINGLE_MACHINE])
def test_no_single_machine_log_gets_a_cluster_cause(path: Path) -> None:
    findings, _classification, _rc = logs.explain(path.read_text(encoding="utf-8", errors="replace").splitlines())
    assert not [f.id for f in findings if f.id in CLUSTER_IDS and f.severity is not Severity.INFO]


#: Single-machine lines with gRPC's words (TensorBoard's profiler, a GCS read), written from those tools' messages:
#: without a task of a cluster in them, they are not a cluster's fault.
SINGLE_MACHINE_GRPC = [
    "tensorflow.python.framework.errors_impl.UnavailableError: failed to connect to all addresses",
    "2024-01-01 10:00:00.000000: E tensorflow/core/profiler/rpc/client/profiler_client.cc:96] Failed to connect to "
    "remote host: localhost:6009 UNAVAILABLE: failed to connect to all addresses",
    'E0101 10:00:00.000000 1234 dns_resolver.cc:123] DNS resolution failed for storage.googleapis.com:443: '
    "C-ares status is not ARES_SUCCESS",
    "I0101 10:00:00.000000 1234 chttp2_transport.cc:1104] Socket closed",
]


@pytest.mark.parametrize("line", SINGLE_MACHINE_GRPC)
def test_single_machine_grpc_errors_are_not_a_cluster_cause(line: str) -> None:
    findings, _classification, _rc = logs.explain(
        ["I0000 gpu_device.cc:2020] Created device /job:localhost/replica:0/task:0/device:GPU:0 with 79100 MB memory", line]
    )
    assert not [f.id for f in findings if f.id in CLUSTER_IDS], line
