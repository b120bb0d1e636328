"""The records child (``gpucheck.records.probe:probe_records``): this boot's kernel log and Fabric Manager's state.

The kernel log is read from ``/dev/kmsg`` opened non-blocking, record by record until EAGAIN (a blocking read waits
for the next message for ever), else from ``journalctl -k -b``, else from ``dmesg``, each command bounded in time and
killed with its process group. Every source is read to its end, keeping its newest records (a ring): at most
``MAX_RECORDS`` of them and ``_MAX_OUTPUT`` bytes, held while reading, never more; a line longer than any record of the
kernel's is skipped and counted, and a device that does not end is read no further than ``_MAX_DEVICE_READ`` and said
to be unfinished. Of the Xid records parsed, the child keeps (``parse.read_records``) the newest ``parse.KEPT``
processes of each code on each device and the newest ``KEPT`` codes NVIDIA's catalog does not have, and counts the
others exactly (``RecordsFacts.dropped``, ``uncatalogued``, ``application_processes``): what it writes, the parent
reads back and the rules judge is bounded however many processes a log names, and a record naming no process (an
Xid 79, 119, an SXid) is always kept. Below a ``GPUCHECK_HOST_ROOT`` other than ``/`` only that view's ``dev/kmsg`` is read
(a regular file of kmsg records in tests): the commands would read this machine's log, not the view's. It runs in a
child process with a time limit, so a read stuck in the kernel cannot hang the run either.
"""

from __future__ import annotations

import errno
import os
import re
import selectors
import shutil
import stat
import subprocess
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from gpucheck.isolation import kill_group
from gpucheck.probes.host import host_root, probe_hardware
from gpucheck.protocol import stage
from gpucheck.records.driverlog import driver_records
from gpucheck.records.facts import FabricFacts, KernelLogRead, RecordsFacts
from gpucheck.records.nvlink5 import nvlink_records
from gpucheck.records.parse import KEPT, Line, kmsg_record, read_records, text_line

#: How long each command (journalctl, dmesg, systemctl, nv-fabricmanager --version) may take.
COMMAND_TIMEOUT_S = 10.0
#: At most this many records are kept, the newest (the kernel's buffer holds a few thousand to a few hundred thousand).
MAX_RECORDS = 500_000
#: A kmsg record is at most about 8 KiB (CONSOLE_EXT_LOG_MAX); a smaller buffer fails with EINVAL.
_KMSG_READ = 16384
#: A line longer than this is no record of the kernel's (with journalctl's or dmesg's prefix): skipped, counted.
_MAX_LINE = _KMSG_READ
#: At most this much of a source is kept, its newest part (journalctl -k -b of a long boot), and held while reading.
_MAX_OUTPUT = 64 << 20
#: A /dev/kmsg that has not ended (EAGAIN) after this much is read no further (the kernel's buffer is at most 32 MiB).
_MAX_DEVICE_READ = 128 << 20
#: What a command's error output keeps (its last part), and the size of each read of a stream.
_MAX_ERROR_OUTPUT = 64 << 10
_CHUNK = 1 << 20
NVSWITCH_CLASS_PREFIX = "0x0680"
FABRIC_UNIT = "nvidia-fabricmanager"
FABRIC_BINARY = "nv-fabricmanager"
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)")


def probe_records() -> RecordsFacts:
    root = host_root()
    stage("kernel log")
    log, lines = read_kernel_log(root)
    # Bounded here, as parsed: what the child writes, the parent reads back and the rules judge stays the same size
    # however many processes the log names (the newest records of each code and device, the others counted).
    xids = read_records(lines, KEPT)
    stage("fabric manager")
    nvlink, follow_ups = nvlink_records(lines)
    return RecordsFacts(replace(log, unreadable=xids.unreadable), xids.xids, fabric_state(root),
                        driver=driver_records(lines), nvlink=nvlink, follow_ups=follow_ups, kept=KEPT,
                        dropped=xids.dropped, application_processes=xids.application_processes,
                        uncatalogued=xids.uncatalogued)


# --- the kernel log -----------------------------------------------------------------------------------------------


