"""Settings: one table, one prefix, one order of precedence (no pytest here: rules and the CLI use it).

Every setting ``X`` can be given as the command-line option ``--gpucheck-X``,
the environment variable ``GPUCHECK_X`` or the ini key ``gpucheck_X``
(dashes become underscores), and the first of those that is set wins, in that
order, before the default. A bad value is a :class:`SettingError` that names the
setting and where its value came from; the plugin turns it into a usage error.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: The longest a probe may be given (one day): beyond it the runner's waits overflow the platform's limit.
MAX_TIMEOUT_S = 86400.0


#: The largest absolute memory amount accepted (1 PiB): far above any GPU, far below float overflow.
MAX_MEMORY_BYTES = 1 << 50


class SettingError(ValueError):
    """A bad value for a setting, with the sentence that says so."""


@dataclass(frozen=True)
class Option:
    name: str
    parse: Callable[[str], Any]
    default: str | None
    help: str
    metavar: str = "VALUE"
    #: A switch: ``--gpucheck-X`` alone on the command line, a yes/no value in the environment or ini file.
    switch: bool = False
    #: An option whose value may be left out: ``--gpucheck-X`` alone means this value (``--gpucheck-cluster``).
    const: str | None = None

    @property
    def flag(self) -> str:
        return f"--gpucheck-{self.name}"

    @property
    def dest(self) -> str:
        return "gpucheck_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "GPUCHECK_" + self.name.replace("-", "_").upper()

    @property
    def ini(self) -> str:
        return self.dest


def parse_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("must be a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a positive number of seconds")
    if value > MAX_TIMEOUT_S:
        raise ValueError(f"must be at most {MAX_TIMEOUT_S:g} seconds (one day)")
    return value


_YES = ("1", "true", "yes", "on")
_NO = ("0", "false", "no", "off", "")


def parse_switch(text: str) -> bool:
    value = text.strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    raise ValueError("must be one of 1, true, yes, on or 0, false, no, off")


FRAMEWORKS = ("tensorflow", "none")


def parse_framework(text: str) -> str:
    if text not in FRAMEWORKS:
        raise ValueError(f"must be one of {', '.join(FRAMEWORKS)}")
    return text


#: What a report path names, and so how the report is written there (``gpucheck.report.write_json``):
#: ``"file"``, an existing regular file, and ``"new"``, a path that does not exist yet, are written
#: atomically (a temporary file in the same directory, then a rename); ``"device"`` (a character
#: device such as ``/dev/null`` or a terminal, or a file behind a ``/proc`` magic link) and ``"fifo"``
#: (a named pipe) are written through, since a rename would put a regular file in their place.
REPORT_KINDS = ("file", "new", "device", "fifo")


@dataclass(frozen=True)
class ReportTarget:
    """Where the report goes. ``path`` is absolute; for a ``file`` or a ``new`` path it is the real one,
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


def one_line(message: str) -> str:
    """The message with control characters (a newline in a path) and undecodable bytes escaped, so the
    usage error stays one printable line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|[KMGT]i?B|[KMGT]|B)?\s*$", re.IGNORECASE)
_UNITS = {
    "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4,
    "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
    "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4,
}


def parse_memory(text: str) -> str:
    """An amount of GPU memory: absolute (``2GiB``, ``512MiB``, ``4GB``, bytes) or a share of each GPU's
    total (``10%``). Returned as given (stripped); :func:`memory_bytes` turns it into bytes for a GPU."""
    m = _MEMORY.match(text)
    if not m:
        raise ValueError("must be an amount of memory like 2GiB, 512MiB or a percentage like 10%")
    value, unit = float(m.group(1)), (m.group(2) or "B").upper()
    if unit == "%" and not 0 < value < 100:
        raise ValueError("must be a percentage above 0 and below 100")
    if unit != "%" and value <= 0:
        raise ValueError("must be a positive amount of memory")
    if unit != "%" and (not math.isfinite(value) or value * _UNITS[unit] > MAX_MEMORY_BYTES):
        raise ValueError("must be at most 1 PiB")
    return text.strip()


def memory_bytes(spec: str, total: int) -> int:
    """The bytes ``spec`` (a value :func:`parse_memory` accepted) asks for on a GPU with ``total`` bytes."""
    m = _MEMORY.match(spec)
    if not m:
        raise ValueError(f"not an amount of memory: {spec!r}")
    value, unit = float(m.group(1)), (m.group(2) or "B").upper()
    if unit == "%":
        return int(total * value / 100)
    return int(value * _UNITS[unit])


def parse_share(text: str) -> float:
    """A share of an expected figure: ``50%`` or ``0.5``, above 0 and at most 1."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ValueError("must be a share like 50% or 0.5") from None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise ValueError("must be a share above 0 and at most 100%")
    return value


