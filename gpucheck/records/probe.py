"""The records child (``gpucheck.records.probe:probe_records``): this boot's kernel log and Fabric Manager's state.

The kernel log is read from ``/dev/kmsg`` opened non-blocking, record by record until EAGAIN (a blocking read waits
for the next message for ever), else from ``journalctl -k -b``, else from ``dmesg``, each command bounded in time and
killed with its process group. Below a ``GPUCHECK_HOST_ROOT`` other than ``/`` only that view's ``dev/kmsg`` is read
(a regular file of kmsg records in tests): the commands would read this machine's log, not the view's. It runs in a
child process with a time limit, so a read stuck in the kernel cannot hang the run either.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from gpucheck.isolation import kill_group
from gpucheck.probes.host import host_root, probe_hardware
from gpucheck.protocol import stage
from gpucheck.records.facts import FabricFacts, KernelLogRead, RecordsFacts
from gpucheck.records.parse import Line, kmsg_record, records, text_line

#: How long each command (journalctl, dmesg, systemctl, nv-fabricmanager --version) may take.
COMMAND_TIMEOUT_S = 10.0
#: At most this many records are read (the kernel's buffer holds a few thousand to a few hundred thousand).
MAX_RECORDS = 500_000
#: A kmsg record is at most about 8 KiB (CONSOLE_EXT_LOG_MAX); a smaller buffer fails with EINVAL.
_KMSG_READ = 16384
#: At most this much output is kept of a command (journalctl -k -b of a long boot).
_MAX_OUTPUT = 64 << 20
NVSWITCH_CLASS_PREFIX = "0x0680"
FABRIC_UNIT = "nvidia-fabricmanager"
FABRIC_BINARY = "nv-fabricmanager"
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)")


def probe_records() -> RecordsFacts:
    root = host_root()
    stage("kernel log")
    log, lines = read_kernel_log(root)
    xids = records(lines)
    stage("fabric manager")
    return RecordsFacts(log, xids, fabric_state(root))


# --- the kernel log -----------------------------------------------------------------------------------------------


def read_kernel_log(root: Path) -> tuple[KernelLogRead, list[Line]]:
    """This boot's kernel log, from the first source that answers; the sources tried and what each said."""
    start = time.monotonic()
    tried: list[str] = []
    kmsg = root / "dev/kmsg"
    try:
        lines, truncated = read_kmsg(kmsg)
        return KernelLogRead(str(kmsg), tuple(tried), len(lines), truncated, time.monotonic() - start), lines
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
        code, out, err = run_bounded(argv)
        if code == 0 and out.strip():
            lines = [text_line(ln) for ln in out.splitlines()[:MAX_RECORDS]]
            truncated = out.count("\n") > MAX_RECORDS
            return KernelLogRead(name, tuple(tried), len(lines), truncated, time.monotonic() - start), lines
        tried.append(f"{name}: " + (err.strip().splitlines()[-1][:300] if err.strip() else f"exit status {code}, no output"))
    return KernelLogRead(None, tuple(tried), seconds=time.monotonic() - start), []


def read_kmsg(path: Path) -> tuple[list[Line], bool]:
    """The records of ``path``: the kernel's ``/dev/kmsg`` read non-blocking, one record per read, until EAGAIN (every
    record of the buffer read); a regular file (a host view's) of one record per line. Raises OSError when it cannot
    be read (missing, no privilege: EPERM where dmesg_restrict is set)."""
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


def _kmsg_device(fd: int) -> tuple[list[Line], bool]:
    lines: list[Line] = []
    while len(lines) < MAX_RECORDS:
        try:
            data = os.read(fd, _KMSG_READ)
        except BlockingIOError:
            return lines, False
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                continue  # records were overwritten while reading: the next read returns the oldest left
            raise
        if not data:
            return lines, False
        line = kmsg_record(data.decode("utf-8", errors="replace"))
        if line is not None:
            lines.append(line)
    return lines, True


def _kmsg_file(fd: int) -> tuple[list[Line], bool]:
    os.set_blocking(fd, True)
    chunks: list[bytes] = []
    size = 0
    while size < _MAX_OUTPUT and (chunk := os.read(fd, 1 << 20)):
        chunks.append(chunk)
        size += len(chunk)
    text = b"".join(chunks).decode("utf-8", errors="replace").splitlines()
    lines = [ln for ln in (kmsg_record(t) for t in text[:MAX_RECORDS] if not t.startswith(" ")) if ln is not None]
    return lines, len(text) > MAX_RECORDS or size >= _MAX_OUTPUT


def run_bounded(argv: list[str], timeout: float = COMMAND_TIMEOUT_S) -> tuple[int | None, str, str]:
    """``argv`` run with a time limit, in a session of its own that is killed whole when it overruns; its exit status
    (None: killed), its output (at most 64 MiB kept) and its error output."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env={**os.environ, "LC_ALL": "C", "SYSTEMD_PAGER": ""})
    except OSError as exc:
        return None, "", f"{type(exc).__name__}: {exc}"
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        return None, "", f"did not finish within {timeout:g} s (killed)"
    return proc.returncode, out[:_MAX_OUTPUT].decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace")


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
