"""The cluster layer through the full ``pytest --gpucheck`` path: real TensorFlow, real gRPC, loopback only.

Every run is bounded (``runpytest_subprocess(timeout=…)``: a hang fails the test, it does not stall the
suite); the wait for the peers is short (``--gpucheck-cluster-timeout``) where a peer is meant never to come.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import RUN_OPTIONS, GpucheckRun
from gpucheck.cluster.collective import BY_FILE, BY_PORT, CHIEF_DONE_FILE, serve_until_chief_done
from gpucheck.cluster.facts import ClusterConfigFacts, ClusterJob
from gpucheck.cluster.probe import free_ports
from tests.test_merge import gpucheck_merge

#: The wait where a peer never comes, and the bound on such a run: the wait, TensorFlow's import in the
#: other probes, and this 2-core machine's load.
SHORT_WAIT = 4
BOUND_S = 150
#: Beyond a wait, what a loaded 2-core machine may add before a run counts as hung (a bound, not a speed target).
HANG_MARGIN_S = 60


@pytest.fixture(autouse=True)
def no_cluster_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TF_CONFIG", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURMD_NODENAME"):
        monkeypatch.delenv(name, raising=False)


def outcome(run: GpucheckRun, name: str) -> dict[str, Any]:
    return next(c for c in run.report["checks"] if c["nodeid"].endswith(f"::{name}"))


def layer(run: GpucheckRun, name: str = "cluster") -> dict[str, Any]:
    return next(s for s in run.report["layers"] if s["layer"] == name)


def cluster_tasks(run: GpucheckRun) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = run.report["facts"]["cluster"]["facts"]["tasks"]
    return tasks


def two_workers(index: int = 0, ports: list[int] | None = None) -> str:
    a, b = ports or free_ports(2)
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{a}", f"127.0.0.1:{b}"]}, "task": {"type": "worker", "index": index}})


def test_local_self_test_of_the_distributed_runtime(
    run_gpucheck: Callable[..., GpucheckRun], pytester: pytest.Pytester
) -> None:
    """`--gpucheck-cluster=local:2`: two workers on loopback join a MultiWorkerMirroredStrategy; the all-reduce of
    1 + 2 is 3 on both; its latency and bandwidth are in the report."""
    run = run_gpucheck("--gpucheck-cluster=local:2", timeout=BOUND_S)
    assert layer(run)["state"] == "ok", run.report["findings"]
    for name in ("test_cluster_config", "test_cluster_peers_reachable", "test_cluster_collective"):
        assert outcome(run, name)["outcome"] == "passed", name
    tasks = cluster_tasks(run)
    assert [(t["job"], t["index"]) for t in tasks] == [("worker", 0), ("worker", 1)]
    for t in tasks:
        c = t["collective"]
        assert t["stage"] == "done" and t["strategy"] == "MultiWorkerMirroredStrategy" and t["tensorflow"]
        assert c["kind"] == "all-reduce" and c["replicas"] == 2 and c["got"] == [3.0] * 4 and c["correct"]
        assert c["latency_s"] > 0 and len(c["latency_rounds"]) == 20
        assert c["bytes"] == 4 << 20 and c["busbw_gbps"] > 0
        assert all(p["state"] == "reachable" for p in t["peers"])
    run.result.stdout.fnmatch_lines(["cluster (local:2, over gRPC on the CPU):", "*all-reduce of 2 replicas correct, latency * ms*"])
    # The fleet view of it: `gpucheck merge` shows the all-reduce among the key figures.
    merged = gpucheck_merge(pytester.path / "gpucheck-report.json", "--json", "-")
    host = json.loads(merged.stdout)["hosts"][0]
    latency = tasks[0]["collective"]["latency_s"] * 1e3
    assert host["figures"]["allreduce_latency_ms"] == round(latency, 3)


def test_local_parameter_server_smoke_test(run_gpucheck: Callable[..., GpucheckRun]) -> None:
    """`local:2+ps`: a chief coordinates two workers and a ps (ParameterServerStrategy): the variable lives on
    the ps, four steps ran, and an op ran on each worker."""
    run = run_gpucheck("--gpucheck-cluster=local:2+ps", timeout=BOUND_S)
    assert layer(run)["state"] == "ok", run.report["findings"]
    tasks = {(t["job"], t["index"]): t for t in cluster_tasks(run)}
    assert sorted(tasks) == [("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1)]
    chief = tasks[("chief", 0)]["collective"]
    assert chief["kind"] == "parameter-server" and chief["correct"] and chief["got"] == [4.0]
    assert chief["variable_devices"] == ["/job:ps/replica:0/task:0/device:CPU:0"]
    assert chief["workers_stepped"] == ["worker:0", "worker:1"]
    assert all(t["stage"] == "done" for t in tasks.values())
    # Each worker and the ps stopped serving at the chief's file (written on their devices: in their processes),
    # not by watching the chief's port, which raced on a loaded machine (stop 41's CI).
    for key in (("ps", 0), ("worker", 0), ("worker", 1)):
        served = tasks[key]["collective"]
        assert served["kind"] == "served" and served["served_until"] == BY_FILE, (key, served)
    assert outcome(run, "test_cluster_collective")["outcome"] == "passed"


def ps_config(chief_port: int) -> ClusterConfigFacts:
    a, b = free_ports(2)
    jobs = (
        ClusterJob("chief", (f"127.0.0.1:{chief_port}",)),
        ClusterJob("worker", (f"127.0.0.1:{a}",)),
        ClusterJob("ps", (f"127.0.0.1:{b}",)),
    )
    return ClusterConfigFacts(source="local", asked=True, jobs=jobs, task_type="ps", task_index=0)


def test_a_server_whose_chief_came_and_went_before_it_looked_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race CI met on a loaded machine (stop 41: "the chief never came" while the chief had done its four
    steps): the chief's whole life after this ps's server started fell before the ps first looked at its port.
    The chief's file in the server's directory says it was there; without it, the closed port reads as a chief
    that never came."""
    (closed,) = free_ports(1)  # nothing listens there: the chief has gone
    config = ps_config(closed)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TimeoutError, match="never came"):
        serve_until_chief_done(config, time.monotonic() + 0.6)
    (tmp_path / CHIEF_DONE_FILE).write_text("")
    start = time.monotonic()
    assert serve_until_chief_done(config, start + 30.0) == BY_FILE
    assert time.monotonic() - start < 30.0


