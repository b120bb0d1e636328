"""The cluster child (``--gpucheck-cluster``): this task's port, its peers, and a real collective over gRPC.

Each node of a job runs the same ``pytest --gpucheck --gpucheck-cluster``; this child is that node's task.
In order, every step bounded by the wait (``--gpucheck-cluster-timeout``), so that a peer that never
comes is a finding, not a hang:

1. **Its own port** free to bind (else who holds it, from ``/proc``). The host part is not checked: TensorFlow's
   server listens on every interface, and behind NAT or a Kubernetes Service the others use another address.
2. **The peers** it must talk to (every task for ``MultiWorkerMirroredStrategy``; for a ps cluster, a worker
   the chief and the ps, a ps the chief and the workers): each peer's name resolved and its port connected to,
   again and again until it answers or the wait runs out (the peers start when their nodes do): DNS failure,
   refused, timeout; and each must reach this task too (its hello, to a plain listener on this task's port).
3. **TensorFlow**, only then: ``MultiWorkerMirroredStrategy`` (which starts this task's gRPC server and waits,
   holding the GIL, for every task to join its coordination service: only the parent's timeout bounds it), or
   for a cluster with a ps job the ``ParameterServerStrategy`` coordinator on the chief and a
   ``tf.distribute.Server`` on each worker and ps.
4. **The collective**: an all-reduce of known values (each replica adds ``replica id + 1``), its result
   checked, then its latency (16 bytes) and bandwidth (4 MiB; busbw as nccl-tests computes it); or the
   ps/worker smoke test: a variable on the ps, steps scheduled on the workers, an op run on each worker.
   A worker or ps of such a cluster serves until the chief has come and gone.

The collective runs on the CPU devices (``CUDA_VISIBLE_DEVICES`` is emptied for this child): it tests the
distributed runtime and the network between the tasks, not NCCL, and takes no GPU memory from the other
probes. ``local:N[+ps]`` starts N workers (a chief and a ps besides) as children of this one on
loopback ports, each running this same probe, and reports every task.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from gpucheck.cluster.collective import COLLECTIVE_STEP, CONNECT_S, RETRY_S, Collective
from gpucheck.cluster.config import (
    CLUSTER_SPEC_ENV,
    CLUSTER_WAIT_ENV,
    PROBE_TARGET,
    PSS,
    own_address,
    read_config,
    split_address,
    task_environment,
)
from gpucheck.cluster.facts import ClusterConfigFacts, ClusterFacts, ClusterJob, PeerReach, TaskFacts
from gpucheck.facts import from_json, to_json
from gpucheck.isolation import ChildRunner
from gpucheck.protocol import (
    TIMEOUT_ENV,
    Checkpoint,
    load_target,
    seconds_from_env,
    stage,
    steps_from_env,
    timeout_from_env,
)

#: The longest one DNS lookup may take.
DNS_S = 5.0
#: What a worker or ps leaves before the parent's timeout, to write its facts.
SERVE_MARGIN_S = 3.0
#: What a local:N task gets beyond the wait: TensorFlow's import and set-up.
LOCAL_MARGIN_S = 20.0


def probe_cluster() -> Iterator[Checkpoint]:
    wait = seconds_from_env(CLUSTER_WAIT_ENV, 60.0)
    config = read_config(os.environ.get(CLUSTER_SPEC_ENV) or None, os.environ)
    if config.blocking():
        yield Checkpoint(to_json(ClusterFacts("task", wait_s=wait, setup_error="the cluster configuration is invalid")))
        return
    if config.source == "local":
        yield from _local(config, wait)
        return
    collective = _collective()
    for task, budget in run_task(config, wait, collective):
        yield Checkpoint(to_json(ClusterFacts("task", (task,), wait, collective=collective is not None)), budget)


def _collective() -> Collective | None:
    """The framework's collective, where the run lists one (a framework unit's ``collective`` step of this child):
    none with --gpucheck-framework=none, where the peers are still reached (a node's network needs no framework)."""
    target = dict(steps_from_env()).get(COLLECTIVE_STEP)
    make = load_target(target) if target is not None else None
    return make() if make is not None else None


# --- one task -------------------------------------------------------------------------------------------


def _error_text(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:600]}"


