"""The cluster configuration reading (``gpucheck/cluster/config.py``) against what TensorFlow does with the same
input, each test written against a mutant ``tox -e mutation`` found alive (docs/mutation.md).

TF_CONFIG examples are TensorFlow's own: ``tfconfig_cluster_resolver_test.py``
(https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/distribute/cluster_resolver/tfconfig_cluster_resolver_test.py)
and the tutorials' (https://www.tensorflow.org/tutorials/distribute/multi_worker_with_keras,
https://www.tensorflow.org/tutorials/distribute/parameter_server_training). Slurm's host lists follow
``slurm_cluster_resolver.expand_hostlist``, whose docstring example is ``n[1-2],m5,o[3-4,6,7-9]``.
"""

from __future__ import annotations

import json
import re

import pytest

from gpucheck.cluster.config import (
    MAX_ENV_STRING,
    MAX_HOSTS,
    QUOTE_CHARS,
    expand_hostlist,
    expand_tasks_per_node,
    local_counts,
    own_address,
    read_config,
    split_address,
    tf_config_for,
)
from gpucheck.cluster.facts import ClusterConfigFacts, ClusterJob, ConfigProblem

#: tfconfig_cluster_resolver_test.py, testNormalClusterSpecRead (and testTaskTypeIndexRpcRead with "rpc_layer").
TF_TEST_CLUSTER = {"ps": ["ps0:2222", "ps1:2222"], "worker": ["worker0:2222", "worker1:2222", "worker2:2222"]}
TF_TEST_NORMAL = json.dumps({"cluster": TF_TEST_CLUSTER, "task": {"type": "ps", "index": 0}})
#: The multi-worker Keras tutorial's TF_CONFIG.
TUTORIAL = json.dumps({"cluster": {"worker": ["localhost:12345", "localhost:23456"]}, "task": {"type": "worker", "index": 0}})


def slurm(**env: str) -> dict[str, str | None]:
    return {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "gpu[01-02]",
            "SLURM_STEP_TASKS_PER_NODE": "2(x2)", **env}


# --- TF_CONFIG ----------------------------------------------------------------------------------------


def test_tensorflows_own_test_configurations_read_as_tensorflow_reads_them() -> None:
    """testNormalClusterSpecRead: two ps and three workers, this task ps 0, read with no problem, for
    ParameterServerStrategy (a ps job); the spec's jobs and addresses in TensorFlow's order."""
    config = read_config(None, {"TF_CONFIG": TF_TEST_NORMAL})
    assert config == ClusterConfigFacts(
        source="TF_CONFIG",
        asked=False,
        text=TF_TEST_NORMAL,
        jobs=(ClusterJob("ps", ("ps0:2222", "ps1:2222")), ClusterJob("worker", ("worker0:2222", "worker1:2222", "worker2:2222"))),
        task_type="ps",
        task_index=0,
        strategy="ParameterServerStrategy",
    )
    assert own_address(config) == "ps0:2222"  # testAutomaticMasterRead: master() is ps0:2222
    # testTaskTypeIndexRpcRead: "rpc_layer" beside them changes nothing here.
    rpc = json.dumps({"cluster": TF_TEST_CLUSTER, "rpc_layer": "grpc", "task": {"type": "ps", "index": 0}})
    assert read_config("tf_config", {"TF_CONFIG": rpc}).problems == ()


def test_task_index_and_type_are_cast_as_tensorflow_casts_them() -> None:
    """testTaskIndexCastToInteger: "index": "1" is task 1. testTaskTypeCastToString: "type": 123456 is the
    string "123456", which no strategy knows (multi_worker_util._validate_cluster_spec raises on it)."""
    index = json.dumps({"cluster": TF_TEST_CLUSTER, "task": {"type": "ps", "index": "1"}})
    config = read_config(None, {"TF_CONFIG": index})
    assert (config.task_type, config.task_index, config.problems) == ("ps", 1, ())
    assert own_address(config) == "ps1:2222"
    cast = json.dumps({"cluster": {"123456": ["ps0:2222", "ps1:2222"], "worker": TF_TEST_CLUSTER["worker"]},
                       "task": {"type": 123456, "index": 0}})
    config = read_config(None, {"TF_CONFIG": cast})
    assert config.task_type == "123456"
    assert {p.key for p in config.problems} == {"TF_CONFIG cluster.123456", "TF_CONFIG task.type"}