def test_a_server_ends_when_its_chief_comes_and_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the file (a chief that could not write it), the chief's port opening and then closing ends it."""
    monkeypatch.chdir(tmp_path)
    chief = socket.socket()
    chief.bind(("127.0.0.1", 0))
    chief.listen()
    config = ps_config(chief.getsockname()[1])
    threading.Timer(1.0, chief.close).start()
    start = time.monotonic()
    assert serve_until_chief_done(config, start + 30.0) == BY_PORT
    assert 0.9 < time.monotonic() - start < 30.0


def test_a_malformed_tf_config_is_reported_without_the_option(
    run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_CONFIG", "{'cluster': {'worker': ['a:1']}}")  # Python's quotes, not JSON's
    run = run_gpucheck("--gpucheck-framework=none", timeout=BOUND_S)
    f = run.finding("cluster-config-invalid")
    assert f["evidence"]["key"] == "TF_CONFIG" and "not valid JSON" in f["summary"]
    assert outcome(run, "test_cluster_config")["outcome"] == "failed"
    peers = outcome(run, "test_cluster_peers_reachable")
    assert peers["outcome"] == "skipped"
    assert run.result.ret == 1
    run.result.stdout.fnmatch_lines(["FAILED checks_cluster.py::test_cluster_config - Failed: cluster-config-invali*"])


@pytest.mark.parametrize(
    ("case", "key", "words"),
    [
        ("index out of range", "TF_CONFIG task.index", "out of range"),
        ("duplicate addresses", "TF_CONFIG cluster.worker[1]", "also cluster.worker[0]"),
    ],
)
def test_config_problems_through_the_full_path(
    run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch, case: str, key: str, words: str
) -> None:
    a, b = free_ports(2)
    if case == "index out of range":
        config = two_workers(2, [a, b])
    else:
        config = json.dumps({"cluster": {"worker": [f"127.0.0.1:{a}", f"127.0.0.1:{a}"]}, "task": {"type": "worker", "index": 0}})
    monkeypatch.setenv("TF_CONFIG", config)
    run = run_gpucheck("--gpucheck-cluster", "--gpucheck-framework=none", "-rs", timeout=BOUND_S)
    f = run.finding("cluster-config-invalid")
    assert f["evidence"]["key"] == key and words in f["summary"], f
    assert layer(run)["state"] == "broken"
    for name in ("test_cluster_peers_reachable", "test_cluster_collective"):
        assert outcome(run, name)["outcome"] == "skipped"
    run.result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *checks_cluster.py:*: blocked by cluster-config-invalid"] * 2)
    assert "cluster" not in run.report["facts"] or run.report["facts"]["cluster"] is None


def test_a_worker_that_never_starts(run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker 1 never comes: after the wait, a finding that names it and says its port refused, not a hang."""
    a, b = free_ports(2)
    monkeypatch.setenv("TF_CONFIG", two_workers(0, [a, b]))
    run = run_gpucheck("--gpucheck-cluster", f"--gpucheck-cluster-timeout={SHORT_WAIT}", timeout=BOUND_S)
    f = run.finding("cluster-peer-unreachable")
    assert f["summary"].startswith(f"Peer worker:1 (127.0.0.1:{b}) cannot be reached within the {SHORT_WAIT} s wait")
    assert f["evidence"]["state"] == "refused" and f["evidence"]["attempts"] > 1
    # It waited the wait (a lower bound no load can break); the upper one only says it did not hang.
    assert SHORT_WAIT - 1 <= f["evidence"]["seconds"] < SHORT_WAIT + HANG_MARGIN_S
    assert outcome(run, "test_cluster_peers_reachable")["outcome"] == "failed"
    assert outcome(run, "test_cluster_collective")["outcome"] == "skipped"
    assert "cluster-collective-failed" not in run.finding_ids


@pytest.fixture
def held_port() -> Iterator[int]:
    (port,) = free_ports(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        yield port


def test_a_port_already_taken(run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch, held_port: int) -> None:
    """This task's port is held by another process (this test's): named with its pid, before TensorFlow starts
    (here without TensorFlow at all: --gpucheck-framework=none reaches the peers and stops there)."""
    (other,) = free_ports(1)
    monkeypatch.setenv("TF_CONFIG", two_workers(0, [held_port, other]))
    run = run_gpucheck("--gpucheck-cluster", "--gpucheck-framework=none", f"--gpucheck-cluster-timeout={SHORT_WAIT}", timeout=BOUND_S)
    f = run.finding("cluster-peer-unreachable")
    assert f["subject"] == "worker:0" and "cannot listen" in f["summary"]
    assert f["evidence"]["holder"].startswith(f"pid {os.getpid()} (")
    assert f"port {held_port}" in f["summary"]
    (task,) = cluster_tasks(run)
    assert task["own_port"] == "taken" and task["stage"] == "own port" and task["peers"] == []


def test_a_slurm_step_given_by_its_variables(
    run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`srun -N1 -n2` on a node named localhost, as rank 0, with rank 1 never started: the cluster is read as
    SlurmClusterResolver reads it (ports 8888 and 8889), and rank 1 is named unreachable."""
    for name, value in {
        "SLURM_PROCID": "0",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NODELIST": "localhost",
        "SLURM_STEP_TASKS_PER_NODE": "2",
        "SLURMD_NODENAME": "localhost",
    }.items():
        monkeypatch.setenv(name, value)
    run = run_gpucheck("--gpucheck-cluster", "--gpucheck-framework=none", f"--gpucheck-cluster-timeout={SHORT_WAIT}", timeout=BOUND_S)
    config = run.report["facts"]["cluster_config"]
    assert config["source"] == "slurm" and config["task_type"] == "worker" and config["task_index"] == 0
    assert config["jobs"] == [{"name": "worker", "addresses": ["localhost:8888", "localhost:8889"]}]
    f = run.finding("cluster-peer-unreachable")
    # Rank 1's port refuses (or, on a machine where something holds 8888, this task's own port is named).
    assert f["subject"] in ("worker:1", "worker:0"), f


def test_a_slurm_rank_on_another_node_through_the_full_path(
    run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "SLURM_PROCID": "0",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NODELIST": "n[9-10]",
        "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
        "SLURMD_NODENAME": "n9",
    }.items():
        monkeypatch.setenv(name, value)
    run = run_gpucheck("--gpucheck-cluster=slurm", "--gpucheck-framework=none", timeout=BOUND_S)
    f = run.finding("cluster-config-invalid")
    assert "rank 0 the address n10:8888" in f["summary"] and f["evidence"]["key"] == "SLURM_STEP_NODELIST"


def test_nodes_given_the_cluster_in_different_orders(tmp_path: Path) -> None:
    """Two nodes whose TF_CONFIGs list the workers in different orders, each with index 0: every port answers
    (each is the other's worker 1), but each thinks itself the coordination leader and waits for the other to
    join. `cluster-collective-failed` on both, naming the task TensorFlow waits for; bounded by the wait.
    Slow by what it checks: two whole nodes, each with its diagnosis, whose cluster tasks TensorFlow's
    coordination service holds until they are stopped (30 s after the wait, --gpucheck-cluster-timeout)."""
    a, b = free_ports(2)
    configs = [
        {"cluster": {"worker": [f"127.0.0.1:{a}", f"127.0.0.1:{b}"]}, "task": {"type": "worker", "index": 0}},
        {"cluster": {"worker": [f"127.0.0.1:{b}", f"127.0.0.1:{a}"]}, "task": {"type": "worker", "index": 0}},
    ]
    procs = []
    for i, config in enumerate(configs):
        where = tmp_path / f"node{i}"
        where.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env["TF_CONFIG"] = json.dumps(config)
        cmd = [sys.executable, "-m", "pytest", "--gpucheck", "--gpucheck-cluster", f"--gpucheck-cluster-timeout={SHORT_WAIT}",
               f"--gpucheck-json={where / 'report.json'}", *RUN_OPTIONS, "-q"]
        procs.append((where, subprocess.Popen(cmd, cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    try:
        outputs = [proc.communicate(timeout=BOUND_S)[0] for _w, proc in procs]
    finally:
        for _w, proc in procs:
            proc.kill()
            proc.wait()
    for (where, _proc), out in zip(procs, outputs, strict=True):
        report = json.loads((where / "report.json").read_text())
        f = next((f for f in report["findings"] if f["id"] == "cluster-collective-failed"), None)
        assert f is not None, ([x["id"] for x in report["findings"]], out.decode()[-3000:])
        assert "hung at its strategy step" in f["summary"]
        assert "/job:worker/replica:0/task:1" in f["evidence"]["waiting_for"], f["evidence"]
        assert report["facts"]["cluster"]["exit"]["status"] == "timeout"


def test_an_evaluator_reaches_the_workers_and_takes_no_part(
    run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch, held_port: int
) -> None:
    """An evaluator outside the cluster (TensorFlow allows it): it reads checkpoints and joins no collective, so it
    has no port of its own and no peer to reach: done, no finding, even with the worker's port held by another
    program."""
    config = {"cluster": {"worker": [f"127.0.0.1:{held_port}"]}, "task": {"type": "evaluator", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    run = run_gpucheck("--gpucheck-cluster", "--gpucheck-framework=none", f"--gpucheck-cluster-timeout={SHORT_WAIT}", timeout=BOUND_S)
    assert layer(run)["state"] == "ok", run.report["findings"]
    (task,) = cluster_tasks(run)
    assert task["job"] == "evaluator" and task["stage"] == "done" and task["peers"] == []


def test_a_peer_that_answers_but_never_reaches_this_task(
    run_gpucheck: Callable[..., GpucheckRun], monkeypatch: pytest.MonkeyPatch, held_port: int
) -> None:
    """Worker 1's port answers (a listener this test holds), but nothing there ever reaches worker 0: a one-way
    firewall, or a program that is not a task of this cluster. Named as such after the wait, before TensorFlow."""
    (own,) = free_ports(1)
    monkeypatch.setenv("TF_CONFIG", two_workers(0, [own, held_port]))
    run = run_gpucheck("--gpucheck-cluster", "--gpucheck-framework=none", f"--gpucheck-cluster-timeout={SHORT_WAIT}", timeout=BOUND_S)
    f = run.finding("cluster-peer-unreachable")
    assert f["subject"] == "worker:1" and f["evidence"]["state"] == "no-inbound"
    assert "never reached this task" in f["evidence"]["error"]
    assert outcome(run, "test_cluster_peers_reachable")["outcome"] == "failed"


def test_a_local_task_whose_child_crashed_before_writing_is_a_finding() -> None:
    """A local:N task whose process died before it wrote anything (here the import error a stale probe target
    gave every task, as the run printed it) is ``cluster-collective-failed``, never an ok cluster layer: the
    task was left at its first stage with its port untried, which must not read as "stopped at its own port
    for a reason named already"."""
    from gpucheck.cluster.config import read_config
    from gpucheck.cluster.facts import CONFIG_FIELD, FIELD, ClusterFacts, TaskFacts
    from gpucheck.cluster.rules import cluster_rules
    from gpucheck.facts import ProbeOutcome
    from gpucheck.settings import Settings
    from tests.test_placement_rules import OK_EXIT, base_facts

    crash = ("    fn = getattr(importlib.import_module(module), function, None)",
             "ModuleNotFoundError: No module named 'gpucheck.probes.cluster'")
    tasks = tuple(
        TaskFacts("worker", i, f"127.0.0.1:{port}", exit_status="crashed", exit_detail=crash)
        for i, port in enumerate((49375, 58611))
    )
    settings = Settings(cluster="local:2")
    facts = base_facts().with_field(CONFIG_FIELD, read_config("local:2", {}))
    facts = facts.with_field(FIELD, ProbeOutcome("cluster", OK_EXIT, ClusterFacts("local", tasks, 60.0)))
    found = cluster_rules(facts, settings)
    assert [(f.id, f.subject) for f in found] == [("cluster-collective-failed", "worker:0"), ("cluster-collective-failed", "worker:1")]
    assert "crashed" in found[0].summary and found[0].evidence["output"][-1] == crash[-1]