def run_task(
    config: ClusterConfigFacts, wait: float, collective: Collective | None
) -> Iterator[tuple[TaskFacts, float | None]]:
    """This machine's task: its facts after each step, with the time the next step may take.

    The peers are reached before TensorFlow starts, with a plain listener on this task's port meanwhile
    (so that the peers reaching this task find it): ``MultiWorkerMirroredStrategy`` holds the GIL while it
    waits for the other tasks, so nothing of this process runs until they have all joined. A task that
    answers but never joins is therefore stopped by the parent at the child's timeout; the facts written
    before (stage "strategy") say where it stood."""
    start = time.monotonic()
    deadline = start + wait
    # The parent stops this child at its own timeout: what serves others must end before it.
    hard_deadline = start + timeout_from_env() - SERVE_MARGIN_S
    address = own_address(config) or ""
    job, index = config.task_type or "", config.task_index if config.task_index is not None else -1
    role = _role(config)
    task = TaskFacts(job, index, address, stage="own port")
    if role == "evaluator" and not address:
        # An evaluator outside the cluster: no port of its own, nothing for the others to reach.
        yield replace(task, stage="done", error="an evaluator takes no part in the collective"), None
        return
    stage("own port")
    state, err, holder, sock = check_own_port(address)
    task = replace(task, own_port=state, own_port_error=err, holder=holder)
    # No budget of its own for the peers: reaching them ends at the wait, give or take a lookup or a connect
    # in flight; the child's own deadline (the wait and the margin) bounds it.
    yield task, None
    if sock is None:
        return
    stage("peers")
    listener = _Listener(sock)
    try:
        others = _peers(config)
        # The hello names this task by its address: a peer whose cluster spec gives this task another place
        # still knows it (and the collective, not the reach, then says what is wrong).
        peers = reach_all(others, deadline, HELLO + address.encode("utf-8", "replace") + b"\n")
        # Every peer must reach this task too before TensorFlow starts here (a firewall may let connections
        # out and not in); and once it has, no peer still waits on this task's plain listener.
        if role != "evaluator" and all(p.state == "reachable" for p in peers):
            missing = listener.wait_for({a.lower() for _j, _i, a in others}, deadline)
            peers = tuple(_one_way(p, wait) if p.address.lower() in missing else p for p in peers)
    finally:
        listener.close()
    task = replace(task, peers=peers, stage="peers")
    if role == "evaluator" or collective is None or any(p.state != "reachable" for p in peers):
        if role == "evaluator":
            task = replace(task, stage="done", error="an evaluator takes no part in the collective")
        yield task, None
        return
    yield replace(task, stage="strategy"), None
    stage("strategy")
    try:
        version, strategy = collective.start(config, role, deadline)
    except Exception as exc:  # noqa: BLE001 - what the framework raised is the fact
        yield replace(task, stage="strategy", error=_error_text(exc)), None
        return
    task = task.joined(version, collective.strategy_name(role))
    yield task, None
    stage("collective")
    try:
        run = collective.work(role, strategy, config, hard_deadline)
    except Exception as exc:  # noqa: BLE001
        yield replace(task, error=_error_text(exc)), None
        return
    yield replace(task, stage="done", collective=run), None


#: What a task sends each peer it reaches, so that the peer knows it has been seen (its address, a newline).
HELLO = b"gpucheck-peer "
HELLO_MAX = 1024


class _Listener:
    """A plain listener on this task's port while the peers are reached: it records which peers reached
    this task (their hello), and closes every other connection at once, so that a peer whose TensorFlow
    has already started and connects with gRPC is refused and retries, rather than waiting on a socket
    that never answers its handshake."""

    def __init__(self, sock: socket.socket) -> None:
        self.heard: set[str] = set()
        self._stop = threading.Event()
        self._sock = sock
        sock.settimeout(0.2)
        threading.Thread(target=self._serve, name="gpucheck-cluster-listener", daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _addr = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(1.0)
                data = b""
                try:
                    while b"\n" not in data and len(data) < HELLO_MAX and data[: len(HELLO)] == HELLO[: len(data)]:
                        chunk = conn.recv(HELLO_MAX)
                        if not chunk:
                            break
                        data += chunk
                except OSError:
                    continue
            if data.startswith(HELLO) and b"\n" in data:
                self.heard.add(data[len(HELLO) :].split(b"\n", 1)[0].decode("utf-8", "replace").strip().lower())

    def wait_for(self, names: set[str], deadline: float) -> set[str]:
        """The peers that have not reached this task by ``deadline``."""
        while not names <= self.heard and time.monotonic() < deadline:
            time.sleep(0.05)
        return names - self.heard

    def close(self) -> None:
        self._stop.set()
        self._sock.close()


def _listen(port: int) -> socket.socket:
    """A socket listening on ``port`` of every interface, as gRPC's server binds it: IPv6 and IPv4 at once, or
    IPv4 alone where the machine has no IPv6. :class:`OSError` as bind raises it (EADDRINUSE: the port is taken)."""
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("::", port))
            s.listen(128)
            return s
        except OSError:
            s.close()
            raise
    except OSError as exc:
        if exc.errno not in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
            raise
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))
        s.listen(128)
    except OSError:
        s.close()
        raise
    return s


