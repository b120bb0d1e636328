"""Entry point of a probe child process: ``python -m gpucheck.probes.child MODULE:FUNCTION OUT``.

The child runs one probe (a function a unit of ``gpucheck.registry`` names), writes its facts as JSON to OUT (atomically) and
leaves with ``os._exit`` so that no library's exit-time crash can turn a
finished probe into a failed one. Before each step that can hang or crash it
announces the step on stderr (``STAGE_PREFIX`` lines), so the parent can name
the call a dead or hung child was in.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from gpucheck.protocol import DEADLINE_EXIT, DIE_WITH_PARENT_ENV, Checkpoint, load_target, stage, timeout_from_env


def _die_with_parent() -> None:
    """Ask for SIGKILL when the parent named in DIE_WITH_PARENT_ENV dies; leave if it already has."""
    parent = os.environ.get(DIE_WITH_PARENT_ENV)
    if not parent or not parent.isdigit():
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):
        os._exit(3)


def deadline_of(start: float, timeout: float) -> float:
    """When a child that started at ``start`` leaves with what it has: its timeout less a margin to write it."""
    return start + timeout - min(2.0, 0.1 * timeout)


class _Watchdog:
    """Leaves the child with DEADLINE_EXIT when the probe's deadline (its timeout less a margin) or the
    current step's budget runs out, once a first result is written: the parent then has that result
    rather than a killed child with nothing, and the last stage line names the step that overran."""

    def __init__(self, start: float) -> None:
        self.timeout = timeout_from_env()
        self.deadline = deadline_of(start, self.timeout)
        self._timer: threading.Timer | None = None

    def arm(self, budget: float | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        now = time.monotonic()
        until = self.deadline if budget is None else min(self.deadline, now + budget)
        why = (
            f"the probe stopped at its deadline ({self.timeout:g} s timeout)"
            if until == self.deadline
            else f"the step did not finish within its {budget:g} s"
        )

        def leave() -> None:
            # Not a stage: the last stage stays the step that did not finish.
            sys.stderr.write(f"gpucheck: {why}\n")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(DEADLINE_EXIT)

        self._timer = threading.Timer(max(until - now, 0.0), leave)
        self._timer.daemon = True
        self._timer.start()


def _deadline_watchdog(start: float) -> _Watchdog:
    watchdog = _Watchdog(start)
    watchdog.arm(None)
    return watchdog


def _write_atomically(path: str, data: Any) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".facts-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    from gpucheck.facts import to_json

    if len(argv) != 2:
        sys.stderr.write("usage: python -m gpucheck.probes.child MODULE:FUNCTION OUT\n")
        return 2
    target, out = argv
    probe = load_target(target)
    if probe is None:
        sys.stderr.write(f"not a probe: {target!r} (expected gpucheck.probes.<module>:<function>)\n")
        return 2
    faulthandler.enable()
    _die_with_parent()
    start = time.monotonic()
    result = probe()
    if isinstance(result, Iterator):
        # A staged probe: each result is more complete than the last, and is written as soon as it is known.
        # Once the first is written, the probe leaves at its deadline (or its step's) with what it has.
        watchdog: _Watchdog | None = None
        for partial in result:
            data, budget = (partial.data, partial.budget_s) if isinstance(partial, Checkpoint) else (partial, None)
            stage("write facts")
            _write_atomically(out, to_json(data))
            watchdog = watchdog or _Watchdog(start)
            watchdog.arm(budget)
        _reap_forked(start)
        return 0
    stage("write facts")
    _write_atomically(out, to_json(result))
    _reap_forked(start)
    return 0


def _reap_forked(start: float) -> None:
    """Wait for the probes this child forked (``gpucheck.probes.forked``), until its own deadline at the latest."""
    forked = sys.modules.get("gpucheck.probes.forked")
    if forked is not None:
        forked.wait_all(deadline_of(start, timeout_from_env()))


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