def test_tensorflows_zero_and_one_item_configurations_run_alone() -> None:
    """testZeroItemsInClusterSpecMasterRead ("{}") and testOneItemInClusterSpecMasterRead (a cluster, no task):
    TensorFlow's master() is "" (nothing to connect to): a silent problem, a fault only when a cluster is asked."""
    zero = read_config(None, {"TF_CONFIG": "\n    {}\n    "})
    assert [(p.key, p.kind) for p in zero.problems] == [("TF_CONFIG", "silent")] and zero.blocking() == []
    one = json.dumps({"cluster": {"worker": ["worker0:2222"]}})
    config = read_config("auto", {"TF_CONFIG": one})
    assert config.jobs == (ClusterJob("worker", ("worker0:2222",)),) and config.task_type is None
    assert [(p.key, p.value, p.kind) for p in config.problems] == [("TF_CONFIG task", None, "silent")]
    assert config.blocking() == list(config.problems) and own_address(config) is None


def test_the_tutorials_configurations() -> None:
    """The Keras tutorial's two workers on localhost read clean; the parameter server tutorial's placeholders
    ("host1:port") are no port numbers, and each is named."""
    config = read_config(None, {"TF_CONFIG": TUTORIAL})
    assert config.problems == () and config.strategy == "MultiWorkerMirroredStrategy"
    assert own_address(config) == "localhost:12345"
    placeholder = json.dumps({
        "cluster": {"worker": ["host1:port", "host2:port", "host3:port"], "ps": ["host4:port", "host5:port"],
                    "chief": ["host6:port"]},
        "task": {"type": "worker", "index": 1},
    })
    found = read_config(None, {"TF_CONFIG": placeholder}).problems
    assert [p.key for p in found] == [f"TF_CONFIG cluster.{job}[{i}]" for job, n in (("worker", 3), ("ps", 2), ("chief", 1))
                                      for i in range(n)]
    assert all("the port 'port' is not a port number" in p.problem and p.kind == "fatal" for p in found)


def test_each_problem_quotes_the_value_it_is_about() -> None:
    """A problem names its key and the value found there (as given, cut short at QUOTE_CHARS)."""
    two = json.dumps({"cluster": {"chief": ["c0:1", "c1:1"], "worker": ["w:1"]}, "task": {"type": "worker", "index": 0}})
    (p,) = read_config(None, {"TF_CONFIG": two}).problems
    assert (p.key, p.value) == ("TF_CONFIG cluster.chief", "2")
    name = ".".join(["h" * 60] * 5)  # 304 characters, each label within DNS's 63
    long = json.dumps({"cluster": {"worker": [f"{name}:1", f"{name}:1"]}, "task": {"type": "worker", "index": 0}})
    config = read_config(None, {"TF_CONFIG": long})
    assert config.text is not None and len(config.text) == QUOTE_CHARS and config.text.endswith("…")
    assert config.text[:-1] == long[: QUOTE_CHARS - 1]
    (dup,) = config.problems
    assert dup.value == f"{name}:1"[: QUOTE_CHARS - 1] + "…"
    job = json.dumps({"cluster": {"worker": {"a": "w:1"}}, "task": {"type": "worker", "index": 0}})
    assert read_config(None, {"TF_CONFIG": job}).problems[0].value == '{"a": "w:1"}'


def test_the_full_form_of_ipv6_loopback_is_loopback() -> None:
    """A cluster across hosts that names this host's loopback: each host would reach itself."""
    spec = json.dumps({"cluster": {"worker": ["[0:0:0:0:0:0:0:1]:2222", "10.0.0.2:2222"]}, "task": {"type": "worker", "index": 0}})
    (p,) = read_config(None, {"TF_CONFIG": spec}).problems
    assert p.key == "TF_CONFIG cluster" and "the other hosts cannot reach that task" in p.problem


def test_a_tf_config_no_process_can_be_started_with() -> None:
    """Linux's MAX_ARG_STRLEN (131,072) bounds one environment string with its closing NUL: on this machine
    ``subprocess.run(["/bin/true"], env={"TF_CONFIG": v})`` starts with ``TF_CONFIG=v`` of 131,071 bytes and fails
    with E2BIG at 131,072 (found by this test: that length was taken as fine, and every child failed)."""

    def of_size(size: int) -> str:
        return json.dumps({"a": "x" * (size - len("TF_CONFIG=") - len('{"a": ""}'))})

    (p,) = read_config(None, {"TF_CONFIG": of_size(MAX_ENV_STRING)}).problems
    assert p.key == "TF_CONFIG" and "MAX_ARG_STRLEN" in p.problem and p.kind == "fatal"
    assert f"is {MAX_ENV_STRING:,} bytes" in p.problem
    shorter = read_config(None, {"TF_CONFIG": of_size(MAX_ENV_STRING - 1)}).problems
    assert shorter and not any("MAX_ARG_STRLEN" in p.problem for p in shorter)  # what is left: no cluster, no task