def _role(config: ClusterConfigFacts) -> str:
    if config.task_type == "evaluator":
        return "evaluator"
    if config.strategy == PSS:
        return "coordinator" if config.task_type == "chief" else "server"
    return "collective"


def _peers(config: ClusterConfigFacts) -> list[tuple[str, int, str]]:
    """The tasks this one talks to: every chief and worker for MultiWorkerMirroredStrategy; in a ps cluster
    (whose device filters keep workers apart) a worker the chief and the ps, a ps the chief and the workers,
    the chief everyone; an evaluator none (it reads checkpoints, it joins no collective)."""
    me = (config.task_type, config.task_index)
    if config.task_type == "evaluator":
        return []
    if config.strategy == PSS:
        talks = {"worker": ("chief", "ps"), "ps": ("chief", "worker")}.get(config.task_type or "", ("chief", "worker", "ps"))
    else:
        talks = ("chief", "worker")
    return [
        (job.name, i, address)
        for job in config.jobs
        if job.name in talks
        for i, address in enumerate(job.addresses)
        if (job.name, i) != me
    ]


# --- this task's address --------------------------------------------------------------------------------


def _resolve(host: str, port: int, limit: float) -> list[str] | str:
    """The addresses ``host`` resolves to, or why not (getaddrinfo has no timeout of its own: a thread)."""
    box: dict[str, Any] = {}

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            box["ips"] = list(dict.fromkeys(str(info[4][0]) for info in infos))
        except OSError as exc:
            box["error"] = f"{host} does not resolve ({exc.strerror or exc})"
        except (UnicodeError, ValueError) as exc:
            box["error"] = f"{host} is not a valid host name ({exc})"

    t = threading.Thread(target=lookup, daemon=True)
    t.start()
    t.join(max(limit, 0.1))
    if t.is_alive():
        return f"{host} did not resolve within {limit:g} s (no answer from DNS)"
    return box.get("ips") or box.get("error") or f"{host} resolves to no address"


def check_own_port(address: str) -> tuple[str, str | None, str | None, socket.socket | None]:
    """("free" | "taken" | "bad-address", why, who holds the port, and where it is free the listener this task
    keeps on it while it reaches its peers: binding it is the test)."""
    parsed = split_address(address)
    if isinstance(parsed, str):
        return "bad-address", f"this task's address {address!r} is not host:port: {parsed}", None, None
    # Only the port: TensorFlow's server listens on every interface, and the host part need not resolve here,
    # nor be one of this machine's addresses (behind NAT or a Kubernetes Service the others use another).
    port = parsed[1]
    try:
        return "free", None, None, _listen(port)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return "taken", f"port {port} of this task's address {address} cannot be bound ({exc.strerror})", None, None
    holder = port_holder(port)
    why = f"port {port} of this task's address {address} is already in use" + (f" by {holder}" if holder else "")
    return "taken", why + ": TensorFlow's gRPC server cannot listen there", holder, None


