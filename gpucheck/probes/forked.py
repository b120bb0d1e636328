"""Probes forked from a framework's child once the framework is imported: one import for several processes.

Some questions need a process of their own: a memory setting must be made before the framework touches a GPU, and
the main child has made its own (TensorFlow's memory growth and a logical device configuration cannot be in one
process). Each such process used to import the framework again, which is most of its cost (about 2 s of CPU and
600 MB for TensorFlow). The main child now forks them right after its own import, before anything in it has called
into the driver: TensorFlow's import loads libraries but does not call ``cuInit`` (its device listing does), so the
forked process initialises CUDA for itself as a fresh one would (docs/PITFALLS.md).

In the main child (``start_from_env``, then ``wait_all`` before it leaves) each forked probe writes, in the main
child's working folder (a temporary folder of its own, ``gpucheck.isolation``), under ``forked/``:

- ``<key>.out``: its stdout and stderr (stage lines included), made before the fork: there is one where it started;
- ``<key>.json``: its facts, written as a probe child writes them;
- ``<key>.exit``: how it ended (its exit status, whether it was stopped at the main child's deadline), written by a
  thread of the main child as soon as it has reaped it. A forked process still running when the main child dies
  dies with it, without one: the parent reads that as not judged, naming how the main child died.

The parent reads them (``gpucheck.isolation``) into the outcome a child of its own would have had. A forked probe is
in the main child's process group, so a timeout kills it with the main child; and it dies with the main child
(PR_SET_PDEATHSIG). What the parent asks for, and where the files are, is ``gpucheck.protocol``'s (``Fork``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

from gpucheck.protocol import (
    CAPTURE_ENV,
    DIE_WITH_PARENT_ENV,
    FORKED_ENV,
    FORKED_FOLDER,
    Fork,
    decode_forks,
    load_target,
    stage,
)


@dataclass
class _Started:
    fork: Fork
    pid: int
    start: float
    folder: str
    #: Reaps it as soon as it ends (a fork that dies before the child that forked it is recorded, whatever the
    #: forking child does next), and writes how it ended.
    reaper: threading.Thread | None = None
    #: Set before it is stopped at the deadline.
    stopped: bool = False


#: The probes this process forked and has not reaped yet.
_STARTED: list[_Started] = []


def start_from_env() -> None:
    """Fork every probe the parent asked for (``FORKED_ENV``). Called by a framework's child right after its
    framework's import (whether it worked or not: the forked probe then says what it says without the framework)."""
    forks = decode_forks(os.environ.get(FORKED_ENV, ""))
    if not forks:
        return
    os.environ.pop(FORKED_ENV, None)
    folder = os.path.abspath(FORKED_FOLDER)  # in the child's own working folder, where it started
    os.makedirs(folder, exist_ok=True)
    for fork in forks:
        out = os.open(os.path.join(folder, f"{fork.key}.out"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        sys.stdout.flush()
        sys.stderr.flush()
        start = time.monotonic()
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns of forking a process with threads (TensorFlow's import starts one): under
                # PYTHONWARNINGS=error that warning would be raised here.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as exc:
            os.close(out)
            record = {"returncode": None, "timed_out": False, "duration_s": 0.0, "error": f"could not fork: {exc}"}
            _write_record(folder, fork.key, record)
            continue
        if pid == 0:
            _become(fork, out, folder)  # never returns
        os.close(out)
        started = _Started(fork, pid, start, folder)
        started.reaper = threading.Thread(target=_reap, args=(started,), name=f"gpucheck-reap-{fork.key}", daemon=True)
        started.reaper.start()
        _STARTED.append(started)


def wait_all(deadline: float) -> None:
    """Wait until every forked probe has ended and been recorded, stopping (SIGKILL) those still running at
    ``deadline`` (monotonic). The main child calls it before it leaves: a forked probe dies with it."""
    while _STARTED:
        started = _STARTED.pop(0)
        reaper = started.reaper
        if reaper is None:
            continue
        reaper.join(max(deadline - time.monotonic(), 0.0))
        if reaper.is_alive():
            started.stopped = True
            try:
                os.kill(started.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended meanwhile
            reaper.join()


def _reap(started: _Started) -> None:
    """In a thread of the forking child: wait for the forked process, then write how it ended."""
    returncode: int | None = None
    try:
        _pid, status = os.waitpid(started.pid, 0)
        returncode = os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        pass  # reaped by someone else (nothing here does): how it ended is not known, its files say the rest
    record = {
        "returncode": returncode,
        "timed_out": started.stopped,
        "duration_s": round(time.monotonic() - started.start, 3),
    }
    _write_record(started.folder, started.fork.key, record)


def _write_record(folder: str, key: str, record: dict[str, Any]) -> None:
    from gpucheck.probes.child import _write_atomically

    _write_atomically(os.path.join(folder, f"{key}.exit"), record)


def _become(fork: Fork, out: int, folder: str) -> None:
    """The forked process: its output to its own file, its own environment, the probe, its facts; then it leaves."""
    code = 1
    try:
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        os.environ.update(fork.env)
        # Its own capture file, and the main child is the parent it dies with.
        os.environ[CAPTURE_ENV] = os.path.join(folder, f"{fork.key}.captured")
        os.environ[DIE_WITH_PARENT_ENV] = str(os.getppid())
        from gpucheck.probes.child import _die_with_parent

        _die_with_parent()
        _STARTED.clear()  # the main child's forks are not this process's children
        probe = load_target(fork.target)
        if probe is None:
            sys.stderr.write(f"not a probe: {fork.target!r}\n")
            code = 2
            return
        result = probe()  # one facts object: a forked probe is not staged
        stage("write facts")
        _write_facts(os.path.join(folder, f"{fork.key}.json"), result)
        code = 0
    except BaseException:  # noqa: BLE001 - whatever ends it, it ends here, and its traceback is its evidence
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _write_facts(path: str, data: Any) -> None:
    from gpucheck.facts import to_json
    from gpucheck.probes.child import _write_atomically

    _write_atomically(path, to_json(data))
