"""One diagnosis for a whole pytest-xdist run, whatever the number of workers (no pytest here).

The controller makes a folder for the run and hands its path to every worker (``workerinput``). The facts
of the one diagnosis are written there once, as JSON (never pickle): by the controller
itself for ``--gpucheck`` (it knows from the start that a diagnosis is wanted), or, for a suite that only
marks tests ``@pytest.mark.gpu``, by the first worker that sets up a marked test, under an exclusive lock
on a file of that folder (the others wait for the lock, then read). What is written is the result without
its facts (findings, layers, root cause, verdict) and the GPUs the marker reads (``gpucheck.marker.Machine``):
all a worker decides with. The controller's report carries the facts.

It also says which GPUs each worker gets with ``--gpucheck-gpus-per-worker`` (:func:`assign_gpus`).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gpucheck.blocking import LayerState
from gpucheck.diagnosis import FrameworkState, Result, incomplete
from gpucheck.isolation import ChildRunner
from gpucheck.marker import Gpu, Machine, title
from gpucheck.model import NO_ACTION, Finding, Severity
from gpucheck.probes.host import HOST_READ_TIMEOUT_S, probe_hardware_within
from gpucheck.probes.visibility import parse_cuda_visible_devices
from gpucheck.settings import Settings

SCHEMA = "gpucheck-shared/1"
#: The workerinput key that carries the run's folder.
WORKERINPUT_KEY = "gpucheck_shared"
#: The workerinput key that says who writes the facts: "controller" (--gpucheck) or "worker" (the marker).
PRODUCER_KEY = "gpucheck_producer"
#: The environment a worker given GPUs of its own is started with: the CUDA ordinals it was given (of the
#: controller's environment, comma-separated) and the CUDA_VISIBLE_DEVICES the controller had ("" unset).
WORKER_GPUS_ENV = "GPUCHECK_WORKER_GPUS"
PARENT_VISIBLE_ENV = "GPUCHECK_PARENT_CUDA_VISIBLE_DEVICES"
UNSET = "(unset)"

#: How long a worker waits for the one diagnosis beyond its own probes' time limit (TensorFlow's import
#: under load, the wait for the lock).
WAIT_MARGIN_S = 120.0
POLL_S = 0.05


class SharedError(RuntimeError):
    """The run's shared diagnosis could not be had: the sentence that says why."""


def _gpu_json(g: Gpu) -> dict[str, Any]:
    return {f.name: getattr(g, f.name) for f in fields(Gpu)}


def _finding(data: Mapping[str, Any]) -> Finding:
    return Finding(
        id=data["id"], severity=Severity(data["severity"]), layer=data["layer"], summary=data["summary"],
        cause=data["cause"], remedy=data["remedy"], evidence=dict(data.get("evidence") or {}),
        subject=data.get("subject"), action=data.get("action", NO_ACTION),
        framework=data.get("framework") if isinstance(data.get("framework"), str) else None,
    )


def document(machine: Machine, by: str) -> dict[str, Any]:
    """What the workers need of a diagnosis, as JSON: its result without the facts (the findings, the
    layers, the root cause, the verdict) and the GPUs the marker reads."""
    result = machine.result
    rc = next((i for i, f in enumerate(result.findings) if f is result.root_cause), None)
    return {
        "schema": SCHEMA,
        "by": by,
        "verdict": result.verdict,
        "complete": result.complete,
        "findings": [f.to_json() for f in result.findings],
        "root_cause": rc,
        "layers": [dataclasses.asdict(s) for s in result.layers],
        "unchecked": dict(result.unchecked),
        "gpus": list(result.gpus),
        # The facts as JSON, for the report the controller writes (a worker decides without them).
        "facts_json": result.facts_json(),
        "marker_gpus": {fw: [_gpu_json(g) for g in gpus] for fw, gpus in machine.gpus.items()},
        # Each framework's own verdict, root cause (an index into the findings) and layers, for the report.
        "frameworks": [
            {
                "name": fw.name,
                "verdict": fw.verdict,
                "root_cause": next((i for i, f in enumerate(result.findings) if f is fw.root_cause), None),
                "layers": [dataclasses.asdict(s) for s in fw.layers],
            }
            for fw in result.frameworks
        ],
    }