class Tail:
    """The newest part of a stream, bounded while it is read: its last ``keep`` bytes (at least, at most a chunk
    more), then its last ``max_lines`` lines of at most ``max_line`` bytes each. Each chunk costs a count of its
    newlines and an append: the stream's length costs no memory."""

    def __init__(self, keep: int = _MAX_OUTPUT, max_lines: int = MAX_RECORDS, max_line: int = _MAX_LINE) -> None:
        self.keep, self.max_lines, self.max_line = keep, max_lines, max_line
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._newlines = 0
        self._last = b"\n"
        #: Bytes dropped off the front: the first line kept is the end of a line cut there.
        self.cut = False

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self._newlines += data.count(b"\n")
        self._last = data[-1:]
        self._chunks.append(data)
        self._size += len(data)
        while self._size - len(self._chunks[0]) >= self.keep:
            self._size -= len(self._chunks.popleft())
            self.cut = True

    def lines(self) -> tuple[list[str], int, int]:
        """The lines kept (the newest), how many older ones were dropped, how many kept ones were too long (skipped)."""
        parts = b"".join(self._chunks).split(b"\n")
        total = self._newlines + (self._last != b"\n")
        if parts[-1] == b"":
            parts.pop()
        if self.cut:
            parts = parts[1:]
        fitting = [p for p in parts if len(p) <= self.max_line]
        overlong = len(parts) - len(fitting)
        kept = fitting[-self.max_lines:] if self.max_lines else []
        return [p.decode("utf-8", errors="replace") for p in kept], total - len(kept) - overlong, overlong


def read_kernel_log(root: Path) -> tuple[KernelLogRead, list[Line]]:
    """This boot's kernel log, from the first source that answers; the sources tried and what each said."""
    start = time.monotonic()
    tried: list[str] = []
    kmsg = root / "dev/kmsg"
    try:
        lines, read = read_kmsg(kmsg)
        return replace(read, source=str(kmsg), tried=tuple(tried), seconds=time.monotonic() - start), lines
    except OSError as exc:
        tried.append(f"{kmsg}: {type(exc).__name__}: {exc.strerror or exc}")
    if root != Path("/"):
        tried.append(f"journalctl, dmesg: not asked, GPUCHECK_HOST_ROOT={root} is a view of another host")
        return KernelLogRead(None, tuple(tried), seconds=time.monotonic() - start), []
    for name, argv in (("journalctl -k -b", ["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager", "-q"]),
                       ("dmesg", ["dmesg"])):
        if shutil.which(argv[0]) is None:
            tried.append(f"{name}: not installed")
            continue
        code, out, err = run_streamed(argv)
        text, dropped, overlong = out.lines()
        if code == 0 and any(t.strip() for t in text):
            lines = [text_line(t) for t in text]
            return KernelLogRead(name, tuple(tried), len(lines), dropped > 0, time.monotonic() - start, dropped,
                                 overlong), lines
        tried.append(f"{name}: " + (err.strip().splitlines()[-1][:300] if err.strip() else f"exit status {code}, no output"))
    return KernelLogRead(None, tuple(tried), seconds=time.monotonic() - start), []


