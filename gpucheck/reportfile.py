"""The report file: where a path leads (a new file, a file, a device, a FIFO), whether a report can be
written there (checked at start, so a bad path is a usage error and not a lost report), and the write
itself (atomic for files, through for devices and FIFOs), every failure one sentence naming the path."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Any

#: Temporary files beside the report while it is written.
TEMP_PREFIX = ".gpucheck-report-"
#: The exit status when the run itself went well but the report could not be written (pytest's own codes
#: are 0 to 5).
EXIT_REPORT_NOT_WRITTEN = 6


def one_line(message: str) -> str:
    """The message with control characters (a newline in a path) and undecodable bytes escaped, so the
    sentence stays one printable line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def same_file(a: str, b: str) -> bool:
    """``a`` and ``b`` name one file (through links, or ``./x`` and ``x``; a path not there yet by its real path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def reader_gone(out: Any) -> None:
    """The reader of ``out`` went away (`| head`): what it read stands. Point the descriptor at /dev/null so the
    interpreter's last flush at exit finds somewhere to write, instead of printing a BrokenPipeError."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


@dataclass(frozen=True)
class ReportTarget:
    """Where the report goes, and how it is written there (``kind``): ``"file"``, an existing regular file,
    and ``"new"``, a path that does not exist yet, are written atomically (a temporary file in the same
    directory, then a rename); ``"device"`` (a character device such as ``/dev/null`` or a terminal, or a
    file behind a ``/proc`` magic link) and ``"fifo"`` (a named pipe) are written through, since a rename
    would put a regular file in their place. ``path`` is absolute; for a ``file`` or a ``new`` path it is the real one,
    symlinks resolved (a rename over a link would replace the link, not write where it points); a
    ``device`` or ``fifo`` keeps the path as given, since ``open`` follows links itself (``/dev/stdout``
    is a link to ``/proc/self/fd/1``, whose target is no path at all when it is a pipe)."""

    path: str
    kind: str


def report_target(text: str) -> ReportTarget:
    """What ``text`` names and how a report is written there; :class:`ValueError` with the reason
    (a sentence fragment: "it is a directory") when no report can be written there whatever the
    permissions. Symlinks are followed to what they point at, as ``open(path, "w")`` and a shell's
    ``>`` follow them: a user who points the report at a link means the file behind it."""
    if not text.strip():
        raise ValueError("it is empty")
    if "\0" in text:
        raise ValueError("it contains a NUL character")
    try:
        os.fsencode(text)
        path = os.path.abspath(text)
        st = os.stat(path)
    except UnicodeError:
        raise ValueError("the file system cannot encode it") from None
    except FileNotFoundError:
        # A new path, or a dangling symlink: the file is created where the link points.
        real = os.path.realpath(path)
        ancestor = _existing_ancestor(os.path.dirname(real))
        if not os.path.isdir(ancestor):
            raise ValueError(f"{ancestor} is not a directory") from None
        return ReportTarget(real, "new")
    except NotADirectoryError:
        raise ValueError(f"{_existing_ancestor(os.path.dirname(os.path.realpath(text)))} is not a directory") from None
    except OSError as exc:
        raise ValueError(exc.strerror or str(exc)) from None
    mode = st.st_mode
    if stat.S_ISREG(mode):
        real = os.path.realpath(path)
        try:
            same = os.path.samestat(st, os.stat(real))
        except OSError:
            same = False
        # Not the same file: a magic link of /proc (a deleted file's descriptor); write through it.
        return ReportTarget(real, "file") if same else ReportTarget(path, "device")
    if stat.S_ISDIR(mode):
        raise ValueError("it is a directory")
    if stat.S_ISCHR(mode):
        return ReportTarget(path, "device")
    if stat.S_ISFIFO(mode):
        return ReportTarget(path, "fifo")
    if stat.S_ISBLK(mode):
        raise ValueError("it is a block device (a disk or partition), which a report would overwrite")
    if stat.S_ISSOCK(mode):
        raise ValueError("it is a socket, which cannot be opened as a file")
    raise ValueError("it is not a file, a FIFO or a character device")


def _existing_ancestor(directory: str) -> str:
    while not os.path.lexists(directory):
        directory = os.path.dirname(directory)
    return directory


