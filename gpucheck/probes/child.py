"""Entry point of a probe child process: ``python -m gpucheck.probes.child NAME OUT``.

The child runs one probe, writes its facts as JSON to OUT (atomically) and
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
from collections.abc import Callable, Iterator
from typing import Any

from gpucheck.protocol import DEADLINE_EXIT, DIE_WITH_PARENT_ENV, stage


def _probes() -> dict[str, Callable[[], Any]]:
    from gpucheck.probes import driver, libraries, nvml, placement

    return {
        "cuda": driver.probe_cuda_driver,
        # The ctypes load (for the loader's message) and init, then the inventory and health through nvidia-ml-py.
        "nvml": nvml.probe_nvml,
        # The framework facts, then (in the same process: one TensorFlow import per run, issue 5) the placement
        # step; it yields both in turn, so a crash in the placement step keeps the framework facts.
        "framework": placement.framework_then_placement,
        # Issue 4: the CUDA libraries TensorFlow's build needs, found as the loader would, and XLA's toolchain.
        "libraries": libraries.probe_libraries,
        # Issue 5: grandchildren of the framework child, one memory configuration each.
        "placement-memory-growth": placement.probe_memory_growth,
        "placement-memory-limit": placement.probe_memory_limit,
        "placement-cuda-malloc-async": placement.probe_cuda_malloc_async,
    }


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


def _deadline_watchdog(start: float) -> threading.Timer | None:
    try:
        timeout = float(os.environ.get("GPUCHECK_TIMEOUT", ""))
    except ValueError:
        return None
    left = start + timeout - min(2.0, 0.1 * timeout) - time.monotonic()

    def leave() -> None:
        # Not a stage: the last stage stays the step that did not finish.
        sys.stderr.write(f"gpucheck: the probe stopped at its deadline ({timeout:g} s timeout)\n")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(DEADLINE_EXIT)

    timer = threading.Timer(max(left, 0.0), leave)
    timer.daemon = True
    timer.start()
    return timer


def _write_atomically(path: str, data: Any) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".facts-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    from gpucheck.facts import to_json

    if len(argv) != 2:
        sys.stderr.write("usage: python -m gpucheck.probes.child NAME OUT\n")
        return 2
    name, out = argv
    probes = _probes()
    if name not in probes:
        sys.stderr.write(f"unknown probe {name!r}; known: {', '.join(sorted(probes))}\n")
        return 2
    faulthandler.enable()
    _die_with_parent()
    start = time.monotonic()
    result = probes[name]()
    if isinstance(result, Iterator):
        # A staged probe: each result is more complete than the last, and is written as soon as it is known.
        # Once the first is written, the probe leaves at its deadline with what it has.
        watchdog: threading.Timer | None = None
        for partial in result:
            stage("write facts")
            _write_atomically(out, to_json(partial))
            if watchdog is None:
                watchdog = _deadline_watchdog(start)
        return 0
    stage("write facts")
    _write_atomically(out, to_json(result))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