# --- which cluster, from the option and the environment ----------------------------------------------------


def test_the_option_picks_the_source() -> None:
    """``--gpucheck-cluster=auto`` takes TF_CONFIG where it is set, Slurm where SLURM_PROCID is; ``slurm`` takes
    Slurm's even when TF_CONFIG is set; a JSON spec is read in place of TF_CONFIG; without the option a set
    TF_CONFIG is read (every TensorFlow program of the job reads it), not asked."""
    both = {"TF_CONFIG": TUTORIAL, **slurm()}
    assert read_config("auto", both).source == "TF_CONFIG" and read_config("auto", slurm()).source == "slurm"
    assert read_config("slurm", both).source == "slurm" and read_config("tf_config", both).source == "TF_CONFIG"
    spec = read_config(TF_TEST_NORMAL, {"TF_CONFIG": TUTORIAL})
    assert (spec.source, spec.asked, spec.task_type) == ("--gpucheck-cluster", True, "ps")
    plain = read_config(None, both)
    assert (plain.source, plain.asked) == ("TF_CONFIG", False)
    assert read_config(None, slurm()) == ClusterConfigFacts(source=None, asked=False)


def test_nothing_to_read_names_the_option_or_the_variable() -> None:
    assert read_config("auto", {}) == ClusterConfigFacts(
        source="--gpucheck-cluster",
        asked=True,
        problems=(ConfigProblem("--gpucheck-cluster", None, read_config("auto", {}).problems[0].problem),),
    )
    config = read_config("tf_config", {})
    assert (config.source, config.asked, [(p.key, p.value, p.kind) for p in config.problems]) == (
        "TF_CONFIG", True, [("TF_CONFIG", None, "fatal")]
    )


def test_local_clusters() -> None:
    """``local:N`` starts N workers on the loopback (MultiWorkerMirroredStrategy); ``local:N+ps`` adds a
    parameter server (ParameterServerStrategy)."""
    assert local_counts("local:2") == (2, 0) and local_counts("local:3+ps") == (3, 1)
    with pytest.raises(ValueError, match="not a local spec"):
        local_counts("slurm")
    assert read_config("local:3+ps", {"TF_CONFIG": TUTORIAL}) == ClusterConfigFacts(
        source="local", asked=True, text="local:3+ps", strategy="ParameterServerStrategy", local_workers=3, local_ps=1
    )
    assert read_config("local:2", {}).strategy == "MultiWorkerMirroredStrategy"


