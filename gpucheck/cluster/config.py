"""The cluster configuration, read the way TensorFlow's cluster resolvers read it, and validated.

Pure: a function of the ``--gpucheck-cluster`` value and the environment (``TF_CONFIG``, the Slurm
variables), so that it runs in-process at start (a set but malformed ``TF_CONFIG`` is reported on every
``--gpucheck`` run, since every TensorFlow program of the job would fail on it) and again in the cluster
child, which gets the same answer.

What TensorFlow does, and so what this mirrors (TensorFlow 2.21's sources):

- ``TFConfigClusterResolver`` (``tfconfig_cluster_resolver.py``): ``json.loads(TF_CONFIG)``; the cluster
  is ``ClusterSpec(tf_config["cluster"])`` (a job's tasks a list, or a dict from task index to address);
  ``task.type`` is ``str(...)``, ``task.index`` is ``int(...)``. No ``cluster`` key: an empty spec, which
  a strategy takes for a single machine and runs without a word.
- ``multi_worker_util._validate_cluster_spec``: jobs among chief, worker, ps, evaluator; ``task.type`` one
  of them and in the cluster (an evaluator may be outside it); at most one chief and one evaluator;
  ``task.index`` below its job's task count.
- ``ParameterServerStrategy`` (``parameter_server_strategy_v2.py``): at least one ps and one worker, and a
  coordinator (the chief); ``MultiWorkerMirroredStrategy`` does not take a ps job.
- ``SlurmClusterResolver`` (``slurm_cluster_resolver.py``): ``SLURM_PROCID`` is the rank, ``SLURM_STEP_NUM_TASKS``
  the task count, ``SLURM_STEP_NODELIST`` the nodes (``expand_hostlist``), ``SLURM_STEP_TASKS_PER_NODE`` the
  tasks on each (``expand_tasks_per_node``); the tasks are all ``worker``, on ports 8888, 8889 … of each node,
  the nodes taken in **string** order (``sorted``), so that ``n[9-10]`` gives rank 0 the address of ``n10``
  while Slurm runs rank 0 on ``n9``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gpucheck.cluster.facts import ClusterConfigFacts, ClusterJob, ConfigProblem
from gpucheck.settings import LOCAL_CLUSTER

#: The cluster child's --gpucheck-cluster value and its wait for the peers (--gpucheck-cluster-timeout).
CLUSTER_SPEC_ENV = "GPUCHECK_CLUSTER_SPEC"
CLUSTER_WAIT_ENV = "GPUCHECK_CLUSTER_WAIT"

#: The cluster child's probe (the unit's ChildProbe, and each local:N task's own child).
PROBE_TARGET = "gpucheck.cluster.probe:probe_cluster"

#: The variables this reads (recorded as facts, ``Unit.environment_keys``).
CLUSTER_ENVIRONMENT_KEYS = (
    "TF_CONFIG",
    "SLURM_PROCID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURMD_NODENAME",
)

#: The task types TensorFlow's strategies know (``multi_worker_util._validate_cluster_spec``).
TASK_TYPES = ("chief", "worker", "ps", "evaluator")
#: The most hosts a Slurm host list may expand to here (a bound, not Slurm's).
MAX_HOSTS = 100_000
#: SlurmClusterResolver's default first port on each node.
SLURM_PORT_BASE = 8888
#: How much of a value a problem quotes.
QUOTE_CHARS = 200

MWMS = "MultiWorkerMirroredStrategy"
PSS = "ParameterServerStrategy"

def local_counts(spec: str) -> tuple[int, int]:
    """Workers and parameter servers of a ``local:N[+ps]`` spec."""
    m = LOCAL_CLUSTER.match(spec)
    if not m:
        raise ValueError(f"not a local spec: {spec!r}")
    return int(m.group(1)), 1 if m.group(2) else 0


def quote(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def read_config(spec: str | None, env: Mapping[str, str | None]) -> ClusterConfigFacts:
    """The cluster this run is part of, and what is wrong with its configuration."""
    tf_config = env.get("TF_CONFIG")
    asked = spec is not None
    if spec is None:
        if tf_config is None:
            return ClusterConfigFacts(source=None, asked=False)
        return _from_tf_config(tf_config, "TF_CONFIG", asked=False)
    if spec.startswith("local:"):
        workers, ps = local_counts(spec)
        return ClusterConfigFacts(
            source="local",
            asked=True,
            text=spec,
            strategy=PSS if ps else MWMS,
            local_workers=workers,
            local_ps=ps,
        )
    if spec.startswith("{"):
        return _from_tf_config(spec, "--gpucheck-cluster", asked)
    if spec == "tf_config" or (spec == "auto" and tf_config is not None):
        if tf_config is None:
            return _nothing("TF_CONFIG", "--gpucheck-cluster=tf_config was given, but TF_CONFIG is not set")
        return _from_tf_config(tf_config, "TF_CONFIG", asked)
    if spec == "slurm" or (spec == "auto" and env.get("SLURM_PROCID") is not None):
        return _from_slurm(env)
    return _nothing(
        "--gpucheck-cluster",
        "--gpucheck-cluster found no cluster: TF_CONFIG is not set and this is not a Slurm step (SLURM_PROCID "
        "is not set); set TF_CONFIG, run under srun, or give --gpucheck-cluster=local:2 to test this "
        "machine's distributed TensorFlow on its loopback",
    )


def _nothing(key: str, problem: str) -> ClusterConfigFacts:
    return ClusterConfigFacts(source=key, asked=True, problems=(ConfigProblem(key, None, problem),))


# --- TF_CONFIG ----------------------------------------------------------------------------------------


#: Linux's MAX_ARG_STRLEN (32 pages): the most bytes of a single string of a program's arguments or environment,
#: its closing NUL counted, so ``TF_CONFIG=...`` must be shorter (execve fails with E2BIG at this length: checked).
MAX_ENV_STRING = 32 * 4096


def _from_tf_config(text: str, source: str, asked: bool) -> ClusterConfigFacts:
    where = "TF_CONFIG" if source == "TF_CONFIG" else "--gpucheck-cluster"
    problems: list[ConfigProblem] = []

    def bad(key: str, value: Any, problem: str, kind: str = "fatal") -> None:
        problems.append(ConfigProblem(f"{where} {key}".strip(), None if value is None else quote(value), problem, kind))

    base = ClusterConfigFacts(source=source, asked=asked, text=quote(text))
    size = len(f"TF_CONFIG={text}".encode(errors="surrogateescape"))
    if size >= MAX_ENV_STRING:
        bad("", f"{text[:60]}…", f"{where} is {size:,} bytes: Linux starts no program with an environment string "
            f"of {MAX_ENV_STRING:,} bytes or more (MAX_ARG_STRLEN, its closing NUL counted), so no TensorFlow "
            "process can be given it as TF_CONFIG; "
            "keep the cluster's addresses alone in it")
        return replace(base, problems=tuple(problems))
    if not text.strip():
        bad("", text, f"{where} is set but empty: TensorFlow's json.loads fails on it; unset it or give the cluster")
        return replace(base, problems=tuple(problems))
    try:
        doc = json.loads(text)
    except ValueError as exc:
        bad("", text, f"{where} is not valid JSON ({exc}): TensorFlow's json.loads fails on it, in every process")
        return replace(base, problems=tuple(problems))
    except RecursionError:
        bad("", text, f"{where} is nested too deep for Python's json.loads: TensorFlow fails on it, in every process")
        return replace(base, problems=tuple(problems))
    if not isinstance(doc, dict):
        bad("", text, f"{where} must be a JSON object with 'cluster' and 'task', not a {type(doc).__name__}")
        return replace(base, problems=tuple(problems))
    if not doc:
        bad("", text, f"{where} is {{}}: TensorFlow then runs every process as a single machine", "silent")
        return replace(base, problems=tuple(problems))
    jobs = _jobs(doc.get("cluster"), bad) if "cluster" in doc else None
    if jobs is None and "cluster" not in doc:
        bad(
            "cluster",
            None,
            f"{where} has no 'cluster': TensorFlow then sees an empty cluster and runs every process as a "
            "single machine on its own, without a word",
            "silent",
        )
    task_type, task_index = _task(doc.get("task"), "task" in doc, bad)
    jobs = jobs or ()
    _roles(jobs, task_type, task_index, bad)
    _addresses(jobs, bad)
    strategy = PSS if any(j.name == "ps" for j in jobs) else MWMS
    return ClusterConfigFacts(
        source=source,
        asked=asked,
        text=quote(text),
        jobs=jobs,
        task_type=task_type,
        task_index=task_index,
        strategy=strategy,
        problems=tuple(problems),
    )


def _jobs(cluster: Any, bad: Any) -> tuple[ClusterJob, ...] | None:
    if not isinstance(cluster, dict):
        bad("cluster", cluster, "'cluster' must map job names to lists of host:port addresses")
        return None
    if not cluster:
        bad("cluster", cluster, "'cluster' is empty: TensorFlow runs every process as a single machine", "silent")
        return None
    jobs = []
    for name, tasks in cluster.items():
        if isinstance(tasks, (list, tuple)):
            addresses = list(tasks)
        elif isinstance(tasks, dict):
            keys = {_integer(i): a for i, a in tasks.items()}
            if None in keys:
                bad(f"cluster.{name}", tasks, f"the tasks of job {name!r} are keyed by something other than task indices")
                continue
            by_index = {int(i): a for i, a in keys.items() if i is not None}
            if sorted(by_index) != list(range(len(by_index))):
                bad(
                    f"cluster.{name}",
                    tasks,
                    f"the task indices of job {name!r} are {sorted(by_index)}, not 0 to {len(by_index) - 1}: "
                    "the strategies count tasks, so an index is missing",
                )
            addresses = [by_index[i] for i in sorted(by_index)]
        else:
            bad(f"cluster.{name}", tasks, f"the tasks for job {name!r} must be a list of host:port addresses")
            continue
        if not addresses:
            bad(f"cluster.{name}", tasks, f"job {name!r} has no task")
        for i, a in enumerate(addresses):
            if not isinstance(a, str):
                bad(f"cluster.{name}[{i}]", a, f"a task address must be a \"host:port\" string, not {type(a).__name__}")
        jobs.append(ClusterJob(str(name), tuple(a if isinstance(a, str) else json.dumps(a) for a in addresses)))
    return tuple(jobs)


def _integer(raw: Any) -> int | None:
    """``int(raw)`` as TensorFlow takes it, or None where that raises (JSON's Infinity and 1e400 too)."""
    try:
        return int(raw)
    except (TypeError, ValueError, OverflowError):
        return None


def _task(task: Any, present: bool, bad: Any) -> tuple[str | None, int | None]:
    if not present:
        bad("task", None, "there is no 'task': this process does not know which task of the cluster it is", "silent")
        return None, None
    if not isinstance(task, dict):
        bad("task", task, "'task' must be an object with 'type' and 'index'")
        return None, None
    task_type = str(task["type"]) if "type" in task else None
    if task_type is None:
        bad("task.type", None, "'task' has no 'type' (chief, worker, ps or evaluator)")
    index: int | None = None
    if "index" not in task:
        bad("task.index", None, "'task' has no 'index': TensorFlow then has no task id for this process")
    else:
        raw = task["index"]
        index = _integer(raw)  # as TensorFlow does: "1" is taken, 1.5 becomes 1
        if index is None:
            bad("task.index", raw, "'task.index' is not a number: TensorFlow's int() fails on it")
        else:
            if isinstance(raw, float) and not raw.is_integer():
                bad("task.index", raw, f"'task.index' is {raw}, which TensorFlow truncates to {index}", "silent")
            if index < 0:
                bad("task.index", raw, "'task.index' is negative")
                index = None
    return task_type, index


def _roles(jobs: tuple[ClusterJob, ...], task_type: str | None, index: int | None, bad: Any) -> None:
    names = [j.name for j in jobs]
    for name in names:
        if name not in TASK_TYPES:
            bad(
                f"cluster.{name}",
                name,
                f"job {name!r} is not a task type TensorFlow's strategies know ({', '.join(TASK_TYPES)})",
            )
    counts = {j.name: len(j.addresses) for j in jobs}
    for single in ("chief", "evaluator"):
        if counts.get(single, 0) > 1:
            bad(f"cluster.{single}", counts[single], f"there must be at most one {single} task, not {counts[single]}")
    if task_type is not None:
        if task_type not in TASK_TYPES:
            bad("task.type", task_type, f"'task.type' must be one of {', '.join(TASK_TYPES)}")
        elif jobs and task_type not in counts and task_type != "evaluator":
            bad("task.type", task_type, f"the cluster has no {task_type!r} job (it has {', '.join(names)})")
        elif index is not None and task_type in counts and index >= counts[task_type]:
            bad(
                "task.index",
                index,
                f"task.index {index} is out of range: job {task_type!r} has {counts[task_type]} task"
                f"{'s' if counts[task_type] != 1 else ''} (indices 0 to {counts[task_type] - 1})",
            )
    # Without a chief job, ParameterServerStrategy's coordinator joins as a local chief of its own
    # (remote.connect_to_cluster): a cluster of workers and ps alone is valid.
    if "ps" in counts and "worker" not in counts:
        bad("cluster", None, f"a ps job needs {PSS}, which needs at least one worker: the cluster has none")


def split_address(address: str) -> tuple[str, int] | str:
    """``(host, port)`` of ``host:port`` or ``[v6]:port``, or the reason it is not one."""
    if address.startswith("["):
        host, sep, rest = address[1:].partition("]")
        if not sep or not rest.startswith(":"):
            return "an IPv6 address must be written [address]:port"
        port_text = rest[1:]
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep:
            return "it has no port (host:port)"
        if ":" in host:
            return "an IPv6 address must be written [address]:port"
    if not host:
        return "it has no host"
    try:
        host.encode("idna")  # an empty label (a..b), a label over 63 characters: no name server takes it
    except UnicodeError:
        return f"{host!r} is not a valid host name"
    if not (port_text.isascii() and port_text.isdigit()) or len(port_text) > 5:
        return f"the port {port_text!r} is not a port number"
    port = int(port_text)
    if not 1 <= port <= 65535:
        return f"the port {port} is out of range (1 to 65535)"
    return host, port


def is_loopback(host: str) -> bool:
    h = host.lower()
    return h == "localhost" or h.startswith("127.") or h in ("::1", "0:0:0:0:0:0:0:1")


def _addresses(jobs: tuple[ClusterJob, ...], bad: Any) -> None:
    seen: dict[str, str] = {}
    hosts: list[str] = []
    for job in jobs:
        for i, address in enumerate(job.addresses):
            where = f"cluster.{job.name}[{i}]"
            parsed = split_address(address)
            if isinstance(parsed, str):
                bad(where, address, f"the address {address!r} is not host:port: {parsed}")
                continue
            host, port = parsed
            hosts.append(host)
            key = f"{host.lower()}:{port}"
            if key in seen:
                bad(
                    where,
                    address,
                    f"{address} is also {seen[key]}: two tasks cannot listen on one address (the second "
                    "server fails to bind, or both jobs' requests reach one task)",
                )
            else:
                seen[key] = where
    loop = sorted({h for h in hosts if is_loopback(h)})
    other = sorted({h for h in hosts if not is_loopback(h)})
    if loop and other:
        bad(
            "cluster",
            ", ".join(loop),
            f"the cluster spans hosts ({', '.join(other[:3])}{' …' if len(other) > 3 else ''}) but also names "
            f"{', '.join(loop)}: on each host that means the host itself, so the other hosts cannot reach that task",
        )


# --- Slurm --------------------------------------------------------------------------------------------


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list (``n[1-2],m5``) as TensorFlow's ``expand_hostlist`` expands it
    (zero-padded to the width of the range's first number)."""
    parts: list[str] = []
    depth, cur = False, ""
    for c in hostlist:
        if depth:
            if c == "[":
                raise ValueError("a '[' inside a range")
            if c == "]":
                depth = False
        elif c == "[":
            depth = True
        elif c == ",":
            if not cur:
                raise ValueError("an empty host name")
            parts.append(cur)
            cur = ""
            continue
        cur += c
    if cur:
        parts.append(cur)
    hosts: list[str] = []
    for part in parts:
        m = re.match(r"([^,[\]]*)(\[([^\]]+)\])?$", part)
        if m is None:
            raise ValueError(f"invalid part {part!r}")
        prefix = m.group(1) or ""
        if m.group(3) is None:
            hosts.append(prefix)
            continue
        for rng in m.group(3).split(","):
            bounds = rng.split("-")
            if len(bounds) == 1:
                bounds = bounds * 2
            if len(bounds) != 2 or not all(b.isascii() and b.isdigit() and len(b) < 10 for b in bounds):
                raise ValueError(f"invalid range {rng!r}")
            width = len(bounds[0])
            if int(bounds[1]) - int(bounds[0]) + len(hosts) > MAX_HOSTS:
                raise ValueError(f"more than {MAX_HOSTS} hosts")
            hosts.extend(prefix + str(i).zfill(width) for i in range(int(bounds[0]), int(bounds[1]) + 1))
    return hosts


def expand_tasks_per_node(text: str) -> list[int]:
    """``3(x2),2,1`` → ``[3, 3, 2, 1]``, as TensorFlow's ``expand_tasks_per_node``."""
    out: list[int] = []
    for part in text.split(","):
        m = re.match(r"([0-9]{1,6})(\(x([0-9]{1,6})\))?$", part)
        if m is None:
            raise ValueError(f"invalid part {part!r}")
        out.extend([int(m.group(1))] * int(m.group(3) or 1))
        if len(out) > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} nodes")
    return out


def _from_slurm(env: Mapping[str, str | None]) -> ClusterConfigFacts:
    problems: list[ConfigProblem] = []

    def bad(key: str, value: Any, problem: str, kind: str = "fatal") -> None:
        problems.append(ConfigProblem(key, None if value is None else quote(value), problem, kind))

    def var(name: str) -> str | None:
        value = env.get(name)
        if value is None:
            bad(
                name,
                None,
                f"{name} is not set: SlurmClusterResolver raises \"{name} not found in environment. Not running "
                "inside a SLURM step?\" (run the job's tasks with srun)",
            )
        return value

    rank_text, count_text = var("SLURM_PROCID"), var("SLURM_STEP_NUM_TASKS")
    nodelist, per_node_text = var("SLURM_STEP_NODELIST"), var("SLURM_STEP_TASKS_PER_NODE")
    node = env.get("SLURMD_NODENAME")
    text = " ".join(f"{k}={env.get(k)}" for k in CLUSTER_ENVIRONMENT_KEYS[1:] if env.get(k) is not None)
    base = ClusterConfigFacts(source="slurm", asked=True, text=quote(text), node=node)

    def number(name: str, value: str | None) -> int | None:
        if value is None:
            return None
        number = _integer(value)
        if number is None:
            bad(name, value, f"{name} is not a number: SlurmClusterResolver's int() fails on it")
        return number

    rank, count = number("SLURM_PROCID", rank_text), number("SLURM_STEP_NUM_TASKS", count_text)
    hosts: list[str] | None = None
    per_node: list[int] | None = None
    if nodelist is not None:
        try:
            hosts = expand_hostlist(nodelist)
        except ValueError as exc:
            bad("SLURM_STEP_NODELIST", nodelist, f"SLURM_STEP_NODELIST is not a Slurm host list: {exc}")
    if per_node_text is not None:
        try:
            per_node = expand_tasks_per_node(per_node_text)
        except ValueError as exc:
            bad("SLURM_STEP_TASKS_PER_NODE", per_node_text, f"SLURM_STEP_TASKS_PER_NODE is not a tasks-per-node list: {exc}")
    if problems or hosts is None or per_node is None or rank is None or count is None:
        return replace(base, problems=tuple(problems))
    if len(hosts) != len(per_node):
        bad(
            "SLURM_STEP_TASKS_PER_NODE",
            per_node_text,
            f"SLURM_STEP_TASKS_PER_NODE lists {len(per_node)} nodes but SLURM_STEP_NODELIST {len(hosts)}: "
            "SlurmClusterResolver pairs them and drops the rest",
        )
    config = dict(zip(hosts, per_node, strict=False))  # as TensorFlow pairs them
    assigned = sum(config.values())
    if assigned != count:
        bad(
            "SLURM_STEP_NUM_TASKS",
            count_text,
            f"SLURM_STEP_NUM_TASKS is {count} but the nodes are assigned {assigned} tasks "
            f"(SLURM_STEP_TASKS_PER_NODE={per_node_text} over {len(hosts)} nodes): SlurmClusterResolver raises "
            f"\"Requested {count} tasks but only {assigned} were assigned\"",
        )
    visible = env.get("CUDA_VISIBLE_DEVICES")
    busiest = max(config.values(), default=0)
    if visible is not None and busiest and len(visible.split(",")) // busiest == 0:
        bad(
            "CUDA_VISIBLE_DEVICES",
            visible,
            f"SlurmClusterResolver() with its defaults counts {len(visible.split(','))} GPU(s) on this node "
            f"(CUDA_VISIBLE_DEVICES) for {busiest} tasks: 0 GPUs per task, and its cluster_spec() raises "
            "\"ValueError: range() arg 3 must not be zero\"; a program that uses it must pass gpus_per_node and "
            "gpus_per_task (or build the cluster spec itself)",
            "note",
        )
    addresses: list[str] = []
    owners: list[str] = []
    for host, n in sorted(config.items()):  # TensorFlow's order: host names as strings
        for offset in range(n):
            addresses.append(f"{host}:{SLURM_PORT_BASE + offset}")
            owners.append(host)
    if not 0 <= rank < len(addresses):
        bad("SLURM_PROCID", rank_text, f"SLURM_PROCID {rank} is out of range for {len(addresses)} tasks")
        rank_ok = False
    else:
        rank_ok = True
    if rank_ok and node is not None and owners[rank] != node:
        slurm_order = [h for h in hosts for _ in range(config.get(h, 0))]
        bad(
            "SLURM_STEP_NODELIST",
            nodelist,
            f"SlurmClusterResolver gives rank {rank} the address {addresses[rank]}, but Slurm runs it on {node}: "
            "it orders the nodes by name as strings ("
            + ", ".join(sorted(config)[:4])
            + f"{' …' if len(config) > 4 else ''}), Slurm by its node list ("
            + ", ".join(dict.fromkeys(slurm_order[:4]))
            + "), so the tasks connect to the wrong nodes; give the nodes names of equal width, or build the "
            "cluster spec yourself",
        )
    return replace(
        base,
        jobs=(ClusterJob("worker", tuple(addresses)),),
        task_type="worker",
        task_index=rank if rank_ok else None,
        strategy=MWMS,
        problems=tuple(problems),
    )


def own_address(config: ClusterConfigFacts) -> str | None:
    """This task's address in the cluster, when the configuration names one."""
    if config.task_type is None or config.task_index is None:
        return None
    job = next((j for j in config.jobs if j.name == config.task_type), None)
    if job is None or not 0 <= config.task_index < len(job.addresses):
        return None
    return job.addresses[config.task_index]


def task_environment(jobs: tuple[ClusterJob, ...], task_type: str, index: int) -> dict[str, str]:
    """The variables that tell a ``local:N`` task's cluster child its place in ``jobs`` (a TF_CONFIG, read as such)."""
    return {"TF_CONFIG": tf_config_for(jobs, task_type, index), CLUSTER_SPEC_ENV: "tf_config"}


def tf_config_for(jobs: tuple[ClusterJob, ...], task_type: str, index: int) -> str:
    """The TF_CONFIG of one task of ``jobs`` (the ``local:N`` tasks, a Slurm task's own view)."""
    return json.dumps({"cluster": {j.name: list(j.addresses) for j in jobs}, "task": {"type": task_type, "index": index}})