def port_holder(port: int) -> str | None:
    """The process listening on TCP ``port``, from /proc/net/tcp{,6} and the processes' descriptors."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[-1], 16) == port:
                inodes.add(cols[9])
    if not inodes:
        return None
    wanted = {f"socket:[{i}]" for i in inodes}
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    return f"pid {pid} ({_cmdline(pid)})"
            except OSError:
                continue
    return "a process this user cannot see"


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            text = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"
    return " ".join(text.split())[:160] or "?"


# --- the peers -----------------------------------------------------------------------------------------


def reach_all(peers: list[tuple[str, int, str]], deadline: float, hello: bytes = b"") -> tuple[PeerReach, ...]:
    if not peers:
        return ()
    with ThreadPoolExecutor(max_workers=min(32, len(peers))) as pool:
        return tuple(pool.map(lambda p: reach(p[0], p[1], p[2], deadline, hello), peers))


def _one_way(p: PeerReach, wait: float) -> PeerReach:
    return replace(
        p,
        state="no-inbound",
        error=f"this task reached {p.address}, but {p.job}:{p.index} never reached this task within the {wait:g} s "
        "wait: connections get out of this machine but not in (a firewall, a security group), that task "
        "was given another address for this one, or what answers there is not a task of this cluster",
    )


def reach(job: str, index: int, address: str, deadline: float, hello: bytes = b"") -> PeerReach:
    """Connect to a peer's port until it answers or ``deadline`` passes: it may not have started yet."""
    start = time.monotonic()
    parsed = split_address(address)
    if isinstance(parsed, str):
        return PeerReach(job, index, address, "bad-address", error=parsed)
    host, port = parsed
    state, error, attempts = "not tried", None, 0
    while True:
        # Resolved again each round: a pod not yet scheduled has no DNS record yet.
        ips = _resolve(host, port, min(DNS_S, max(deadline - time.monotonic(), 0.5)))
        if isinstance(ips, str):
            attempts += 1
            state, error, ips = "dns-failed", ips, []
        for ip in ips:
            attempts += 1
            left = deadline - time.monotonic()
            family = socket.AF_INET6 if ":" in ip else socket.AF_INET
            try:
                with socket.socket(family, socket.SOCK_STREAM) as s:
                    s.settimeout(max(min(CONNECT_S, left), 0.2))
                    s.connect((ip, port))
                    if hello:
                        s.sendall(hello)  # a hello that does not get through: not reached yet, tried again
                return PeerReach(job, index, address, "reachable", tuple(ips), None, time.monotonic() - start, attempts)
            except ConnectionRefusedError:
                state, error = "refused", f"{ip}:{port} refused the connection: nothing listens there"
            except TimeoutError:
                state, error = "timeout", f"{ip}:{port} did not answer (a firewall dropping the packets, or the host down)"
            except OSError as exc:
                state, error = "unreachable", f"{ip}:{port}: {exc.strerror or exc} (no route to that host)"
        if time.monotonic() + RETRY_S >= deadline:
            waited = time.monotonic() - start
            return PeerReach(job, index, address, state, tuple(ips or ()), f"{error}, for {waited:.0f} s", waited, attempts)
        time.sleep(RETRY_S)


# --- local:N --------------------------------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    """Ports the kernel hands out now (held together so that they differ, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("0.0.0.0", 0))  # as the tasks' servers will bind them
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def local_jobs(workers: int, ps: int) -> tuple[ClusterJob, ...]:
    chief = 1 if ps else 0
    ports = free_ports(chief + workers + ps)
    addr = [f"127.0.0.1:{p}" for p in ports]
    jobs = []
    if chief:
        jobs.append(ClusterJob("chief", (addr[0],)))
    jobs.append(ClusterJob("worker", tuple(addr[chief : chief + workers])))
    if ps:
        jobs.append(ClusterJob("ps", tuple(addr[chief + workers :])))
    return tuple(jobs)


def _local(config: ClusterConfigFacts, wait: float) -> Iterator[Checkpoint]:
    jobs = local_jobs(config.local_workers, config.local_ps)
    tasks = [(j.name, i, a) for j in jobs for i, a in enumerate(j.addresses)]
    pending = tuple(TaskFacts(name, i, a, stage="starting") for name, i, a in tasks)
    yield Checkpoint(to_json(ClusterFacts("local", pending, wait)), wait + LOCAL_MARGIN_S + 5.0)
    runner = ChildRunner()

    def one(task: tuple[str, int, str]) -> TaskFacts:
        name, i, address = task
        env = {
            **task_environment(jobs, name, i),
            CLUSTER_WAIT_ENV: f"{wait:g}",
            TIMEOUT_ENV: f"{wait + LOCAL_MARGIN_S:g}",
            "CUDA_VISIBLE_DEVICES": "",
        }
        exit_, data = runner.run(PROBE_TARGET, wait + LOCAL_MARGIN_S, env)
        found = data.get("tasks") if isinstance(data, dict) else None
        facts = from_json(TaskFacts, found[0]) if isinstance(found, list) and found else TaskFacts(name, i, address)
        # A task that stopped before its peers says why at the top of its facts (setup_error): keep it with the task.
        setup = data.get("setup_error") if isinstance(data, dict) else None
        detail = (*exit_.stderr_tail[-12:], *((f"set-up: {setup}",) if isinstance(setup, str) and setup else ()))
        return replace(facts, exit_status=exit_.status, exit_detail=detail)

    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        done = tuple(pool.map(one, tasks))
    yield Checkpoint(to_json(ClusterFacts("local", done, wait)))
