"""Run a probe in a fresh child process with a timeout; the way it ends is a fact.

The child is a new interpreter (``subprocess`` with exec, never a fork of this
process), in a session (process group) of its own, so on timeout or interrupt
the whole group is killed: no grandchild survives. Its JSON facts come through
a file, its stdout and stderr through one pipe whose tail is kept as evidence.
A framework's child may fork probes of its own once its framework is imported
(``gpucheck.probes.forked``); ``run_forking`` reads their outcomes from its folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import gpucheck
from gpucheck.facts import ChildExit
from gpucheck.protocol import CAPTURE_ENV, DIE_WITH_PARENT_ENV, FORKED_FOLDER, STAGE_PREFIX, quiet

#: How a probe child starts: gpucheck imported from where this process has it (its folder on the path for
#: that one import only), then the probe module run as ``__main__``. The child runs in its own temporary folder,
#: so nothing in the user's working directory (a script named ``gpucheck.py`` or ``tensorflow.py``) shadows
#: a package; the rest of the path (PYTHONPATH, site-packages: where a module system puts TensorFlow) is as the
#: user has it. TMPDIR is that folder too: what TensorFlow leaves there (AutoGraph's generated sources, which
#: it removes only at a normal interpreter exit, and probes end with os._exit) goes with it.
_BOOTSTRAP = (
    "import sys; r = sys.argv.pop(1); sys.path.insert(0, r); import gpucheck; sys.path.remove(r); "
    "import runpy; runpy.run_module('gpucheck.probes.child', run_name='__main__', alter_sys=True)"
)

R = TypeVar("R")

TAIL_LINES = 80
#: How long a killed child may take to be reaped before the runner stops waiting for it.
REAP_TIMEOUT_S = 5.0
TAIL_CHARS = 400


#: The folder gpucheck is imported from here (its parent: site-packages, or a checkout).
GPUCHECK_ROOT = str(Path(gpucheck.__file__).resolve().parent.parent)


class ChildRunner:
    """Starts probe children and can kill every one still running (on interrupt)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen[bytes]] = set()
        self._closed = False

    def run(
        self, probe: str, timeout: float, env: Mapping[str, str] | None = None
    ) -> tuple[ChildExit, dict[str, Any] | None]:
        exit_, data, _forked = self.run_forking(probe, timeout, env)
        return exit_, data

    def run_forking(
        self, probe: str, timeout: float, env: Mapping[str, str] | None = None, forked: Sequence[str] = ()
    ) -> tuple[ChildExit, dict[str, Any] | None, dict[str, tuple[ChildExit, dict[str, Any] | None]]]:
        """``run``, and the outcomes of the probes the child forked (``gpucheck.probes.forked``: ``env`` asks for
        them), by key."""
        child_env = dict(os.environ)
        # The child asks the kernel for SIGKILL when the thread that starts it ends (PR_SET_PDEATHSIG): no
        # probe outlives this process, however it ends.
        child_env[DIE_WITH_PARENT_ENV] = str(os.getpid())
        child_env.update(env or {})
        with tempfile.TemporaryDirectory(prefix="gpucheck-probe-") as tmp:
            exit_, data = self._run_in(Path(tmp), probe, timeout, child_env)
            return exit_, data, {key: _read_forked(Path(tmp) / FORKED_FOLDER, key, exit_) for key in forked}

    def _run_in(
        self, folder: Path, probe: str, timeout: float, child_env: dict[str, str]
    ) -> tuple[ChildExit, dict[str, Any] | None]:
        tmp = str(folder)
        out = Path(tmp) / "facts.json"
        child_env[CAPTURE_ENV] = str(Path(tmp) / "captured")
        child_env["TMPDIR"] = tmp
        cmd = [sys.executable, "-c", _BOOTSTRAP, GPUCHECK_ROOT, probe, str(out)]
        start = time.monotonic()
        try:
            with self._lock:
                if self._closed:
                    return _exit("cancelled", None, start, [], "the run was interrupted before the probe started"), None
                proc = subprocess.Popen(
                    cmd,
                    cwd=tmp,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=child_env,
                    start_new_session=True,
                )
                self._live.add(proc)
        except OSError as exc:
            return _exit("error", None, start, [], f"could not start {cmd[0]}: {exc}"), None
        try:
            try:
                output, _ = proc.communicate(timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc)
                try:
                    output, _ = proc.communicate(timeout=REAP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    # Stuck in the kernel (a wedged GPU's driver call): SIGKILL waits until it returns.
                    # Leave it to the kernel rather than hang the run with it.
                    output = b""
                    for pipe in (proc.stdout, proc.stderr):
                        if pipe is not None:
                            pipe.close()
        finally:
            with self._lock:
                self._live.discard(proc)
        lines = output.decode(errors="replace").splitlines() + _left_in_capture(Path(tmp))
        with self._lock:
            cancelled = self._closed
        if cancelled and proc.returncode == -signal.SIGKILL:
            # gpucheck itself killed it (the run was interrupted): neither a crash nor a result.
            return _exit("cancelled", proc.returncode, start, lines, "stopped by gpucheck: the run was interrupted"), None
        if timed_out:
            # What a staged child wrote before it hung stands (the framework facts of a TensorFlow child
            # that then hung in a C call its own watchdog could not interrupt).
            data, _err = _read_facts(out)
            return _exit("timeout", proc.returncode, start, lines, f"no answer within {timeout:g} s"), data
        data, err = _read_facts(out)
        if data is not None:
            return _exit("ok", proc.returncode, start, lines, None), data
        if proc.returncode is not None and proc.returncode < 0:
            return _exit("crashed", proc.returncode, start, lines, None), None
        return _exit("crashed", proc.returncode, start, lines, err), None

    def kill_all(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._live)
        for proc in live:
            kill_group(proc)


def _read_forked(folder: Path, key: str, host: ChildExit) -> tuple[ChildExit, dict[str, Any] | None]:
    """The outcome of the probe ``key`` the child forked (``gpucheck.probes.forked``), from its files in ``folder``, as a
    child of its own would have had it. ``host``: how the child that forked it ended (a probe never forked, or still
    running when that child ended, ends as it did)."""
    out = folder / f"{key}.out"
    if not out.exists():
        # The child ended before its framework's import returned: a process of its own would have ended there too.
        why = "its process was to be forked from the framework's child once the framework was imported, and that child ended first"
        return replace(host, status=_not_ok(host.status), error=why), None
    try:
        lines = out.read_bytes().decode(errors="replace").splitlines()
    except OSError:
        lines = []
    lines += _captured(sorted(folder.glob(f"{key}.captured.*")))
    data, _err = _read_facts(folder / f"{key}.json")
    record, _err = _read_facts(folder / f"{key}.exit")
    if record is None:
        # Still running when the child that forked it ended: it died with it (PR_SET_PDEATHSIG) or was killed with its
        # group, before it could end by itself. It did not get to its answer: not judged, as a child gpucheck stopped.
        status = "timeout" if host.status == "timeout" else "cancelled"
        why = f"its process ended with the framework's child it was forked from, which {_how(host)}"
        return ended(status, None, host.duration_s, lines, why), data
    if isinstance(record.get("error"), str):
        # It could not be forked (the child said why): not started, as a child that could not be started.
        return ended("error", None, 0.0, lines, record["error"]), None
    returncode = record.get("returncode")
    returncode = returncode if isinstance(returncode, int) else None
    duration = record.get("duration_s")
    duration_s = float(duration) if isinstance(duration, (int, float)) else host.duration_s
    if record.get("timed_out") is True:
        why = "stopped at the deadline of the framework's child it was forked from"
        return ended("timeout", returncode, duration_s, lines, why), data
    if data is not None:
        return ended("ok", returncode, duration_s, lines, None), data
    killed = returncode is not None and returncode < 0
    return ended("crashed", returncode, duration_s, lines, None if killed else "the probe ended without writing its facts"), None


def _not_ok(status: str) -> str:
    return status if status != "ok" else "crashed"


def _how(host: ChildExit) -> str:
    if host.status == "timeout":
        return "did not finish in time"
    if host.signal or host.returncode:
        return f"died ({host.signal or f'exit code {host.returncode}'}) in {host.last_stage or 'start-up'}"
    return "ended first" if host.status == "ok" else f"ended ({host.status})"


def _left_in_capture(directory: Path) -> list[str]:
    """What a child was capturing when it died (see CAPTURE_ENV): its last output, without the
    placement log. Empty when every capture ended normally."""
    return _captured(sorted(directory.glob("captured.*")))


def _captured(paths: Iterable[Path]) -> list[str]:
    lines: list[str] = []
    for path in paths:
        try:
            lines += quiet(path.read_bytes().decode(errors="replace").splitlines())
        except OSError:
            continue
    return lines


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to a child started in a session of its own (``start_new_session``) and everything in its process
    group. Nothing left to kill (ESRCH), or nothing that may be killed (EPERM: killpg fails only where no process
    of the group could be signalled), is not an error."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_facts(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, "the probe ended without writing its facts"
    except OSError as exc:
        return None, f"could not read the probe's facts: {exc}"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"the probe wrote facts that are not JSON: {exc}"
    if not isinstance(data, dict):
        return None, "the probe wrote facts that are not a JSON object"
    return data, None


def signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _exit(status: str, returncode: int | None, start: float, lines: list[str], error: str | None) -> ChildExit:
    return ended(status, returncode, round(time.monotonic() - start, 3), lines, error)


def ended(status: str, returncode: int | None, duration_s: float, lines: list[str], error: str | None) -> ChildExit:
    """How a probe's process ended, from its output's ``lines`` (its stage lines name the last step; the rest, cut to
    their tail, are the evidence)."""
    stages = [ln[len(STAGE_PREFIX) :] for ln in lines if ln.startswith(STAGE_PREFIX)]
    tail = [ln[:TAIL_CHARS] for ln in lines if not ln.startswith(STAGE_PREFIX)][-TAIL_LINES:]
    return ChildExit(
        status=status,
        returncode=returncode,
        signal=signal_name(returncode),
        duration_s=duration_s,
        stderr_tail=tuple(tail),
        last_stage=stages[-1] if stages else None,
        error=error,
    )


def in_daemon_thread(fn: Callable[..., R], *args: Any) -> Future[R]:
    """``fn(*args)`` in a daemon thread of its own. Not a ThreadPoolExecutor: the interpreter joins its
    workers at exit, so a run ending in a way that skips the kill (an interrupt at an unlucky moment)
    would wait for hung probe children until their timeout. Children die with the thread that started
    them (PR_SET_PDEATHSIG, see probes.child), so none outlives this process either way. A call stuck in the
    kernel (a read of a wedged driver's file) cannot be interrupted; in a daemon thread the run goes on without it."""
    future: Future[R] = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the result
            future.set_exception(exc)

    threading.Thread(target=target, name=f"gpucheck-probe-{args[0] if args else ''}", daemon=True).start()
    return future


class Interrupts:
    """How a run answers signals, from its creation to :meth:`restore`. The first SIGTERM (CI cancelling a job, a
    prolog's timeout, a pod deleted), SIGHUP where nothing else handles it (a closed terminal or ssh session), or
    Ctrl-C where Python's own handler has it (not a handler of the user's,
    nor a background job's SIG_IGN), raises ``KeyboardInterrupt(prefix + its name)``: the run ends as at Ctrl-C,
    its children killed, a report written. Every later signal is ignored to the end of the process: the clean-up
    is bounded in time, and one more SIGTERM must not turn its exit 2 into a traceback or death by signal.
    Off the main thread it does nothing."""

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._previous: list[tuple[int, Any]] = []
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous.append((signal.SIGTERM, signal.signal(signal.SIGTERM, self._interrupt)))
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous.append((signal.SIGINT, signal.signal(signal.SIGINT, self._interrupt)))
        if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
            # The terminal or the ssh session went away: the same end as SIGTERM's, not death with a stale report
            # (under nohup it stays ignored).
            self._previous.append((signal.SIGHUP, signal.signal(signal.SIGHUP, self._interrupt)))

    def _interrupt(self, signum: int, frame: Any) -> None:
        ignore_interrupts()
        raise KeyboardInterrupt(f"{self._prefix}{signal.Signals(signum).name}")

    def restore(self) -> None:
        """The handlers as they were, unless a signal came (they then stay ignored)."""
        if not self._previous or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
            return
        for sig, handler in self._previous:
            signal.signal(sig, handler)
        self._previous = []


def ignore_interrupts() -> None:
    """SIGTERM, SIGINT and SIGHUP ignored from now on (the run is ending after an interrupt)."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