def parse_gpu_count(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError("must be a whole number of GPUs") from None
    if value < 1:
        raise ValueError("must be a number of GPUs of at least 1")
    return value


#: The most tasks ``--gpucheck-cluster=local:N`` starts (each a TensorFlow process on this machine).
MAX_LOCAL_WORKERS = 8
#: ``local:N`` or ``local:N+ps``.
LOCAL_CLUSTER = re.compile(r"^local:(\d+)(\+ps)?$")


def parse_cluster(text: str) -> str | None:
    """The ``--gpucheck-cluster`` value: ``auto`` (the option alone, or yes/true/1/on: TF_CONFIG, else the
    Slurm step), ``tf_config``, ``slurm``, ``local:N`` / ``local:N+ps`` (N workers, and a chief and a ps,
    on this machine's loopback), or a TF_CONFIG JSON document; None for no/false/0/off."""
    t = text.strip()
    low = t.lower()
    if low in _NO:
        return None
    if low in (*_YES, "auto"):
        return "auto"
    if low in ("tf_config", "slurm"):
        return low
    m = LOCAL_CLUSTER.match(low)
    if m:
        if not 1 <= int(m.group(1)) <= MAX_LOCAL_WORKERS:
            raise ValueError(f"local:N must start 1 to {MAX_LOCAL_WORKERS} workers")
        return low
    if t.startswith("{"):
        return t
    raise ValueError(
        "must be auto, tf_config, slurm, local:N or local:N+ps (N workers on this machine's loopback), "
        "or a TF_CONFIG JSON document"
    )


OPTIONS: tuple[Option, ...] = (
    Option(
        "timeout",
        parse_seconds,
        "60",
        "seconds a probe child process (driver calls, TensorFlow) may take before it is killed "
        "and reported as hung (default 60)",
        "SECONDS",
    ),
    Option("json", parse_report_path, None, "write the report JSON (schema gpucheck-report/1) to PATH", "PATH"),
    Option(
        "min-free-memory",
        parse_memory,
        "10%",
        "free memory each GPU must have for the work: absolute (2GiB, 512MiB) or a share of the GPU's "
        "memory (10%); less is gpu-memory-exhausted (default 10%)",
        "AMOUNT",
    ),
    Option(
        "expect-gpus",
        parse_gpu_count,
        None,
        "how many GPUs this machine should show; another count is gpu-count-mismatch",
        "N",
    ),
    Option(
        "framework",
        parse_framework,
        "tensorflow",
        "the framework to diagnose: tensorflow, or none for the GPU stack alone (hardware, kernel, driver, "
        "visibility, resources, health: a node's health without TensorFlow; default tensorflow)",
        "NAME",
    ),
    Option(
        "deep",
        parse_switch,
        None,
        "also try what the environment does not use and costs a TensorFlow process more "
        "(TF_GPU_ALLOCATOR=cuda_malloc_async), and without a GPU run the numerics and XLA steps on the CPU",
        switch=True,
    ),
    Option(
        "benchmarks",
        parse_switch,
        None,
        "also measure how well TensorFlow uses each device (the performance layer): matmul by dtype, matpow, "
        "copy bandwidth, cuDNN convolution, launch latency, all-reduce and multi-device scaling, as "
        "pytest-benchmark benchmarks (--benchmark-json and --benchmark-save keep them)",
        switch=True,
    ),
    Option(
        "min-share",
        parse_share,
        "50%",
        "the share of a GPU model's expected figure (TFLOP/s, GB/s) a benchmark must reach; less is "
        "gpu-underperforming (default 50%)",
        "SHARE",
    ),
    Option(
        "min-scaling",
        parse_share,
        "60%",
        "the efficiency multi-GPU training must keep (speed-up over one GPU / GPU count); less is "
        "scaling-inefficient (default 60%)",
        "SHARE",
    ),
    Option(
        "cluster",
        parse_cluster,
        None,
        "also check the multi-worker cluster this task belongs to (the cluster layer): TF_CONFIG, or the Slurm "
        "step, or SPEC (local:N[+ps]: N workers and a ps on this machine's loopback; tf_config; slurm; a "
        "TF_CONFIG JSON document; write it --gpucheck-cluster=SPEC): its configuration, its peers reached, and a "
        "real all-reduce over gRPC (or the ps/worker smoke test). A set TF_CONFIG is validated on every run",
        "SPEC",
        const="auto",
    ),
    Option(
        "cluster-timeout",
        parse_seconds,
        "60",
        "seconds every peer of the cluster has to come up (each node starts its check when it starts) and the "
        "collective to finish; a task that answers but never joins is stopped 30 s after it, TensorFlow's "
        "import and set-up (default 60)",
        "SECONDS",
    ),
)


@dataclass(frozen=True)
class Settings:
    timeout: float = 60.0
    json: str | None = None
    #: As given (``2GiB``, ``10%``); options.memory_bytes() says how many bytes that is on a GPU.
    min_free_memory: str = "10%"
    expect_gpus: int | None = None
    #: "tensorflow", or "none" for the GPU stack alone (no framework probes: a node's health without TensorFlow).
    framework: str = "tensorflow"
    #: --gpucheck-deep: the slower, deeper probes too.
    deep: bool = False
    #: --gpucheck-benchmarks: the performance layer's benchmarks too.
    benchmarks: bool = False
    #: The share of an expected figure a GPU must reach, and the multi-GPU scaling efficiency it must keep.
    min_share: float = 0.5
    min_scaling: float = 0.6
    #: --gpucheck-cluster (``gpucheck.settings.parse_cluster``): None when not asked.
    cluster: str | None = None
    cluster_timeout: float = 60.0
    #: Whether TF_CONFIG is set in the environment: its configuration is validated even without --gpucheck-cluster.
    tf_config_set: bool = False
    #: Where each value came from ("--gpucheck-timeout", "GPUCHECK_TIMEOUT", "ini gpucheck_timeout", "default").
    sources: tuple[tuple[str, str], ...] = ()


#: Looks a setting up on the command line (``--gpucheck-X`` dest) or in the ini file (key): None when unset.
Lookup = Callable[[str], Any]


def resolve(
    cli: Lookup, ini: Lookup, environ: Mapping[str, str] | None = None, ini_origin: str = "the ini file"
) -> Settings:
    """The settings from the command line, the environment and the ini file, in that order."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: list[tuple[str, str]] = []
    for opt in OPTIONS:
        raw, origin = _raw(cli, ini, opt, env, ini_origin)
        if raw is None:
            sources.append((opt.name, "default"))  # the Settings field's own default
            continue
        try:
            values[opt.dest[len("gpucheck_") :]] = opt.parse(raw)
        except ValueError as exc:
            raise SettingError(f"{opt.flag} {exc} (got {raw!r} from {origin})") from None
        sources.append((opt.name, origin))
    return Settings(**values, tf_config_set="TF_CONFIG" in env, sources=tuple(sources))


def _raw(cli: Lookup, ini: Lookup, opt: Option, env: Mapping[str, str], ini_origin: str) -> tuple[str | None, str]:
    value = cli(opt.dest)
    if value is not None:
        return str(value), opt.flag
    if opt.env in env:
        return str(env[opt.env]), f"environment variable {opt.env}"
    value = ini(opt.ini)
    if value not in (None, "", []):
        return str(value), f"ini key {opt.ini} in {ini_origin}"
    if opt.default is not None:
        return opt.default, "default"
    return None, "default"