def check_report_writable(target: ReportTarget) -> None:
    """Try what writing the report will do, without writing it: :class:`ValueError` with the reason when
    it would fail. ``os.access`` is not enough: it says yes to root for every file, ``/proc/version``
    included, and knows nothing of read-only file systems."""
    if target.kind == "fifo":
        # Opening it would hand an EOF to a reader already waiting; for a FIFO the permission bits are all
        # there is to it (a FIFO on a read-only file system can be written). No reader yet is fine: it may
        # come before the run ends, and write_json says so when it has not.
        if not os.access(target.path, os.W_OK):
            raise ValueError("the FIFO is not writable (Permission denied)")
        return
    if target.kind == "device":
        _try_open(target.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        return
    directory = os.path.dirname(target.path)
    if target.kind == "new":
        directory = _existing_ancestor(directory)
    _try_create_in(directory)
    if target.kind == "file":
        # Replaced by a rename, but a file that may not be written is not one the user means to replace
        # (nor is an immutable one); O_APPEND without O_TRUNC leaves it as it is.
        _try_open(target.path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_NONBLOCK)
        _check_sticky(target.path, directory)


def _try_open(path: str, flags: int) -> None:
    try:
        fd = os.open(path, flags | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(f"it cannot be opened for writing ({exc.strerror})") from None
    os.close(fd)


def _try_create_in(directory: str) -> None:
    probe = os.path.join(directory, f".gpucheck-probe-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ValueError(f"no file can be created in {directory} ({exc.strerror})") from None
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass


def _check_sticky(path: str, directory: str) -> None:
    """In a sticky directory (``/tmp``) only the owner of a file, of the directory, or root may rename over it."""
    try:
        dst, fst = os.stat(directory), os.stat(path)
    except OSError:
        return
    euid = os.geteuid()
    if dst.st_mode & stat.S_ISVTX and euid not in (0, dst.st_uid, fst.st_uid):
        raise ValueError(
            f"it belongs to another user in the sticky directory {directory}, where only its owner may replace it"
        )


def parse_report_path(text: str) -> str:
    """A path the report can be written to, checked at start by trying what the write will do (a usage
    error then, not a lost report at the end). Returned absolute, so that a test changing the working
    directory does not move the report."""
    if not text.strip():
        raise ValueError("must be a file path")
    try:
        target = report_target(text)
        check_report_writable(target)
    except ValueError as exc:
        raise ValueError(one_line(f"cannot write the report to {text}: {exc}")) from None
    return os.path.abspath(text)


class ReportWriteError(OSError):
    """The report could not be written; ``str()`` is the sentence to show ("cannot write the report to
    PATH: why"), naming the path the user gave, never a temporary file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(one_line(f"cannot write the report to {path}: {reason}"))
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


def write_report(path: str, text: str) -> None:
    """Write ``text`` to ``path`` the way its kind asks (``gpucheck.settings.report_target``):

    - a new path or an existing regular file: atomically, a temporary file in the same directory renamed
      over it, so a reader never sees half a report. A new file's mode follows the umask, as with
      ``open(path, "w")``; an existing file keeps its mode (and, where allowed, its owner and group).
    - a symlink: followed, and the same rules applied to what it points at; the link itself stays.
    - a character device (``/dev/null``, a terminal): written through, never replaced.
    - a FIFO: written through when a process reads it. It is opened without blocking, so a FIFO that no
      process has open for reading is an error (ENXIO) instead of a run that never ends.
    - a directory, a block device or a socket: refused.

    Every failure is a :class:`ReportWriteError` naming ``path``.
    """
    data = text.encode("utf-8")
    try:
        target = report_target(path)
    except ValueError as exc:
        raise ReportWriteError(path, str(exc)) from None
    if target.kind == "fifo":
        _write_through(path, target.path, data, fifo=True)
    elif target.kind == "device":
        _write_through(path, target.path, data, fifo=False)
    else:
        _write_atomically(path, target.path, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_through(given: str, path: str, data: bytes, fifo: bool) -> None:
    # O_NONBLOCK for the open only: a FIFO without a reader fails with ENXIO instead of blocking, and a
    # device that waits in open (a serial line without carrier) does not hang the run. O_TRUNC is ignored
    # for FIFOs and devices; it empties a regular file reached through a /proc magic link.
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if fifo else os.O_TRUNC)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if fifo and exc.errno == errno.ENXIO:
            raise ReportWriteError(
                given, "it is a FIFO that no process reads (start its reader before the run ends)"
            ) from None
        raise ReportWriteError(given, f"it cannot be opened for writing ({exc.strerror})") from None
    try:
        os.set_blocking(fd, True)
        _write_all(fd, data)
    except OSError as exc:
        raise ReportWriteError(given, f"writing failed ({exc.strerror})") from None
    finally:
        os.close(fd)


def _write_atomically(given: str, path: str, data: bytes) -> None:
    directory, name = os.path.split(path)
    try:
        old: os.stat_result | None = os.stat(path)
    except OSError:
        old = None
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise ReportWriteError(given, f"{directory} cannot be created ({exc.strerror})") from None
    fd, tmp = _create_temporary(given, directory, name)
    try:
        try:
            if old is not None:
                _keep_owner_and_mode(fd, old)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise ReportWriteError(given, f"writing failed ({exc.strerror})") from None
        raise


def _create_temporary(given: str, directory: str, name: str) -> tuple[int, str]:
    """A new file beside the target, created as ``open(path, "w")`` creates one: mode 0o666 less the
    umask (the kernel applies it, and a default ACL), not mkstemp's 0o600."""
    for _ in range(100):
        # The target's name, shortened: the temporary one must fit in NAME_MAX too.
        tmp = os.path.join(directory, f"{TEMP_PREFIX}{name[:64]}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise ReportWriteError(given, f"no file can be created in {directory} ({exc.strerror})") from None
    raise ReportWriteError(given, f"no unused temporary name in {directory}")


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            pass  # Not root: the report is ours now, as an editor's save would make it.
    os.fchmod(fd, stat.S_IMODE(old.st_mode))
