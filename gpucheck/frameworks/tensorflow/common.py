"""What every TensorFlow step of a probe child shares: TensorFlow's output read back (``captured``), a
section that records its fault and lets the rest go on (``section``), TensorFlow's error texts, the device
creation with its "Created device" lines, and the numeric helpers of the checks against a float64
reference. Used by the steps of the one TensorFlow child (``gpucheck.frameworks.tensorflow.setup`` and the steps after
it) and by the memory probes that run TensorFlow in processes of their own (``gpucheck.frameworks.tensorflow.memory``).
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gpucheck.protocol import CAPTURE_ENV, quiet, stage

T = TypeVar("T")


def error_text(exc: BaseException) -> str:
    """``ValueError: ...``: the exception's class and message, one line."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def tf_message(exc: BaseException) -> str:
    """TensorFlow's own message for its errors (``OpError.message``), else ``str(exc)``."""
    msg = getattr(exc, "message", None)
    return str(msg) if isinstance(msg, str) and msg else str(exc)


# --- TensorFlow's own output ----------------------------------------------------------------------


class Captured:
    """The lines a :func:`captured` block read back (there once the block has closed)."""

    lines: list[str]

    def __init__(self) -> None:
        self.lines = []


#: How many captured() blocks are open in this process, and the real stderr (a file over a duplicate of
#: descriptor 2 taken by the outermost block) that faulthandler writes to meanwhile.
_capture_depth = 0
_real_stderr: Any = None


@contextlib.contextmanager
def captured() -> Iterator[Captured]:
    """File descriptors 1 and 2 (TensorFlow's C++ logs) go to a file for the block; afterwards its
    lines are handed back and, without the placement log, written to the stderr the block found (the
    real one, where the parent keeps them, or an enclosing block's file). faulthandler keeps writing to
    the real stderr meanwhile. Blocks nest; each level has its own file, so that what a level wrote
    before an inner one began is kept, and, named by the parent (CAPTURE_ENV), still there for it when
    TensorFlow aborts inside."""
    global _capture_depth, _real_stderr
    cap = Captured()
    named = os.environ.get(CAPTURE_ENV)
    tmp = open(f"{named}.{os.getpid()}.{_capture_depth}", "w+b") if named else tempfile.TemporaryFile(mode="w+b")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved_out, saved_err = os.dup(1), os.dup(2)
        if _capture_depth == 0:
            _real_stderr = os.fdopen(os.dup(2), "w", errors="replace")
            faulthandler.enable(file=_real_stderr)
        _capture_depth += 1
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield cap
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            with contextlib.suppress(Exception):
                ctypes.CDLL(None).fflush(None)
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            _capture_depth -= 1
            if _capture_depth == 0 and _real_stderr is not None:
                faulthandler.enable(file=sys.stderr)
                _real_stderr.close()
                _real_stderr = None
            tmp.seek(0)
            cap.lines = tmp.read().decode(errors="replace").splitlines()
            tmp.truncate(0)
    finally:
        tmp.close()
        if named:
            with contextlib.suppress(OSError):
                os.unlink(tmp.name)
    kept = quiet(cap.lines)
    if kept:
        sys.stderr.write("\n".join(kept) + "\n")
        sys.stderr.flush()


def section(errors: dict[str, str], name: str, fn: Callable[[], T], default: T, capture: bool = True) -> T:
    """Run one section of a TensorFlow step, announced as ``placement: <name>``; an unexpected exception
    is recorded in ``errors`` under ``name`` and ``default`` returned, so that the rest goes on.
    TensorFlow's output of the section (the placement log) is captured unless ``capture`` is off."""
    stage(f"placement: {name}")
    try:
        if not capture:
            return fn()
        with captured():
            return fn()
    except Exception as exc:  # noqa: BLE001
        errors[name] = error_text(exc)
        return default


# --- TensorFlow's devices -------------------------------------------------------------------------

_CREATED = re.compile(r"Created device \S*/device:(?P<dev>GPU:\d+) with .*?pci bus id: (?P<bus>[0-9A-Fa-f:.]+)")
_CREATED_MB = re.compile(r"Created device \S*/device:GPU:(?P<index>\d+) with (?P<mb>\d+) MB memory")


def created_devices(lines: list[str]) -> list[tuple[str, str]]:
    """TensorFlow's "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 79759 MB memory:
    -> device: 0, name: ..., pci bus id: 00000000:18:00.0, compute capability: 9.0" lines, as
    ("GPU:0", "00000000:18:00.0")."""
    return [(m.group("dev"), m.group("bus")) for m in map(_CREATED.search, lines) if m]


def created_limits(lines: list[str]) -> dict[int, int]:
    """GPU index -> the memory (MB) TensorFlow created the device with: its allocator's limit."""
    return {int(m.group("index")): int(m.group("mb")) for m in map(_CREATED_MB.search, lines) if m}


def initialise_devices(tf: Any, device_type: str | None, lines: list[str]) -> list[str]:
    """Create TensorFlow's devices (listing the logical ones does) with its output captured, for its "Created
    device" lines: they land in ``lines``, also when creation raises (where TensorFlow dies creating them,
    its last words reach the parent through the capture file, CAPTURE_ENV)."""
    cap = None
    try:
        with captured() as cap:
            return [str(d.name) for d in tf.config.list_logical_devices(device_type)]
    finally:
        # The block's lines are there once it has closed, also when the listing raised.
        if cap is not None:
            lines.extend(cap.lines)


# --- checks against a float64 reference -------------------------------------------------------------


def rel_error(np: Any, out: Any, ref: Any, scale: float | None = None) -> float:
    """max |out - ref| / max |ref| (or / ``scale``)."""
    out64 = np.asarray(out, dtype=np.float64)
    denom = scale if scale is not None else float(np.max(np.abs(ref)))
    return float(np.max(np.abs(out64 - ref)) / denom) if denom > 0 else float("inf")


def fresh(np: Any, rng: Any, shape: tuple[int, ...]) -> Any:
    """Standard-normal inputs from a fresh generator: never zeros (checked, not assumed)."""
    while True:
        arr = rng.standard_normal(shape)
        if np.all(arr != 0):
            return arr


@contextlib.contextmanager
def tf32_off(tf: Any) -> Iterator[None]:
    """TF32 off for the block (full float32 matmuls), TensorFlow's setting as it was afterwards."""
    before = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        yield
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(before)