def test_a_tasks_tf_config_reads_back_as_that_task() -> None:
    """``tf_config_for`` writes the TF_CONFIG each local or Slurm task is started with: TensorFlow's format
    ({"cluster": {job: [addresses]}, "task": {"type", "index"}}), read back as the same cluster and task."""
    jobs = (ClusterJob("worker", ("127.0.0.1:2222", "127.0.0.1:2223")), ClusterJob("ps", ("127.0.0.1:2224",)))
    text = tf_config_for(jobs, "worker", 1)
    assert json.loads(text) == {
        "cluster": {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"], "ps": ["127.0.0.1:2224"]},
        "task": {"type": "worker", "index": 1},
    }
    config = read_config(None, {"TF_CONFIG": text})
    assert (config.jobs, config.task_type, config.task_index, config.problems) == (jobs, "worker", 1, ())
    assert own_address(config) == "127.0.0.1:2223"


def test_own_address_only_where_the_configuration_names_one() -> None:
    jobs = (ClusterJob("worker", ("w0:1", "w1:1")),)
    facts = ClusterConfigFacts(source="TF_CONFIG", asked=True, jobs=jobs, task_type="worker", task_index=0)
    assert own_address(facts) == "w0:1"
    from dataclasses import replace

    assert own_address(replace(facts, task_index=1)) == "w1:1"
    assert own_address(replace(facts, task_index=2)) is None
    assert own_address(replace(facts, task_index=-1)) is None
    assert own_address(replace(facts, task_index=None)) is None
    assert own_address(replace(facts, task_type=None)) is None
    # An evaluator may be outside the cluster: it has no address in it.
    assert own_address(replace(facts, task_type="evaluator")) is None
    assert own_address(replace(facts, jobs=(ClusterJob("chief", ("c:1",)), *jobs), task_index=1)) == "w1:1"


# --- Slurm --------------------------------------------------------------------------------------------


def test_a_slurm_step_is_read_with_what_it_was_read_from() -> None:
    """The facts keep the Slurm variables read (not TF_CONFIG) and the node this task runs on."""
    env = {**slurm(SLURMD_NODENAME="gpu01"), "TF_CONFIG": TUTORIAL}
    config = read_config("slurm", env)
    assert config.text is not None and config.text.split(" ") == [
        "SLURM_PROCID=1", "SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_NODELIST=gpu[01-02]", "SLURM_STEP_TASKS_PER_NODE=2(x2)",
        "SLURMD_NODENAME=gpu01",
    ]
    assert (config.source, config.asked, config.node, config.task_type, config.task_index) == (
        "slurm", True, "gpu01", "worker", 1
    )
    assert config.jobs == (ClusterJob("worker", ("gpu01:8888", "gpu01:8889", "gpu02:8888", "gpu02:8889")),)
    # With a problem the facts are kept all the same.
    bad = read_config("slurm", slurm(SLURM_STEP_NUM_TASKS="four", SLURMD_NODENAME="gpu02"))
    assert (bad.source, bad.asked, bad.node) == ("slurm", True, "gpu02") and "SLURM_STEP_NUM_TASKS=four" in str(bad.text)


@pytest.mark.parametrize(
    ("env", "key", "value", "words"),
    [
        ({"SLURM_PROCID": "0"}, "SLURM_STEP_NUM_TASKS", None, "SLURM_STEP_NUM_TASKS not found in environment"),
        (slurm(SLURM_STEP_NUM_TASKS="four"), "SLURM_STEP_NUM_TASKS", "four", "not a number"),
        (slurm(SLURM_PROCID="x"), "SLURM_PROCID", "x", "not a number"),
        (slurm(SLURM_STEP_NODELIST="gpu[01-02"), "SLURM_STEP_NODELIST", "gpu[01-02", "not a Slurm host list"),
        (slurm(SLURM_STEP_TASKS_PER_NODE="2(x)"), "SLURM_STEP_TASKS_PER_NODE", "2(x)", "not a tasks-per-node list"),
        (slurm(SLURM_STEP_NUM_TASKS="3"), "SLURM_STEP_NUM_TASKS", "3", "Requested 3 tasks but only 4 were assigned"),
        (slurm(SLURM_PROCID="4"), "SLURM_PROCID", "4", "out of range for 4 tasks"),
        # Three nodes, two counts: SlurmClusterResolver zips them and the third node gets no task.
        (slurm(SLURM_STEP_NODELIST="gpu[01-03]"), "SLURM_STEP_TASKS_PER_NODE", "2(x2)",
         "SLURM_STEP_TASKS_PER_NODE lists 2 nodes but SLURM_STEP_NODELIST 3: SlurmClusterResolver pairs them and drops the rest"),
    ],
)
def test_each_slurm_problem_names_its_variable_and_value(env: dict[str, str | None], key: str, value: str | None,
                                                          words: str) -> None:
    config = read_config("slurm", env)
    assert any((p.key, p.value, p.kind) == (key, value, "fatal") and words in p.problem for p in config.problems), (
        config.problems
    )
    assert config.blocking()


def test_nodes_slurm_lists_beyond_the_counts_get_no_task() -> None:
    """SlurmClusterResolver pairs SLURM_STEP_NODELIST with SLURM_STEP_TASKS_PER_NODE as zip() does."""
    config = read_config("slurm", slurm(SLURM_STEP_NODELIST="gpu[01-03]"))
    assert config.jobs == (ClusterJob("worker", ("gpu01:8888", "gpu01:8889", "gpu02:8888", "gpu02:8889")),)
    empty = read_config("slurm", slurm(SLURM_STEP_NODELIST="", SLURM_STEP_TASKS_PER_NODE="1", CUDA_VISIBLE_DEVICES="0"))
    assert [p.key for p in empty.problems] == ["SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"]


def test_slurms_gpu_split_note_quotes_tensorflows_error() -> None:
    env = {**slurm(), "CUDA_VISIBLE_DEVICES": "0"}
    (p,) = read_config("slurm", env).problems
    assert (p.key, p.value, p.kind) == ("CUDA_VISIBLE_DEVICES", "0", "note")
    assert 'raises "ValueError: range() arg 3 must not be zero"' in p.problem
    assert "must pass gpus_per_node and gpus_per_task (or build the cluster spec itself)" in p.problem
    # Two GPUs for two tasks a node: no note.
    assert read_config("slurm", {**slurm(), "CUDA_VISIBLE_DEVICES": "0,1"}).problems == ()


def test_host_lists_as_tensorflow_expands_them() -> None:
    """slurm_cluster_resolver.expand_hostlist: its docstring's example, zero padding to the first bound's
    width, a range without a prefix; a nested '[', an empty name and a range of three bounds are refused
    (TensorFlow asserts on them and raises ValueError)."""
    assert expand_hostlist("n[1-2],m5,o[3-4,6,7-9]") == ["n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"]
    assert expand_hostlist("gpu[099-101]") == ["gpu099", "gpu100", "gpu101"]
    assert expand_hostlist("[1-2]") == ["1", "2"]
    assert expand_hostlist("") == []
    for bad, why in (("n[1-[2]]", "a '[' inside a range"), ("n1,,n2", "an empty host name"),
                     ("n[1-2-3]", "invalid range '1-2-3'"), ("n[a-b]", "invalid range 'a-b'"), ("n]1", "invalid part 'n]1'")):
        with pytest.raises(ValueError, match=f"^{re.escape(why)}$"):
            expand_hostlist(bad)


def test_host_lists_are_bounded() -> None:
    """At most MAX_HOSTS hosts, counted over the whole list; large node numbers are no large list."""
    assert expand_hostlist("n[99990-99999]") == [f"n{i}" for i in range(99990, 100000)]
    assert len(expand_hostlist(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS
    with pytest.raises(ValueError, match=f"more than {MAX_HOSTS} hosts"):
        expand_hostlist(f"n[0-{MAX_HOSTS + 1}]")
    with pytest.raises(ValueError, match=f"more than {MAX_HOSTS} hosts"):
        expand_hostlist("a[1-60000],b[1-60000]")
    with pytest.raises(ValueError, match="invalid range"):
        expand_hostlist("n[1-12345678901]")


def test_tasks_per_node_as_tensorflow_expands_them() -> None:
    """slurm_cluster_resolver.expand_tasks_per_node: ``2(x3),1`` is [2, 2, 2, 1]; at most MAX_HOSTS nodes."""
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert len(expand_tasks_per_node(f"1(x{MAX_HOSTS})")) == MAX_HOSTS
    with pytest.raises(ValueError, match=f"more than {MAX_HOSTS} nodes"):
        expand_tasks_per_node(f"1(x{MAX_HOSTS}),1")
    with pytest.raises(ValueError, match="invalid part '2x'"):
        expand_tasks_per_node("1,2x")


def test_a_rank_slurm_runs_elsewhere_names_both_orders() -> None:
    """SlurmClusterResolver orders the nodes as strings (n10, n11, n12, n8, n9), Slurm by its list (n8, n9, ...):
    rank 0 runs on n8 and is given n10's address. The problem shows the first four of each order."""
    env = slurm(SLURM_PROCID="0", SLURM_STEP_NUM_TASKS="5", SLURM_STEP_NODELIST="n[8-12]", SLURM_STEP_TASKS_PER_NODE="1(x5)",
                SLURMD_NODENAME="n8")
    (p,) = read_config("slurm", env).problems
    assert (p.key, p.value) == ("SLURM_STEP_NODELIST", "n[8-12]")
    assert "gives rank 0 the address n10:8888, but Slurm runs it on n8" in p.problem
    assert "it orders the nodes by name as strings (n10, n11, n12, n8 …), Slurm by its node list (n8, n9, n10, n11)" in p.problem
    # Four nodes or fewer: no ellipsis; a node the counts leave out (n11) takes no place in Slurm's order either.
    env = slurm(SLURM_PROCID="0", SLURM_STEP_NUM_TASKS="2", SLURM_STEP_NODELIST="n[9-11]", SLURM_STEP_TASKS_PER_NODE="1(x2)",
                SLURMD_NODENAME="n9")
    wrong = [p for p in read_config("slurm", env).problems if p.key == "SLURM_STEP_NODELIST"]
    assert len(wrong) == 1 and "as strings (n10, n9), Slurm by its node list (n9, n10), so" in wrong[0].problem


def test_addresses_are_host_colon_port_with_ipv6_in_brackets() -> None:
    """A task address is ``host:port`` (gRPC's form; an IPv6 host in brackets), the port 1 to 65535; what is not
    is named with the reason, which says how to write it."""
    assert split_address("worker0:2222") == ("worker0", 2222)
    assert split_address("[::1]:2222") == ("::1", 2222)
    assert split_address("[fe80::1]:65535") == ("fe80::1", 65535)
    assert split_address("10.0.0.1:1") == ("10.0.0.1", 1)
    ipv6 = "an IPv6 address must be written [address]:port"
    for bad, why in (
        ("fe80::1:2222", ipv6), ("[::1]2222", ipv6), ("[::1", ipv6), ("[::1]]:2222", ipv6),
        ("10.0.0.1", "it has no port (host:port)"), (":2222", "it has no host"),
        ("10.0.0.1:65536", "the port 65536 is out of range (1 to 65535)"),
        ("10.0.0.1:0", "the port 0 is out of range (1 to 65535)"),
        ("a..b:1", "'a..b' is not a valid host name"),
    ):
        assert split_address(bad) == why, bad


def _task0(cluster: object) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})


@pytest.mark.parametrize(
    ("cluster", "problem"),
    [
        (["a:1"], ("TF_CONFIG cluster", '["a:1"]', "'cluster' must map job names to lists of host:port addresses", "fatal")),
        ({}, ("TF_CONFIG cluster", "{}", "'cluster' is empty: TensorFlow runs every process as a single machine", "silent")),
        ({"worker": {"a": "w:1"}, "ps": ["p:1"]}, ("TF_CONFIG cluster.worker", '{"a": "w:1"}',
                                                  "the tasks of job 'worker' are keyed by something other than task indices", "fatal")),
        ({"worker": {"0": "a:1", "2": "b:1"}, "ps": ["p:1"]}, (
            "TF_CONFIG cluster.worker", '{"0": "a:1", "2": "b:1"}',
            "the task indices of job 'worker' are [0, 2], not 0 to 1: the strategies count tasks, so an index is missing",
            "fatal")),
        ({"worker": "a:1", "ps": ["p:1"]}, ("TF_CONFIG cluster.worker", "a:1",
                                           "the tasks for job 'worker' must be a list of host:port addresses", "fatal")),
        ({"worker": [], "ps": ["p:1"]}, ("TF_CONFIG cluster.worker", "[]", "job 'worker' has no task", "fatal")),
        ({"worker": ["a:1", 2222], "ps": ["p:1"]}, ("TF_CONFIG cluster.worker[1]", "2222",
                                                   'a task address must be a "host:port" string, not int', "fatal")),
    ],
)
def test_a_cluster_tensorflow_cannot_take_is_named_job_by_job(cluster: object, problem: tuple[str, str, str, str]) -> None:
    """``ClusterSpec(tf_config["cluster"])`` takes a dict of jobs, each a list of addresses or a dict from task
    index to address: what it cannot take is named with the job, the value and why; the other jobs are still
    read (the ps job after a bad worker job)."""
    config = read_config(None, {"TF_CONFIG": _task0(cluster)})
    assert next((p.key, p.value, p.problem, p.kind) for p in config.problems) == problem
    if isinstance(cluster, dict) and "ps" in cluster:
        assert ClusterJob("ps", ("p:1",)) in config.jobs


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        (None, ("TF_CONFIG task", None, "there is no 'task': this process does not know which task of the cluster it is",
                "silent")),
        ([1], ("TF_CONFIG task", "[1]", "'task' must be an object with 'type' and 'index'", "fatal")),
        ({"index": 0}, ("TF_CONFIG task.type", None, "'task' has no 'type' (chief, worker, ps or evaluator)", "fatal")),
        ({"type": "worker"}, ("TF_CONFIG task.index", None,
                              "'task' has no 'index': TensorFlow then has no task id for this process", "fatal")),
        ({"type": "worker", "index": "one"}, ("TF_CONFIG task.index", "one",
                                              "'task.index' is not a number: TensorFlow's int() fails on it", "fatal")),
        ({"type": "worker", "index": 1.5}, ("TF_CONFIG task.index", "1.5",
                                            "'task.index' is 1.5, which TensorFlow truncates to 1", "silent")),
        ({"type": "worker", "index": -1}, ("TF_CONFIG task.index", "-1", "'task.index' is negative", "fatal")),
        ({"type": "worker", "index": 2}, ("TF_CONFIG task.index", "2",
                                          "task.index 2 is out of range: job 'worker' has 2 tasks (indices 0 to 1)", "fatal")),
    ],
)
def test_a_task_tensorflow_cannot_take_is_named(task: object, problem: tuple[str, str | None, str, str]) -> None:
    """TFConfigClusterResolver takes ``str(task["type"])`` and ``int(task["index"])``; _validate_cluster_spec wants
    the index below its job's task count. What it cannot take is named with the value and why."""
    doc: dict[str, object] = {"cluster": {"worker": ["w0:2222", "w1:2222"]}}
    if task is not None:
        doc["task"] = task
    config = read_config(None, {"TF_CONFIG": json.dumps(doc)})
    assert [(p.key, p.value, p.problem, p.kind) for p in config.problems] == [problem]


