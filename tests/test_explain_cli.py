"""`gpucheck explain` on what people hand it (issues 23 and 26): a reader that closes the pipe after the first
line (`gpucheck explain LOG | head -1`), a log saved by Windows PowerShell (UTF-16 LE with its BOM), bytes that
are not UTF-8 on standard input, a FIFO no program writes to, /dev/zero. Each through the real command line
(the console script), on real logs of tests/logs; a usage error or unreadable input is one sentence, exit 2.
"""

from __future__ import annotations

import codecs
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucheck.cli import run_explain

LOGS = Path(__file__).parent / "logs"
ISSUE23 = LOGS / "issue23"
GPUCHECK = Path(sys.executable).with_name("gpucheck")


def _big_log(tmp_path: Path) -> Path:
    """Every real single-machine log of tests/logs one after another: a long log with many causes."""
    parts = [p.read_bytes() for p in sorted(LOGS.rglob("*.log")) if "cluster" not in p.parts]
    path = tmp_path / "all.log"
    path.write_bytes(b"\n".join(parts))
    return path


def _no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and "Exception ignored" not in stderr, stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
@pytest.mark.parametrize("as_json", [False, True])
def test_a_reader_that_closes_after_the_first_line(tmp_path: Path, as_json: bool) -> None:
    """`gpucheck explain LOG | head -1`: the pipe holds one page, so the command is still writing when the
    reader closes it after the first line; it ends without a traceback, with the log's own exit status."""
    import fcntl

    log = _big_log(tmp_path)
    whole = io.StringIO()
    status = run_explain(log.read_text(encoding="utf-8", errors="replace").splitlines(), as_json, whole)
    assert status == 1 and len(whole.getvalue()) > 8 * 4096  # far more than the pipe holds
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    args = [str(GPUCHECK), "explain", *(["--json"] if as_json else []), str(log)]
    with subprocess.Popen(args, stdout=write_end, stderr=subprocess.PIPE, text=True) as proc:
        os.close(write_end)
        first = b""
        while not first.endswith(b"\n"):
            byte = os.read(read_end, 1)
            if not byte:
                break
            first += byte
        os.close(read_end)
        _out, err = proc.communicate(timeout=300)
    assert first.decode() == ("{\n" if as_json else whole.getvalue().splitlines(keepends=True)[0])
    _no_traceback(err)
    assert proc.returncode == status


def test_a_reader_gone_before_the_first_line(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    log = ISSUE23 / "tf-22718-nvidia-smi-352-driver-384.log"
    with subprocess.Popen([str(GPUCHECK), "explain", str(log)], stdout=write_end, stderr=subprocess.PIPE, text=True) as proc:
        os.close(write_end)
        _out, err = proc.communicate(timeout=300)
    _no_traceback(err)
    assert proc.returncode == 1


def _explain(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(GPUCHECK), "explain", *args], input=stdin, capture_output=True, check=False, timeout=300)


def test_a_log_saved_by_windows_powershell(tmp_path: Path) -> None:
    """PowerShell's `python train.py 2> log.txt` writes UTF-16 LE with a byte-order mark and CRLF line ends."""
    text = (LOGS / "history" / "tf-57103-cudart64-110.log").read_text(encoding="utf-8")
    saved = tmp_path / "log.txt"
    saved.write_bytes(codecs.BOM_UTF16_LE + text.replace("\n", "\r\n").encode("utf-16-le"))
    assert b"\x00" in saved.read_bytes()[:8]
    proc = _explain(str(saved))
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.decode()
    assert "cuda-runtime-missing [libraries, blocker]" in out and "cudart64_110.dll" in out
    assert f"{len(text.splitlines())} lines read" in out


def test_bytes_that_are_not_utf8_on_standard_input() -> None:
    """The bare paste saved by a Chinese Windows console (code page 936, GBK): not UTF-8, read, no traceback."""
    text = (ISSUE23 / "fnsflm-23-bare-libcudart-html-quotes.log").read_text(encoding="utf-8")
    data = text.encode("gbk")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    proc = _explain("-", stdin=data)
    _no_traceback(proc.stderr.decode())
    assert proc.returncode == 1 and b"cuda-runtime-missing" in proc.stdout and b"libcudart.so.10.1" in proc.stdout


def test_a_fifo_no_program_writes_to(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    proc = _explain(str(fifo))
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.startswith("gpucheck explain: ") and err.count("\n") == 1, err
    assert "nothing came from" in err and proc.stdout == b""


def test_dev_zero_is_refused_in_a_sentence() -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    proc = _explain("/dev/zero")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.startswith("gpucheck explain: /dev/zero is larger than") and err.count("\n") == 1, err
    assert proc.stdout == b""
