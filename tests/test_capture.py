"""What TensorFlow writes while a probe reads its output back (``tfcommon.captured``) reaches the
parent's evidence, also when the process aborts inside a block, nested blocks included.

The child here is a real interpreter that writes through file descriptor 2 (as TensorFlow's C++
logging does) and really aborts; the parent side is the code ChildRunner uses on the capture directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from gpucheck.isolation import _left_in_capture
from gpucheck.protocol import CAPTURE_ENV

CHILD = textwrap.dedent(
    """
    import os, sys
    from gpucheck.frameworks.tensorflow.common import captured

    def say(text):
        os.write(2, (text + "\\n").encode())

    with captured() as outer:
        say("I0000 outer before")
        with captured() as inner:
            say("I0000 inner")
            say("placer.cc:123] the placement log, left out")
        say("I0000 outer after " + repr(inner.lines))
        if sys.argv[1] == "abort-inner":
            with captured():
                say("F0000 gpu_device.cc:219] Check failed: err == cudaSuccess (302 vs. 0)")
                os.abort()
    say("done " + repr(outer.lines))
    """
)


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env = {**os.environ, CAPTURE_ENV: str(tmp_path / "captured")}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True, timeout=60
    )
    return proc, _left_in_capture(tmp_path)


def test_nested_blocks_keep_every_line_in_order(tmp_path: Path) -> None:
    proc, left = _run(tmp_path, "normal")
    assert proc.returncode == 0, proc.stderr
    done = next(ln for ln in proc.stderr.splitlines() if ln.startswith("done "))
    # The outer block saw its own lines before and after the inner one, and the inner block's kept line,
    # without NUL padding; the placement log stays out of what is passed on.
    assert "'I0000 outer before'" in done and "'I0000 inner'" in done
    assert "\\x00" not in done
    assert "placer.cc" not in done.split("outer after")[0]
    assert left == [], "a block that ended normally leaves no file behind"
    assert list(tmp_path.iterdir()) == []


def test_abort_inside_a_nested_block_keeps_the_fatal_line(tmp_path: Path) -> None:
    proc, left = _run(tmp_path, "abort-inner")
    assert proc.returncode == -signal.SIGABRT
    fatal = "F0000 gpu_device.cc:219] Check failed: err == cudaSuccess (302 vs. 0)"
    assert fatal in left, left
    assert any(ln.startswith("I0000 outer before") for ln in left), left
    assert left.index(fatal) > max(i for i, ln in enumerate(left) if ln.startswith("I0000 outer")), left
    # faulthandler wrote the Python traceback to the real stderr, not into a capture file.
    assert "Fatal Python error: Aborted" in proc.stderr
    assert not any("Fatal Python error" in ln for ln in left)
