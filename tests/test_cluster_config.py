"""The cluster configuration, read as TensorFlow's cluster resolvers read it (``gpucheck.cluster.config``):
each problem named with its key and value, and the reading checked against real TensorFlow's own resolvers."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucheck.cluster.config import expand_hostlist, read_config
from gpucheck.cluster.facts import ClusterConfigFacts
from gpucheck.settings import parse_cluster

TWO = ["10.0.0.1:2222", "10.0.0.2:2222"]


def tf_config(cluster: Any, task: Any = None, **extra: Any) -> str:
    doc: dict[str, Any] = {"cluster": cluster, **extra}
    if task is not None:
        doc["task"] = task
    return json.dumps(doc)


def problems(config: ClusterConfigFacts) -> list[tuple[str, str | None, str]]:
    return [(p.key, p.value, p.problem) for p in config.problems]


#: (TF_CONFIG, the key the problem names, words of the problem)
BAD: dict[str, tuple[str, str, str]] = {
    "not json": ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}', "TF_CONFIG", "not valid JSON"),
    "empty": ("", "TF_CONFIG", "empty"),
    "a list": ("[1, 2]", "TF_CONFIG", "must be a JSON object"),
    "no cluster": (json.dumps({"task": {"type": "worker", "index": 0}}), "TF_CONFIG cluster", "single machine"),
    "no task": (tf_config({"worker": TWO}), "TF_CONFIG task", "which task"),
    "index out of range": (tf_config({"worker": TWO}, {"type": "worker", "index": 2}), "TF_CONFIG task.index", "out of range"),
    "index not a number": (tf_config({"worker": TWO}, {"type": "worker", "index": "one"}), "TF_CONFIG task.index", "not a number"),
    "index negative": (tf_config({"worker": TWO}, {"type": "worker", "index": -1}), "TF_CONFIG task.index", "negative"),
    "no index": (tf_config({"worker": TWO}, {"type": "worker"}), "TF_CONFIG task.index", "no 'index'"),
    "type not in cluster": (tf_config({"worker": TWO}, {"type": "chief", "index": 0}), "TF_CONFIG task.type", "no 'chief' job"),
    "unknown task type": (tf_config({"worker": TWO}, {"type": "master", "index": 0}), "TF_CONFIG task.type", "must be one of"),
    "unknown job": (tf_config({"worker": TWO, "trainer": ["10.0.0.3:1"]}, {"type": "worker", "index": 0}), "TF_CONFIG cluster.trainer", "not a task type"),
    "duplicate addresses": (
        tf_config({"worker": ["10.0.0.1:2222", "10.0.0.1:2222"]}, {"type": "worker", "index": 0}),
        "TF_CONFIG cluster.worker[1]",
        "also cluster.worker[0]",
    ),
    "duplicate across jobs": (
        tf_config({"chief": ["Host-A:2222"], "worker": ["host-a:2222"]}, {"type": "chief", "index": 0}),
        "TF_CONFIG cluster.worker[0]",
        "two tasks cannot listen on one address",
    ),
    "localhost across hosts": (
        tf_config({"worker": ["localhost:2222", "10.0.0.2:2222"]}, {"type": "worker", "index": 0}),
        "TF_CONFIG cluster",
        "the other hosts cannot reach that task",
    ),
    "port not a number": (tf_config({"worker": ["10.0.0.1:http", "10.0.0.2:2222"]}, {"type": "worker", "index": 0}), "TF_CONFIG cluster.worker[0]", "not a port number"),
    "port out of range": (tf_config({"worker": ["10.0.0.1:70000", "10.0.0.2:2222"]}, {"type": "worker", "index": 0}), "TF_CONFIG cluster.worker[0]", "out of range"),
    # Port 0 binds whatever port the system hands out, which no peer can know: "The GrpcChannelCache needs the
    # actual ports of the TF servers in order to correctly connect" (https://github.com/tensorflow/tensorflow/issues/11081).
    "port 0": (tf_config({"worker": ["10.0.0.1:0", "10.0.0.2:2222"]}, {"type": "worker", "index": 0}), "TF_CONFIG cluster.worker[0]", "out of range"),
    "no port": (tf_config({"worker": ["10.0.0.1", "10.0.0.2:2222"]}, {"type": "worker", "index": 0}), "TF_CONFIG cluster.worker[0]", "no port"),
    "two chiefs": (tf_config({"chief": TWO, "worker": ["10.0.0.3:1"]}, {"type": "worker", "index": 0}), "TF_CONFIG cluster.chief", "at most one chief"),
    "ps without worker": (tf_config({"chief": ["10.0.0.1:1"], "ps": ["10.0.0.3:2222"]}, {"type": "ps", "index": 0}), "TF_CONFIG cluster", "at least one worker"),
    "job not a list": (tf_config({"worker": "10.0.0.1:2222"}, {"type": "worker", "index": 0}), "TF_CONFIG cluster.worker", "must be a list"),
    "indices with a gap": (tf_config({"worker": {"0": "10.0.0.1:1", "2": "10.0.0.2:1"}}, {"type": "worker", "index": 0}), "TF_CONFIG cluster.worker", "an index is missing"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_problem_names_its_key_and_value(case: str) -> None:
    text, key, words = BAD[case]
    config = read_config(None, {"TF_CONFIG": text})
    found = problems(config)
    assert any(k == key and words in problem for k, _v, problem in found), found
    assert config.source == "TF_CONFIG" and not config.asked


GOOD: dict[str, tuple[str, str]] = {
    "two workers": (tf_config({"worker": TWO}, {"type": "worker", "index": 1}), "MultiWorkerMirroredStrategy"),
    "chief and workers": (
        tf_config({"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}, {"type": "chief", "index": 0}),
        "MultiWorkerMirroredStrategy",
    ),
    "ps cluster": (
        tf_config({"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "ps": ["p0:1"]}, {"type": "ps", "index": 0}),
        "ParameterServerStrategy",
    ),
    "tasks as a dict, index as a string": (
        tf_config({"worker": {"1": "10.0.0.2:2222", "0": "10.0.0.1:2222"}}, {"type": "worker", "index": "1"}),
        "MultiWorkerMirroredStrategy",
    ),
    "ps and workers, the coordinator outside the cluster": (
        tf_config({"worker": TWO, "ps": ["10.0.0.3:2222"]}, {"type": "worker", "index": 0}),
        "ParameterServerStrategy",
    ),
    "evaluator outside the cluster": (tf_config({"worker": TWO}, {"type": "evaluator", "index": 0}), "MultiWorkerMirroredStrategy"),
    "ipv6 and loopback only": (
        tf_config({"worker": ["[::1]:2222", "127.0.0.1:2223", "localhost:2224"]}, {"type": "worker", "index": 2}),
        "MultiWorkerMirroredStrategy",
    ),
}


@pytest.mark.parametrize("case", sorted(GOOD))
def test_valid_configurations_have_no_problem(case: str) -> None:
    text, strategy = GOOD[case]
    config = read_config("auto", {"TF_CONFIG": text})
    assert problems(config) == [] and config.strategy == strategy and config.asked


@pytest.mark.parametrize("text", ["{}", json.dumps({"task": {"type": "worker", "index": 0}}), tf_config({})])
def test_what_tensorflow_runs_alone_is_a_note_unless_a_cluster_is_asked_for(text: str) -> None:
    """A TF_CONFIG without a cluster makes TensorFlow run each process as a single machine, without a word: a
    note on a plain run (a healthy GPU host stays accelerated), a blocker when --gpucheck-cluster asks."""
    plain = read_config(None, {"TF_CONFIG": text})
    assert plain.problems and {p.kind for p in plain.problems} == {"silent"} and plain.blocking() == []
    asked = read_config("auto", {"TF_CONFIG": text})
    assert asked.blocking() == list(asked.problems)


@pytest.mark.parametrize("index", ["Infinity", "1e400", "-Infinity", "NaN"])
def test_an_index_no_integer_can_hold_is_a_problem_not_a_crash(index: str) -> None:
    text = '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": ' + index + "}}"
    (found,) = problems(read_config(None, {"TF_CONFIG": text}))
    assert found[0] == "TF_CONFIG task.index" and "not a number" in found[2]


def test_no_cluster_and_no_option_is_not_checked_and_the_option_alone_says_so() -> None:
    assert read_config(None, {}) == ClusterConfigFacts(source=None, asked=False)
    found = problems(read_config("auto", {}))
    assert len(found) == 1 and "found no cluster" in found[0][2] and "local:2" in found[0][2]
    assert "TF_CONFIG is not set" in problems(read_config("tf_config", {}))[0][2]


def test_an_explicit_spec_is_read_like_tf_config() -> None:
    spec = tf_config({"worker": TWO}, {"type": "worker", "index": 5})
    config = read_config(spec, {"TF_CONFIG": tf_config({"worker": ["a:1"]}, {"type": "worker", "index": 0})})
    assert config.source == "--gpucheck-cluster"
    assert problems(config)[0][0] == "--gpucheck-cluster task.index"


@pytest.mark.parametrize(
    ("text", "value"),
    [("", None), ("off", None), ("1", "auto"), ("AUTO", "auto"), ("local:2", "local:2"), ("local:3+ps", "local:3+ps"),
     ("Slurm", "slurm"), ("tf_config", "tf_config"), ('{"cluster": {}}', '{"cluster": {}}')],
)
def test_the_option_value(text: str, value: str | None) -> None:
    assert parse_cluster(text) == value


@pytest.mark.parametrize("text", ["local:0", "local:9", "local:x", "kubernetes", "tests/"])
def test_a_bad_option_value_says_what_it_may_be(text: str) -> None:
    with pytest.raises(ValueError, match="must"):
        parse_cluster(text)


# --- Slurm ----------------------------------------------------------------------------------------------


def slurm(nodelist: str, per_node: str, tasks: int, rank: int, node: str | None = None) -> dict[str, str | None]:
    env: dict[str, str | None] = {
        "SLURM_PROCID": str(rank),
        "SLURM_STEP_NUM_TASKS": str(tasks),
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_TASKS_PER_NODE": per_node,
    }
    if node is not None:
        env["SLURMD_NODENAME"] = node
    return env


SLURM_CASES = [
    ("gpu[01-02]", "2(x2)", 4, 3),
    ("n[9-10]", "1(x2)", 2, 0),
    ("a1,b[01-03]", "2,1(x3)", 5, 4),
    ("node7", "3", 3, 1),
]


def test_slurms_gpu_split_is_a_note() -> None:
    """Two tasks on a node that shows one GPU: SlurmClusterResolver() with its defaults raises in cluster_spec();
    a program may pass its own split, so it is a note, and the cluster itself is read."""
    env = {**slurm("n1", "2", 2, 0), "CUDA_VISIBLE_DEVICES": "0"}
    config = read_config("slurm", env)
    (p,) = config.problems
    assert p.kind == "note" and p.key == "CUDA_VISIBLE_DEVICES" and "range() arg 3 must not be zero" in p.problem
    assert config.blocking() == [] and config.jobs[0].addresses == ("n1:8888", "n1:8889")


def test_a_rank_slurm_runs_on_another_node_is_named() -> None:
    found = problems(read_config("slurm", slurm("n[9-10]", "1(x2)", 2, 0, node="n9")))
    assert len(found) == 1
    key, value, problem = found[0]
    assert key == "SLURM_STEP_NODELIST" and value == "n[9-10]"
    assert "rank 0 the address n10:8888" in problem and "runs it on n9" in problem
    # Node names of one width keep the orders equal.
    assert problems(read_config("slurm", slurm("n[09-10]", "1(x2)", 2, 0, node="n09"))) == []


@pytest.mark.parametrize(
    ("env", "key", "words"),
    [
        ({"SLURM_PROCID": "0"}, "SLURM_STEP_NUM_TASKS", "Not running inside a SLURM step"),
        (slurm("n[1-2]", "2(x2)", 3, 0), "SLURM_STEP_NUM_TASKS", "Requested 3 tasks but only 4 were assigned"),
        (slurm("n[1-2", "1", 1, 0), "SLURM_STEP_NODELIST", "not a Slurm host list"),
        (slurm("n1", "two", 2, 0), "SLURM_STEP_TASKS_PER_NODE", "not a tasks-per-node list"),
        (slurm("n1", "2", 2, 5), "SLURM_PROCID", "out of range"),
        ({**slurm("n1", "2", 2, 0), "SLURM_PROCID": "x"}, "SLURM_PROCID", "not a number"),
    ],
)
def test_slurm_problems(env: dict[str, str | None], key: str, words: str) -> None:
    found = problems(read_config("slurm", env))
    assert any(k == key and words in p for k, _v, p in found), found


TF_SIDE = textwrap.dedent(
    """
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as slurm
    from tensorflow.python.distribute.cluster_resolver.tfconfig_cluster_resolver import TFConfigClusterResolver
    cases = json.load(sys.stdin)
    out = {"tf_config": {}, "slurm": [], "hostlists": {}, "slurm_one_gpu": None}
    for name, text in cases["tf_config"].items():
        os.environ["TF_CONFIG"] = text
        try:
            r = TFConfigClusterResolver()
            spec = r.cluster_spec()
            multi_worker_util._validate_cluster_spec(spec, r.task_type, r.task_id)
            jobs = {j: spec.job_tasks(j) for j in spec.jobs}
            if "ps" in jobs and (not jobs.get("worker")):
                raise ValueError("There must be at least one worker.")
            out["tf_config"][name] = {"jobs": jobs, "task": [r.task_type, r.task_id]}
        except Exception as exc:
            out["tf_config"][name] = {"error": f"{type(exc).__name__}: {exc}"}
    os.environ.pop("TF_CONFIG", None)
    for env in cases["slurm"]:
        os.environ.update(env)
        r = slurm.SlurmClusterResolver(gpus_per_node=8, auto_set_gpu=False)
        spec = r.cluster_spec().as_dict()
        out["slurm"].append({"jobs": spec, "task": list(r.get_task_info())})
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    for env in cases["slurm_one_gpu"]:
        os.environ.update(env)
        try:
            slurm.SlurmClusterResolver(auto_set_gpu=False).cluster_spec()
            out["slurm_one_gpu"] = "ok"
        except Exception as exc:
            out["slurm_one_gpu"] = f"{type(exc).__name__}: {exc}"
    for text in cases["hostlists"]:
        out["hostlists"][text] = slurm.expand_hostlist(text)
    print(json.dumps(out))
    """
)


#: Set by tests/mutation/run_mutmut.py (``tox -e mutation``): a folder where TensorFlow's answer is kept for the run.
ORACLE_CACHE_ENV = "GPUCHECK_TF_ORACLE_CACHE"


def tensorflows_reading(request: str) -> dict[str, Any]:
    """What real TensorFlow reads of the cases (``TF_SIDE`` in a child process). Under mutation testing the answer
    to the same request is computed once and read back: it does not depend on gpucheck, whose mutants are all that
    change between runs, and TensorFlow takes about 8 s to start for each mutant."""
    folder = os.environ.get(ORACLE_CACHE_ENV)
    key = hashlib.sha256(f"{sys.executable}\n{TF_SIDE}\n{request}".encode()).hexdigest()[:20]
    kept = Path(folder) / f"tf-reading-{key}.json" if folder else None
    if kept is not None and kept.is_file():
        answer: dict[str, Any] = json.loads(kept.read_text(encoding="utf-8"))
        return answer
    done = subprocess.run(
        [sys.executable, "-c", TF_SIDE], input=request, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if kept is not None:
        partial = kept.with_name(f"{kept.name}.{os.getpid()}")
        partial.write_text(json.dumps(answer), encoding="utf-8")
        os.replace(partial, kept)
    return answer


def test_the_reading_agrees_with_tensorflows_own_resolvers() -> None:
    """Real TensorFlow reads the same configurations: where its resolver or its strategies' validation raise,
    gpucheck names a problem; where they accept, gpucheck finds the same jobs, addresses and task (problems it
    names beyond TensorFlow's are those TensorFlow meets only later, at a socket: ports, duplicates, localhost)."""
    tf_cases = {name: text for name, (text, *_rest) in {**BAD, **GOOD}.items()}
    del tf_cases["empty"], tf_cases["not json"], tf_cases["a list"]  # json.loads fails in TensorFlow too
    hostlists = ["n[1-2],m5,o[3-4,6,7-9]", "gpu[001-003]", "a1,b[01-03]", "n[9-10]"]
    envs = [{k: v for k, v in slurm(*case).items() if v is not None} for case in SLURM_CASES]
    one_gpu = {k: v for k, v in slurm("n1", "2", 2, 0).items() if v is not None}
    tf = tensorflows_reading(
        json.dumps({"tf_config": tf_cases, "slurm": envs, "hostlists": hostlists, "slurm_one_gpu": [one_gpu]})
    )
    later = ("listen on one address", "other hosts cannot reach", "not host:port", "no chief", "no 'index'", "single machine", "which task", "an index is missing", "truncates", "negative")
    for name, text in tf_cases.items():
        ours = read_config(None, {"TF_CONFIG": text})
        theirs = tf["tf_config"][name]
        if "error" in theirs:
            assert ours.problems, f"{name}: TensorFlow raises {theirs['error']}, gpucheck finds nothing"
            continue
        assert all(any(w in p.problem for w in later) for p in ours.problems), (name, problems(ours))
        if not ours.problems:
            jobs = {j.name: list(j.addresses) for j in ours.jobs}
            assert jobs == theirs["jobs"], name
            assert [ours.task_type, ours.task_index] == theirs["task"], name
    for case, env, theirs in zip(SLURM_CASES, envs, tf["slurm"], strict=True):
        ours = read_config("slurm", env)
        assert {j.name: list(j.addresses) for j in ours.jobs} == theirs["jobs"], case
        assert [ours.task_type, ours.task_index] == theirs["task"], case
    # Where TensorFlow's resolver raises on its GPU split, gpucheck notes it.
    assert "range() arg 3 must not be zero" in tf["slurm_one_gpu"]
    assert read_config("slurm", {**one_gpu, "CUDA_VISIBLE_DEVICES": "0"}).problems[0].kind == "note"
    for text, hosts in tf["hostlists"].items():
        assert expand_hostlist(text) == hosts


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    cluster=_JSON | st.dictionaries(st.sampled_from(["worker", "chief", "ps", "evaluator", "x"]), _JSON, max_size=4),
    task=_JSON | st.fixed_dictionaries({"type": _JSON, "index": _JSON}),
)
def test_any_tf_config_is_read_without_a_crash(cluster: Any, task: Any) -> None:
    """Whatever TF_CONFIG holds, reading it gives facts and sentences, never an exception (it is read on every run)."""
    for spec in (None, "auto"):
        config = read_config(spec, {"TF_CONFIG": json.dumps({"cluster": cluster, "task": task})})
        assert all(p.problem and p.key for p in config.problems)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
                                        "SLURM_STEP_TASKS_PER_NODE", "SLURMD_NODENAME", "CUDA_VISIBLE_DEVICES"]),
                       st.text(alphabet="n0123456789[]-,()x²", max_size=16)))
def test_any_slurm_environment_is_read_without_a_crash(env: dict[str, str]) -> None:
    config = read_config("slurm", dict(env))
    assert config.source == "slurm"