def read_kmsg(path: Path) -> tuple[list[Line], KernelLogRead]:
    """The newest records of ``path`` and how the reading went (its source and time left for the caller): the kernel's
    ``/dev/kmsg`` read non-blocking, one record per read, until EAGAIN (every record of the buffer read); a regular
    file (a host view's) of one record per line. Raises OSError when it cannot be read (missing, no privilege: EPERM
    where dmesg_restrict is set)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            return _kmsg_file(fd)
        if not stat.S_ISCHR(mode):
            raise OSError(errno.EINVAL, "neither the kernel's /dev/kmsg nor a regular file", str(path))
        return _kmsg_device(fd)
    finally:
        os.close(fd)


def _kmsg_device(fd: int) -> tuple[list[Line], KernelLogRead]:
    lines: deque[Line] = deque(maxlen=MAX_RECORDS)
    seen = read = 0
    while read < _MAX_DEVICE_READ:
        try:
            data = os.read(fd, _KMSG_READ)
        except BlockingIOError:
            break
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                continue  # records were overwritten while reading: the next read returns the oldest left
            raise
        if not data:
            break
        read += len(data)
        line = kmsg_record(data.decode("utf-8", errors="replace"))
        if line is not None:
            seen += 1
            lines.append(line)
    else:
        unfinished = f"it had not ended after {_MAX_DEVICE_READ >> 20} MiB (no kernel log is that long)"
        return list(lines), _read(len(lines), seen - len(lines), unfinished=unfinished)
    return list(lines), _read(len(lines), seen - len(lines))


def _kmsg_file(fd: int) -> tuple[list[Line], KernelLogRead]:
    os.set_blocking(fd, True)
    tail = Tail()
    while chunk := os.read(fd, _CHUNK):
        tail.feed(chunk)
    text, dropped, overlong = tail.lines()
    lines = [ln for ln in (kmsg_record(t) for t in text if not t.startswith(" ")) if ln is not None]
    return lines, _read(len(lines), dropped, overlong)


def _read(records: int, dropped: int, overlong: int = 0, unfinished: str | None = None) -> KernelLogRead:
    return KernelLogRead(None, (), records, dropped > 0, None, dropped, overlong, 0, unfinished)


def run_streamed(argv: list[str], timeout: float = COMMAND_TIMEOUT_S) -> tuple[int | None, Tail, str]:
    """``argv`` run with a time limit, in a session of its own that is killed whole when it overruns; its exit status
    (None: it did not finish), the newest part of its output (:class:`Tail`, bounded while it is read) and the end of
    its error output. Nothing is read after the time limit, so a grandchild that holds the pipe open holds nothing."""
    out, err = Tail(), Tail(_MAX_ERROR_OUTPUT, max_lines=100)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env={**os.environ, "LC_ALL": "C", "SYSTEMD_PAGER": ""})
    except OSError as exc:
        return None, out, f"{type(exc).__name__}: {exc}"
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    finished = True
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                finished = False
                break
            for key, _ in sel.select(left):
                data = os.read(key.fd, _CHUNK)
                if data:
                    key.data.feed(data)
                else:
                    sel.unregister(key.fileobj)
    code: int | None = None
    if finished:
        try:
            code = proc.wait(max(deadline - time.monotonic(), 0.5))  # its pipes closed: it is ending
        except subprocess.TimeoutExpired:
            finished = False
    if not finished:
        kill_group(proc)
        try:
            proc.wait(1.0)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel: SIGKILL lands when it returns; left to the kernel
    proc.stdout.close()
    proc.stderr.close()
    if not finished:
        return None, out, f"did not finish within {timeout:g} s (killed)"
    return code, out, "\n".join(err.lines()[0])


def run_bounded(argv: list[str], timeout: float = COMMAND_TIMEOUT_S) -> tuple[int | None, str, str]:
    """:func:`run_streamed` with its output as text (its newest part, at most 64 MiB)."""
    code, out, err = run_streamed(argv, timeout)
    return code, "\n".join(out.lines()[0]), err


# --- Fabric Manager -----------------------------------------------------------------------------------------------


def fabric_state(root: Path) -> FabricFacts | None:
    """What can be seen of Fabric Manager where an NVSwitch is on the PCI bus (None where none is)."""
    hw = probe_hardware(root)
    switches = tuple(d.bus_id for d in hw.nvidia_devices if d.pci_class.startswith(NVSWITCH_CLASS_PREFIX))
    if not switches:
        return None
    try:
        nodes = tuple(sorted(f"/dev/{n}" for n in os.listdir(root / "dev") if n.startswith("nvidia-nvswitch")))
    except OSError:
        nodes = ()
    unit = _unit_state(root)
    version, binary, version_error = _version(root)
    return FabricFacts(switches, nodes, *unit, processes=tuple(_processes(root)), version=version, binary=binary,
                       version_error=version_error)


def _unit_state(root: Path) -> tuple[str | None, str | None, str | None, str | None, str | None]:
    if root != Path("/"):
        return None, None, None, None, f"not asked: GPUCHECK_HOST_ROOT={root} is a view of another host"
    if shutil.which("systemctl") is None:
        return None, None, None, None, "systemctl is not installed (no systemd here)"
    props = ("LoadState", "ActiveState", "SubState", "Result")
    code, out, err = run_bounded(["systemctl", "show", FABRIC_UNIT, *(f"--property={p}" for p in props)], 5.0)
    values = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)
    if code != 0 or not values:
        return None, None, None, None, (err.strip() or f"systemctl show exit status {code}")[:300]
    load, active, sub, result = (values.get(p) or None for p in props)
    return load, active, sub, result, None


def _processes(root: Path) -> Iterator[str]:
    proc = root / "proc"
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        try:
            comm = (proc / pid / "comm").read_text(errors="replace").strip()
            if not FABRIC_BINARY.startswith(comm) or len(comm) < 8:
                continue
            cmdline = (proc / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        yield f"pid {pid}: {cmdline or comm}"


def _version(root: Path) -> tuple[str | None, str | None, str | None]:
    candidates = [root / "usr/bin" / FABRIC_BINARY, root / "usr/sbin" / FABRIC_BINARY]
    if root == Path("/") and (found := shutil.which(FABRIC_BINARY)):
        candidates.insert(0, Path(found))
    binary = next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)
    if binary is None:
        return None, None, f"{FABRIC_BINARY} is not installed ({', '.join(str(c) for c in candidates)})"
    code, out, err = run_bounded([str(binary), "--version"], 5.0)
    m = _VERSION.search(out) or _VERSION.search(err)
    if m is None:
        return None, str(binary), f"{binary} --version: exit status {code}: {(out + err).strip()[:200]}"
    return m.group(1), str(binary), None