def _layer(s: Mapping[str, Any]) -> LayerState:
    return LayerState(s["layer"], s["state"], tuple(s["finding_ids"]), s.get("blocked_by"))


def machine_of(data: Mapping[str, Any]) -> Machine:
    """:func:`document` read back (``SharedError`` for anything else)."""
    if data.get("schema") != SCHEMA:
        raise SharedError(f"the run's shared diagnosis is not {SCHEMA}")
    try:
        findings = tuple(_finding(f) for f in data["findings"])
        rc = data["root_cause"]
        layers = tuple(_layer(s) for s in data["layers"])
        states = tuple(
            FrameworkState(
                fw["name"], fw["verdict"], findings[fw["root_cause"]] if isinstance(fw["root_cause"], int) else None,
                tuple(_layer(s) for s in fw["layers"]),
            )
            for fw in data.get("frameworks") or ()
        )
        result = Result(
            facts=None, partial_facts=dict(data.get("facts_json") or {}), findings=findings,
            root_cause=findings[rc] if isinstance(rc, int) else None, verdict=data["verdict"], layers=layers,
            complete=bool(data["complete"]), unchecked=dict(data.get("unchecked") or {}), gpus=tuple(data["gpus"]),
            frameworks=states,
        )
        gpus = {fw: tuple(Gpu(**g) for g in table) for fw, table in data["marker_gpus"].items()}
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise SharedError(f"the run's shared diagnosis cannot be read ({type(exc).__name__}: {exc})") from None
    return Machine(result, gpus)


class SharedRun:
    """The run's folder: the facts file and the lock that makes one process write it."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.facts_file = self.folder / "facts.json"
        self.lock_file = self.folder / "diagnosis.lock"

    def publish(self, machine: Machine, by: str) -> None:
        """Write ``machine`` (:func:`document`) atomically (a reader never sees half a file)."""
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".facts-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(document(machine, by), out)
            os.replace(tmp, self.facts_file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def read(self) -> Machine | None:
        try:
            text = self.facts_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            raise SharedError(f"the run's shared diagnosis ({self.facts_file}) is not JSON") from None
        return machine_of(data)

    def producer(self) -> str | None:
        """Which process wrote the facts ("controller", "gw0", ...), once they are written."""
        try:
            by = json.loads(self.facts_file.read_text(encoding="utf-8")).get("by")
        except (OSError, ValueError):
            return None
        return by if isinstance(by, str) else None

    def wait(self, timeout: float) -> Machine:
        """What the controller writes, waited for (polled) at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.read()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise SharedError(f"the run's diagnosis did not arrive within {timeout:g} s (controller gone?)")
            time.sleep(POLL_S)

    def once(self, diagnose: Callable[[], Result], by: str, timeout: float) -> Machine:
        """The run's result: read when another process wrote it, else diagnosed here and written, under the
        lock (one process diagnoses; the others wait for it, at most ``timeout`` seconds)."""
        with open(self.lock_file, "a+b") as lock:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise SharedError(f"another worker's diagnosis did not finish within {timeout:g} s") from None
                    time.sleep(POLL_S)
            try:
                found = self.read()
                if found is not None:
                    return found
                machine = Machine.of(diagnose())
                self.publish(machine, by)
                return machine
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def wait_limit(settings: Settings) -> float:
    return settings.timeout * 2 + WAIT_MARGIN_S


class Remote:
    """A diagnosis another process of the run makes (``GpucheckSession.diagnosis`` in a worker of a
    ``--gpucheck -n N`` run): the facts the controller writes, judged here."""

    def __init__(self, run: SharedRun, settings: Settings) -> None:
        self.run = run
        self.settings = settings
        self.machine: Machine | None = None
        #: No child of its own; kill_all() is the session's clean-up call.
        self.runner = ChildRunner()
        self._result: Result | None = None

    def result(self) -> Result:
        if self._result is None:
            self.machine = self.run.wait(wait_limit(self.settings))
            self._result = self.machine.result
        return self._result

    def gpus(self) -> tuple[str, ...]:
        return self.result().gpus

    def abandon(self) -> Result:
        if self._result is not None:
            return self._result
        found = self.run.read()
        return found.result if found is not None else incomplete([], [], {})

    def measure(self, env: Mapping[str, str], timeout: float) -> Result:
        raise SharedError("benchmarks run in one process: drop -n for --gpucheck-benchmarks")