@pytest.mark.parametrize(
    ("cluster", "task", "problem"),
    [
        ({"worker": ["w:1"], "trainer": ["t:1"]}, ("worker", 0), (
            "TF_CONFIG cluster.trainer", "trainer",
            "job 'trainer' is not a task type TensorFlow's strategies know (chief, worker, ps, evaluator)", "fatal")),
        ({"chief": ["c0:1", "c1:1"], "worker": ["w:1"]}, ("worker", 0), (
            "TF_CONFIG cluster.chief", "2", "there must be at most one chief task, not 2", "fatal")),
        ({"evaluator": ["e0:1", "e1:1"], "worker": ["w:1"]}, ("worker", 0), (
            "TF_CONFIG cluster.evaluator", "2", "there must be at most one evaluator task, not 2", "fatal")),
        ({"worker": ["w:1"]}, ("master", 0), (
            "TF_CONFIG task.type", "master", "'task.type' must be one of chief, worker, ps, evaluator", "fatal")),
        ({"worker": ["w:1"], "ps": ["p:1"]}, ("chief", 0), (
            "TF_CONFIG task.type", "chief", "the cluster has no 'chief' job (it has worker, ps)", "fatal")),
        ({"chief": ["c:1"], "worker": ["w:1"]}, ("chief", 1), (
            "TF_CONFIG task.index", "1", "task.index 1 is out of range: job 'chief' has 1 task (indices 0 to 0)", "fatal")),
        ({"chief": ["c:1"], "ps": ["p:1"]}, ("ps", 0), (
            "TF_CONFIG cluster", None,
            "a ps job needs ParameterServerStrategy, which needs at least one worker: the cluster has none", "fatal")),
        ({"worker": ["10.0.0.1:2222", "10.0.0.1:2222"]}, ("worker", 0), (
            "TF_CONFIG cluster.worker[1]", "10.0.0.1:2222",
            "10.0.0.1:2222 is also cluster.worker[0]: two tasks cannot listen on one address (the second server fails "
            "to bind, or both jobs' requests reach one task)", "fatal")),
        ({"worker": ["10.0.0.1"]}, ("worker", 0), (
            "TF_CONFIG cluster.worker[0]", "10.0.0.1", "the address '10.0.0.1' is not host:port: it has no port (host:port)",
            "fatal")),
        ({"worker": ["localhost:1", "127.0.0.1:2", "a:1", "b:1", "c:1", "d:1"]}, ("worker", 0), (
            "TF_CONFIG cluster", "127.0.0.1, localhost",
            "the cluster spans hosts (a, b, c …) but also names 127.0.0.1, localhost: on each host that means the host "
            "itself, so the other hosts cannot reach that task", "fatal")),
        ({"worker": ["localhost:1", "a:1", "b:1"]}, ("worker", 0), (
            "TF_CONFIG cluster", "localhost",
            "the cluster spans hosts (a, b) but also names localhost: on each host that means the host itself, so the "
            "other hosts cannot reach that task", "fatal")),
    ],
)
def test_a_cluster_the_strategies_refuse_is_named(cluster: object, task: tuple[str, int],
                                                   problem: tuple[str, str | None, str, str]) -> None:
    """multi_worker_util._validate_cluster_spec (known task types, at most one chief and one evaluator, the task's
    job in the cluster, its index in range), ParameterServerStrategy's need of a worker, and what TensorFlow meets
    only at the socket (one address twice, a loopback name in a cluster across hosts)."""
    text = json.dumps({"cluster": cluster, "task": {"type": task[0], "index": task[1]}})
    config = read_config(None, {"TF_CONFIG": text})
    assert [(p.key, p.value, p.problem, p.kind) for p in config.problems] == [problem]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", ("TF_CONFIG", "", "TF_CONFIG is set but empty: TensorFlow's json.loads fails on it; unset it or give the cluster",
              "fatal")),
        ("[1, 2]", ("TF_CONFIG", "[1, 2]", "TF_CONFIG must be a JSON object with 'cluster' and 'task', not a list", "fatal")),
        ("{}", ("TF_CONFIG", "{}", "TF_CONFIG is {}: TensorFlow then runs every process as a single machine", "silent")),
        ("[" * 100_000, ("TF_CONFIG", "[" * (QUOTE_CHARS - 1) + "…",
                         "TF_CONFIG is nested too deep for Python's json.loads: TensorFlow fails on it, in every process",
                         "fatal")),
        ('{"task": {"type": "worker", "index": 0}}', (
            "TF_CONFIG cluster", None,
            "TF_CONFIG has no 'cluster': TensorFlow then sees an empty cluster and runs every process as a single machine "
            "on its own, without a word", "silent")),
        ('{"cluster": ["a:1"], "task": {"type": "worker", "index": 0}}', (
            "TF_CONFIG cluster", '["a:1"]', "'cluster' must map job names to lists of host:port addresses", "fatal")),
    ],
)
def test_a_tf_config_tensorflow_cannot_load_is_one_problem(text: str, problem: tuple[str, str | None, str, str]) -> None:
    """What TFConfigClusterResolver's json.loads and ClusterSpec do with the document as a whole: one problem each,
    the text kept (cut short) on the facts."""
    config = read_config(None, {"TF_CONFIG": text})
    assert [(p.key, p.value, p.problem, p.kind) for p in config.problems] == [problem]
    assert config.text == (text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…")


def test_the_longest_tf_config_problem_quotes_its_start_and_the_text_of_its_size() -> None:
    text = json.dumps({"a": "x" * MAX_ENV_STRING})
    (p,) = read_config(None, {"TF_CONFIG": text}).problems
    assert p.value == text[:60] + "…"
    assert p.problem == (
        f"TF_CONFIG is {len('TF_CONFIG=' + text):,} bytes: Linux starts no program with an environment string of "
        f"{MAX_ENV_STRING:,} bytes or more (MAX_ARG_STRLEN, its closing NUL counted), so no TensorFlow process can be "
        "given it as TF_CONFIG; keep the cluster's addresses alone in it"
    )


def test_values_are_quoted_whole_up_to_the_bound() -> None:
    text = _task0({"worker": ["w:1"]})
    padded = text[:-1] + ', "pad": "' + "p" * (QUOTE_CHARS - len(text) - 11) + '"}'
    assert len(padded) == QUOTE_CHARS and read_config(None, {"TF_CONFIG": padded}).text == padded


def test_what_the_facts_keep_of_a_cluster() -> None:
    """A non-string address is kept as its JSON text; a Slurm step is for MultiWorkerMirroredStrategy; a rank out
    of range has no task index; three other hosts are listed whole, four nodes too."""
    config = read_config(None, {"TF_CONFIG": _task0({"worker": ["a:1", 2222]})})
    assert config.jobs == (ClusterJob("worker", ("a:1", "2222")),)
    assert read_config("slurm", slurm()).strategy == "MultiWorkerMirroredStrategy"
    out = read_config("slurm", slurm(SLURM_PROCID="4"))
    assert (out.task_type, out.task_index) == ("worker", None)
    three = read_config(None, {"TF_CONFIG": _task0({"worker": ["localhost:1", "a:1", "b:1", "c:1"]})})
    assert "the cluster spans hosts (a, b, c) but also names localhost" in three.problems[0].problem
    env = slurm(SLURM_PROCID="0", SLURM_STEP_NUM_TASKS="4", SLURM_STEP_NODELIST="n[8-11]", SLURM_STEP_TASKS_PER_NODE="1(x4)",
                SLURMD_NODENAME="n8")
    (p,) = read_config("slurm", env).problems
    assert p.problem.endswith(
        "it orders the nodes by name as strings (n10, n11, n8, n9), Slurm by its node list (n8, n9, n10, n11), so the tasks "
        "connect to the wrong nodes; give the nodes names of equal width, or build the cluster spec yourself"
    )


def test_the_option_without_a_cluster_says_what_to_do() -> None:
    assert read_config("auto", {}).problems[0].problem == (
        "--gpucheck-cluster found no cluster: TF_CONFIG is not set and this is not a Slurm step (SLURM_PROCID is not "
        "set); set TF_CONFIG, run under srun, or give --gpucheck-cluster=local:2 to test this machine's distributed "
        "TensorFlow on its loopback"
    )
    assert read_config("tf_config", {}).problems[0].problem == "--gpucheck-cluster=tf_config was given, but TF_CONFIG is not set"


def test_a_tf_config_that_is_not_json_quotes_it() -> None:
    text = '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}'
    (p,) = read_config(None, {"TF_CONFIG": text}).problems
    assert (p.key, p.value, p.kind) == ("TF_CONFIG", text, "fatal") and p.problem.startswith("TF_CONFIG is not valid JSON (")