# --- GPUs per worker ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    #: The CUDA_VISIBLE_DEVICES each worker is started with, in worker order.
    visible: tuple[str, ...]
    #: The CUDA ordinals (of the controller's environment) each worker gets.
    ordinals: tuple[tuple[int, ...], ...]
    #: How many GPUs there were to share; whether workers share some (too few GPUs).
    available: int
    shared: bool


def visible_entries(environ: Mapping[str, str]) -> list[str] | None:
    """The entries of CUDA_VISIBLE_DEVICES the driver honours (up to the first invalid one: empty, negative, not
    an index, GPU- or MIG- id, or repeated; ``gpucheck.probes.visibility``), None when unset."""
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [e.text for e in parse_cuda_visible_devices(value, None) if e.honoured]


def assign_gpus(entries: list[str] | None, gpu_count: int, workers: int, per_worker: int) -> Assignment:
    """Worker k gets GPUs k*N .. k*N+N-1 of those visible (CUDA ordinals, or the entries of a set
    CUDA_VISIBLE_DEVICES), wrapping round when there are fewer than workers * N."""
    names = list(entries) if entries is not None else [str(i) for i in range(gpu_count)]
    available = len(names)
    if available == 0:
        return Assignment(tuple("" for _ in range(workers)), tuple(() for _ in range(workers)), 0, False)
    ordinals = tuple(tuple((k * per_worker + j) % available for j in range(min(per_worker, available))) for k in range(workers))
    visible = tuple(",".join(names[o] for o in mine) for mine in ordinals)
    return Assignment(visible, ordinals, available, workers * per_worker > available)


def gpu_count_on_bus(settings: Settings) -> int:
    """The NVIDIA GPUs on this machine's PCI bus (a read of sysfs, no driver call): how many to share out."""
    return len(probe_hardware_within(min(HOST_READ_TIMEOUT_S, settings.timeout)).nvidia_gpus)


def worker_ordinals(environ: Mapping[str, str]) -> tuple[int, ...] | None:
    """The CUDA ordinals this worker was given (``--gpucheck-gpus-per-worker``), None when not."""
    value = environ.get(WORKER_GPUS_ENV)
    if value is None:
        return None
    try:
        return tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        return None


def cuda_too_early(initialised: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """Why this xdist worker must not hand out its GPUs, or None. ``initialised``: the frameworks that had initialised
    CUDA in this process when gpucheck's plugin was loaded (``gpucheck.frameworks.cuda_initialised`` then); ``environ``:
    the worker's environment. A worker given GPUs of its own (--gpucheck-gpus-per-worker) gets its CUDA_VISIBLE_DEVICES
    in its start-up environment, set by execnet before pytest starts there; CUDA initialised before that (a sitecustomize
    or ``.pth`` file, a plugin loaded before gpucheck's) read the variable as it was, and the framework's ``cuda:0`` may
    be another GPU than the worker's. The CUDA driver reads the variable once, at its initialisation: nothing can
    change that in the process, so the answer is an error, not a wrong GPU."""
    ordinals = worker_ordinals(environ)
    if not initialised or ordinals is None:
        return None
    who = " and ".join(title(name) for name in initialised)
    visible = environ.get("CUDA_VISIBLE_DEVICES", "")
    return (
        f"{who} had initialised CUDA in this xdist worker before gpucheck's plugin was loaded (at the interpreter's "
        f"start: a sitecustomize or .pth file, or a pytest plugin loaded before gpucheck), so it may use other GPUs than "
        f"the CUDA_VISIBLE_DEVICES={visible} that --gpucheck-gpus-per-worker gave this worker: the CUDA driver reads that "
        f"variable once, when CUDA is initialised. Initialise CUDA in a test or a fixture, not at start-up, or run "
        f"without --gpucheck-gpus-per-worker."
    )


def parent_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the run's diagnosis sees in a worker given GPUs of its own: the controller's
    CUDA_VISIBLE_DEVICES back, so that it diagnoses every GPU of the run."""
    env = dict(environ)
    parent = env.pop(PARENT_VISIBLE_ENV, None)
    if parent == UNSET:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    elif parent is not None:
        env["CUDA_VISIBLE_DEVICES"] = parent
    env.pop(WORKER_GPUS_ENV, None)
    return env
